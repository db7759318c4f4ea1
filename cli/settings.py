"""Broker settings for the CLI: options, ``offloader.toml`` in the home directory, defaults.

Precedence, highest first: command-line options, ``<home>/offloader.toml``, Pulsar's defaults
(:class:`~offloader.api.BrokerSettings`). The file may also name the object store, so that a
configured home needs no ``--store`` on every command::

    # .offloader/offloader.toml
    store = "s3://my-bucket/offload"      # --store / OFFLOADER_STORE win
    metadata = "postgresql://offloader@db-host:5432/offloader"  # --metadata wins; SQLite if unset
    endpoint_url = "http://127.0.0.1:9000"  # --endpoint-url wins; AWS_ENDPOINT_URL if unset
    region = "us-east-1"
    metrics_addr = "127.0.0.1:9108"         # service run serves metrics; --metrics-addr wins

    [broker]
    max_entries_per_ledger = 50000
    max_ledger_size = "2G"
    max_block_size = "64M"        # at least 5M for s3:// stores
    read_buffer_size = "1M"
    offload_concurrency = 4
    one_request_upload_max = "64M"  # gs://, az://: a smaller data object is one request
    min_rollover_time = "10m"     # not above max_rollover_time
    max_rollover_time = "4h"
    offload_deletion_lag = "4h"   # broker default when a namespace sets none
    orphan_min_age = "1h"
    cluster_lease = "60s"         # shared metadata store: lease of a service on cluster work
    fsync = "always"              # always | batch | never

Sizes and times are strings with Pulsar's units (``10M``, ``4h``) or plain integers (bytes,
seconds). A bad value is reported with where it came from: the option (a usage error, exit code
2), or the file's path and key, or the environment variable (an operational
:class:`~offloader.errors.ConfigError`, exit code 1).

The settings options come in groups, each a decorator that adds only the options that matter to
a command: :func:`rollover_options` (commands that write ledgers), :func:`offload_options`
(commands that offload), :func:`read_options` (commands that read offloaded ledgers), and
:func:`broker_options`, all three (``service run``). :func:`open_offloader` builds the
:class:`~offloader.api.Offloader` every store-backed command uses. The file itself is read by
:mod:`cli.config_file`; the click types for sizes, times and positions are in :mod:`cli.params`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

from cli.config_file import FileConfig, apply_broker_values, load_file_config, toml_text
from cli.context import CliContext
from cli.params import DURATION, DurationParam, SizeParam
from formats.wire import S3_MIN_PART_SIZE
from offloader.api import BrokerSettings, Metrics, Offloader
from offloader.errors import ConfigError, ObjectNotFound
from offloader.location import endpoint_variable, is_s3_url
from offloader.logs import redact

_META_KEY = "offloader.broker_options"

F = TypeVar("F", bound=Callable[..., Any])

# --- shared options ------------------------------------------------------------------------
#: (parameter name, option): ledger rollover, for the commands that write ledgers
_ROLLOVER_OPTIONS: tuple[tuple[str, Callable[[F], F]], ...] = (
    (
        "max_entries_per_ledger",
        click.option(
            "--max-entries-per-ledger",
            type=click.IntRange(min=1),
            help="Roll a ledger over after this many entries (default: 50000, as in Pulsar).",
        ),
    ),
    (
        "max_ledger_size",
        click.option(
            "--max-ledger-size",
            type=SizeParam(minimum=1),
            help="Roll a ledger over at this size, e.g. 1G (default: 2G, as in Pulsar).",
        ),
    ),
    (
        "min_rollover_time",
        click.option(
            "--min-rollover-time",
            type=DURATION,
            help="Never roll a ledger over younger than this, e.g. 1m; 0 = as soon as it is "
            "full (default: 10m, as in Pulsar).",
        ),
    ),
    (
        "max_rollover_time",
        click.option(
            "--max-rollover-time",
            type=DurationParam(minimum=1),
            help="Roll a non-empty ledger over at this age, e.g. 1h; not below "
            "--min-rollover-time (default: 4h, as in Pulsar).",
        ),
    ),
)
#: offload blocks, for the commands that offload
_OFFLOAD_OPTIONS: tuple[tuple[str, Callable[[F], F]], ...] = (
    (
        "max_block_size",
        click.option(
            "--max-block-size",
            type=SizeParam(minimum=1024),
            help="Offload block size, e.g. 16M; at least 5M for s3:// stores (default: 64M, "
            "as in Pulsar).",
        ),
    ),
    (
        "offload_concurrency",
        click.option(
            "--offload-concurrency",
            type=click.IntRange(min=1, max=64),
            help="Blocks uploaded in parallel per offload (default: 4).",
        ),
    ),
)
#: reads of offloaded ledgers
_READ_OPTIONS: tuple[tuple[str, Callable[[F], F]], ...] = (
    (
        "read_buffer_size",
        click.option(
            "--read-buffer-size",
            type=SizeParam(minimum=1024),
            help="Read buffer per open offloaded ledger, e.g. 4M (default: 1M, as in Pulsar).",
        ),
    ),
)


def _with_options(func: F, options: tuple[tuple[str, Callable[[F], F]], ...]) -> F:
    """``func`` with ``options`` added; their values go to :func:`open_offloader`, not to it.

    These decorators stack (``@rollover_options @offload_options``): each one takes its own
    values out of the keyword arguments and adds them to the invocation's overrides.
    """
    names = tuple(name for name, _ in options)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        overrides = {name: kwargs.pop(name, None) for name in names}
        click.get_current_context().meta.setdefault(_META_KEY, {}).update(overrides)
        return func(*args, **kwargs)

    decorated = cast(F, wrapper)
    for _, option in reversed(options):
        decorated = option(decorated)
    return decorated


def rollover_options(func: F) -> F:
    """Add the ledger rollover options (commands that write ledgers: ``topics produce``)."""
    return _with_options(func, _ROLLOVER_OPTIONS)


def offload_options(func: F) -> F:
    """Add the offload options, ``--max-block-size`` and ``--offload-concurrency`` (commands
    that offload: ``topics offload-prefix``, and ``topics produce`` for its auto-offload)."""
    return _with_options(func, _OFFLOAD_OPTIONS)


def read_options(func: F) -> F:
    """Add ``--read-buffer-size`` (commands that read offloaded ledgers: ``topics read``,
    ``objects verify``)."""
    return _with_options(func, _READ_OPTIONS)


def broker_options(func: F) -> F:
    """Add every settings option (rollover, offload, read): for ``service run``, which does all
    three. :func:`open_offloader` applies them."""
    return _with_options(func, _ROLLOVER_OPTIONS + _OFFLOAD_OPTIONS + _READ_OPTIONS)


# --- resolving: options over the file over the defaults ------------------------------------
@dataclass(frozen=True)
class ResolvedSettings:
    """Everything :meth:`Offloader.from_settings` needs, resolved from options and file."""

    home: Path
    store_url: str
    #: the shared metadata store (``postgresql://...``); None: SQLite in the home
    metadata_url: str | None
    endpoint_url: str | None
    region: str | None
    broker: BrokerSettings


@dataclass(frozen=True)
class _Origin:
    """Where a setting's value came from, to name it in an error."""

    kind: str  # "option", "file", "env" or "default"
    #: "--max-block-size", "[broker] max_block_size = \"1M\" in PATH", "environment variable X"
    text: str


_FILE_CONFIG_KEY = "offloader.file_config"


def file_config_of(cli: CliContext) -> FileConfig:
    """``<home>/offloader.toml``, read once per command: every part of one invocation (the
    settings, the service's exports and metrics address, an error's origin) shares it."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return load_file_config(cli.home)
    cache: dict[Path, FileConfig] = ctx.find_root().meta.setdefault(_FILE_CONFIG_KEY, {})
    if cli.home not in cache:
        cache[cli.home] = load_file_config(cli.home)
    return cache[cli.home]


def _broker_origin(key: str, overrides: dict[str, Any], file_config: FileConfig) -> _Origin:
    if overrides.get(key) is not None:
        return _Origin("option", "--" + key.replace("_", "-"))
    if key in file_config.broker_table:
        raw = toml_text(file_config.broker_table[key])
        return _Origin("file", f"[broker] {key} = {raw} in {file_config.path}")
    return _Origin("default", "the default")


def _global_origin(param: str, option: str, envvar: str) -> _Origin:
    """``--store`` or ``OFFLOADER_STORE``: which one gave the top-level group's value."""
    ctx = click.get_current_context(silent=True)
    root = None if ctx is None else ctx.find_root()
    if root is not None and root.get_parameter_source(param) is ParameterSource.ENVIRONMENT:
        return _Origin("env", f"environment variable {envvar}")
    return _Origin("option", option)


def _store_origin(cli: CliContext, file_config: FileConfig) -> _Origin:
    if cli.store_url:
        return _global_origin("store_url", "--store", "OFFLOADER_STORE")
    if file_config.store:
        return _Origin("file", f"store in {file_config.path}")
    return _Origin("default", "the default")


def _endpoint_origin(cli: CliContext, file_config: FileConfig) -> _Origin:
    if cli.endpoint_url:
        return _Origin("option", "--endpoint-url")
    if file_config.endpoint_url:
        return _Origin("file", f"endpoint_url in {file_config.path}")
    name = endpoint_variable()
    if name is not None:
        return _Origin("env", f"environment variable {name}")
    return _Origin("default", "the default")


def _unit_text(value: int, units: tuple[tuple[str, int], ...]) -> str:
    for suffix, factor in units:
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)


def _size_text(size: int) -> str:
    """``1048576`` -> ``1M``; a size that is not a whole unit stays in bytes."""
    return _unit_text(size, (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)))


def _time_text(seconds: int) -> str:
    """``7200`` -> ``2h``."""
    return _unit_text(seconds, (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)))


def _with_s3_minimum(
    broker: BrokerSettings,
    overrides: dict[str, Any],
    file_config: FileConfig,
    store: _Origin,
    is_s3: bool,
) -> BrokerSettings:
    """``broker`` with S3's minimum part size enforced for an s3:// store (the check is
    :class:`OffloadSettings`'); a block size below it is refused naming where it came from."""
    try:
        return replace(broker, offload=broker.offload.replace(enforce_min_block_size=is_s3))
    except ConfigError as exc:
        if exc.setting != "max_block_size":
            raise
    size = broker.offload.max_block_size
    need = (
        f"is below S3's minimum part size {_size_text(S3_MIN_PART_SIZE)}, "
        f"which the s3:// store (from {store.text}) needs"
    )
    origin = _broker_origin("max_block_size", overrides, file_config)
    if origin.kind == "option":
        raise click.BadParameter(f"{_size_text(size)} {need}", param_hint="'--max-block-size'")
    # Pulsar's default (64M) is above the minimum: the value is the file's
    raw = toml_text(file_config.broker_table.get("max_block_size", size))
    raise ConfigError(f"{file_config.path}: [broker] max_block_size = {raw} {need}")


def _check_rollover_times(
    broker: BrokerSettings, overrides: dict[str, Any], file_config: FileConfig
) -> None:
    """The min rollover time must not be above the max (a ledger rolls over between the two)."""
    low, high = broker.min_rollover_seconds, broker.max_rollover_seconds
    if low <= high:
        return
    rule = "the min rollover time must not exceed the max"
    low_origin = _broker_origin("min_rollover_time", overrides, file_config)
    high_origin = _broker_origin("max_rollover_time", overrides, file_config)
    if low_origin.kind == "option":
        raise click.BadParameter(
            f"{_time_text(low)} is above the max rollover time {_time_text(high)} "
            f"({high_origin.text}); {rule}",
            param_hint="'--min-rollover-time'",
        )
    if high_origin.kind == "option":
        raise click.BadParameter(
            f"{_time_text(high)} is below the min rollover time {_time_text(low)} "
            f"({low_origin.text}); {rule}",
            param_hint="'--max-rollover-time'",
        )
    # neither is an option, and Pulsar's defaults (10m, 4h) are in order: the file sets one
    table = file_config.broker_table
    if "min_rollover_time" in table:
        low_text = f"[broker] min_rollover_time = {toml_text(table['min_rollover_time'])}"
        high_text = (
            f"max_rollover_time = {toml_text(table['max_rollover_time'])}"
            if "max_rollover_time" in table
            else f"the default max rollover time {_time_text(high)}"
        )
        message = f"{low_text} is above {high_text}"
    else:
        high_text = f"[broker] max_rollover_time = {toml_text(table['max_rollover_time'])}"
        message = f"{high_text} is below the default min rollover time {_time_text(low)}"
    raise ConfigError(f"{file_config.path}: {message}; {rule}")


def resolve_settings(cli: CliContext, overrides: dict[str, Any] | None = None) -> ResolvedSettings:
    """Options over ``offloader.toml`` over defaults, checked together: the 5M block minimum
    for S3 stores, and the min rollover time not above the max. A refused value is named with
    its source: a usage error for an option, a ConfigError naming the file's key otherwise."""
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    file_config = file_config_of(cli)
    store_url = cli.store_url or file_config.store or cli.store
    broker = apply_broker_values(file_config.broker, overrides)
    _check_rollover_times(broker, overrides, file_config)
    broker = _with_s3_minimum(
        broker, overrides, file_config, _store_origin(cli, file_config), is_s3_url(store_url)
    )
    metadata_url = cli.metadata_url or file_config.metadata
    if metadata_url is not None and not metadata_url.lower().startswith(
        ("postgresql://", "postgres://")
    ):
        origin = (
            _global_origin("metadata_url", "--metadata", "OFFLOADER_METADATA")
            if cli.metadata_url
            else _Origin("file", f"metadata in {file_config.path}")
        )
        message = (
            f"metadata store {redact(metadata_url)!r} is not a postgresql:// URL (leave it "
            "unset for the embedded SQLite store in the home)"
        )
        if origin.kind == "option":
            raise click.BadParameter(message, param_hint="'--metadata'")
        raise ConfigError(f"{message} (from {origin.text})")
    return ResolvedSettings(
        home=cli.home,
        store_url=store_url,
        metadata_url=metadata_url,
        endpoint_url=cli.endpoint_url or file_config.endpoint_url,
        region=file_config.region,
        broker=broker,
    )


def option_overrides() -> dict[str, Any]:
    """The settings options given to the running command (``[broker]`` names; None = not
    given), as collected by :func:`rollover_options` and the other settings decorators."""
    ctx = click.get_current_context(silent=True)
    return dict(ctx.meta.get(_META_KEY, {})) if ctx is not None else {}


def open_offloader(
    cli: CliContext,
    *,
    read_only: bool = False,
    kafka_log_dirs: tuple[str, ...] = (),
    kafka_topics: str | None = None,
    kafka_metadata: str | None = None,
    metrics: Metrics | None = None,
) -> Offloader:
    """The :class:`Offloader` of this invocation (use it as a context manager).

    ``read_only`` commands (``topics list|info|read|offload-status``, ``objects
    verify|orphans|gc``, ``namespaces list|get-*``) refuse a home without a metadata database
    (a mistyped ``--home``) and a configured local store directory that does not exist (a
    mistyped ``--store file:///...``) rather than creating new, empty ones, and open a home
    that cannot be written (a read-only filesystem) for reading only. ``metrics``: what the
    flows record into (``service run --metrics-addr``)."""
    settings = resolve_settings(cli, option_overrides())
    configured = bool(cli.store_url or file_config_of(cli).store)
    broker = settings.broker
    if kafka_log_dirs:  # options win over [kafka] in offloader.toml
        broker = replace(broker, kafka_log_dirs=kafka_log_dirs)
    if kafka_topics is not None:
        broker = replace(broker, kafka_topics=kafka_topics)
    if kafka_metadata is not None:  # --kafka-metadata wins over kafka_metadata in the file
        broker = replace(broker, kafka_metadata=kafka_metadata)
    try:
        return Offloader.from_settings(
            settings.home,
            settings.store_url,
            metadata_url=settings.metadata_url,
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            broker=broker,
            create_store=not (read_only and configured),
            read_only=read_only,
            metrics=metrics,
        )
    except ObjectNotFound as exc:  # only a refused missing store directory gets here
        raise ObjectNotFound(
            f"{exc}: check the store URL ({redact(settings.store_url)}); commands that write "
            "create the directory"
        ) from None
    except ConfigError as exc:
        if exc.setting is None:
            raise
        file_config = file_config_of(cli)
        if exc.setting == "endpoint_url":
            origin = _endpoint_origin(cli, file_config)
        else:
            origin = _store_origin(cli, file_config)
        raise ConfigError(f"{exc} (from {redact(origin.text)})", setting=exc.setting) from None
