"""Broker settings for the CLI: options, ``offloader.toml`` in the home directory, defaults.

Precedence, highest first: command-line options, ``<home>/offloader.toml``, Pulsar's defaults
(:class:`~offloader.api.BrokerSettings`). The file may also name the object store, so that a
configured home needs no ``--store`` on every command::

    # .offloader/offloader.toml
    store = "s3://my-bucket/offload"      # --store / OFFLOADER_STORE win
    endpoint_url = "http://127.0.0.1:9000"  # --endpoint-url wins; AWS_ENDPOINT_URL if unset
    region = "us-east-1"

    [broker]
    max_entries_per_ledger = 50000
    max_ledger_size = "2G"
    max_block_size = "64M"        # at least 5M for s3:// stores
    read_buffer_size = "1M"
    offload_concurrency = 4
    min_rollover_time = "10m"
    max_rollover_time = "4h"
    offload_deletion_lag = "4h"   # broker default when a namespace sets none
    orphan_min_age = "1h"
    fsync = "always"              # always | batch | never

Sizes and times are strings with Pulsar's units (``10M``, ``4h``) or plain integers (bytes,
seconds). This module also holds the click parameter types for sizes, times and positions (a
bad value is a usage error, exit code 2) and :func:`open_offloader`, which every store-backed
command uses to build the :class:`~offloader.api.Offloader`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from cli.context import CliContext
from offloader.api import BrokerSettings, Offloader, Position
from offloader.config import MIN_S3_BLOCK_SIZE
from offloader.errors import ConfigError
from offloader.units import parse_duration_seconds, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "offloader.toml"
_META_KEY = "offloader.broker_options"

F = TypeVar("F", bound=Callable[..., Any])


# --- click parameter types ---------------------------------------------------------------
class SizeParam(click.ParamType):  # type: ignore[type-arg]
    """``10M``, ``5G``, ``4096`` (bytes); ``-1`` only where ``allow_negative``."""

    name = "size"

    def __init__(self, *, allow_negative: bool = False, minimum: int = 0) -> None:
        self.allow_negative = allow_negative
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            size = parse_size(value, allow_negative=self.allow_negative)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if 0 <= size < self.minimum:
            self.fail(f"{value!r} is below the minimum of {self.minimum} bytes", param, ctx)
        return size


class DurationParam(click.ParamType):  # type: ignore[type-arg]
    """``30s``, ``10m``, ``4h``, ``2d``, ``1w`` or plain seconds; ``-1`` where allowed."""

    name = "time"

    def __init__(self, *, allow_negative: bool = False) -> None:
        self.allow_negative = allow_negative

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_duration_seconds(value, allow_negative=self.allow_negative)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


class PositionParam(click.ParamType):  # type: ignore[type-arg]
    """``LEDGER:ENTRY``, e.g. ``12:0``."""

    name = "ledger:entry"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Position:
        if isinstance(value, Position):
            return value
        try:
            return Position.parse(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeParam()
SIZE_OR_MINUS_ONE = SizeParam(allow_negative=True)
DURATION = DurationParam()
DURATION_OR_MINUS_ONE = DurationParam(allow_negative=True)
POSITION = PositionParam()


# --- offloader.toml ------------------------------------------------------------------------
@dataclass(frozen=True)
class FileConfig:
    """What ``offloader.toml`` says (every field optional)."""

    store: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    broker: BrokerSettings = field(default_factory=BrokerSettings)


_TOP_KEYS = {"store", "endpoint_url", "region", "broker"}
_INT_KEYS = {"max_entries_per_ledger", "offload_concurrency"}
_SIZE_KEYS = {"max_ledger_size", "max_block_size", "read_buffer_size"}
_TIME_KEYS = {"min_rollover_time", "max_rollover_time", "offload_deletion_lag", "orphan_min_age"}
_FSYNC_VALUES = ("always", "batch", "never")


def load_file_config(home: Path) -> FileConfig:
    """``<home>/offloader.toml`` parsed and checked; defaults when the file does not exist."""
    path = home / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return FileConfig()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
    strings: dict[str, str | None] = {}
    for key in ("store", "endpoint_url", "region"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string")
        strings[key] = value or None
    broker_table = data.get("broker", {})
    if not isinstance(broker_table, dict):
        raise ConfigError(f"{path}: [broker] must be a table")
    try:
        broker = _broker_from_table(broker_table, BrokerSettings())
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return FileConfig(strings["store"], strings["endpoint_url"], strings["region"], broker)


def _broker_from_table(table: dict[str, Any], base: BrokerSettings) -> BrokerSettings:
    known = _INT_KEYS | _SIZE_KEYS | _TIME_KEYS | {"fsync"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"unknown [broker] key(s) {', '.join(unknown)}")
    values: dict[str, int | str] = {}
    for key, value in table.items():
        if key in _INT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"[broker] {key} must be a positive integer")
            values[key] = value
        elif key in _SIZE_KEYS:
            values[key] = parse_size(value)
        elif key in _TIME_KEYS:
            lag = key == "offload_deletion_lag"
            values[key] = parse_duration_seconds(value, allow_negative=lag)
        elif value not in _FSYNC_VALUES:
            raise ConfigError(f"[broker] fsync must be one of {', '.join(_FSYNC_VALUES)}")
        else:
            values[key] = value
    return apply_broker_values(base, values)


def apply_broker_values(base: BrokerSettings, values: dict[str, Any]) -> BrokerSettings:
    """``base`` with the given settings (names as in ``[broker]``; None = keep) applied."""
    values = {key: value for key, value in values.items() if value is not None}
    offload_changes = {
        key: values[key]
        for key in ("max_block_size", "read_buffer_size", "offload_concurrency")
        if key in values
    }
    broker_changes: dict[str, Any] = {}
    for key, field_name in (
        ("max_entries_per_ledger", "max_entries_per_ledger"),
        ("max_ledger_size", "max_ledger_size"),
        ("min_rollover_time", "min_rollover_seconds"),
        ("max_rollover_time", "max_rollover_seconds"),
        ("orphan_min_age", "orphan_min_age_seconds"),
        ("fsync", "fsync"),
    ):
        if key in values:
            broker_changes[field_name] = values[key]
    if "offload_deletion_lag" in values:
        broker_changes["default_deletion_lag_ms"] = int(values["offload_deletion_lag"]) * 1000
    offload = base.offload
    if offload_changes:
        # the 5M minimum is checked by open_offloader, which knows the store
        offload = offload.replace(enforce_min_block_size=False, **offload_changes)
    return replace(base, offload=offload, **broker_changes)


# --- shared options ------------------------------------------------------------------------
_BROKER_OPTIONS: tuple[Callable[[F], F], ...] = (
    click.option(
        "--max-entries-per-ledger",
        type=click.IntRange(min=1),
        help="Roll a ledger over after this many entries (Pulsar: 50000).",
    ),
    click.option(
        "--max-ledger-size",
        type=SizeParam(minimum=1),
        help="Roll a ledger over at this size, e.g. 2G (Pulsar: 2G).",
    ),
    click.option(
        "--min-rollover-time",
        type=DURATION,
        help="A ledger is never rolled over younger than this, e.g. 10m (Pulsar: 10m; 0 to "
        "roll over as soon as a ledger is full).",
    ),
    click.option(
        "--max-rollover-time",
        type=DURATION,
        help="Roll a non-empty ledger over at this age, e.g. 4h (Pulsar: 4h).",
    ),
    click.option(
        "--max-block-size",
        type=SizeParam(minimum=1024),
        help="Offload block size, e.g. 64M (Pulsar: 64M; at least 5M for s3:// stores).",
    ),
    click.option(
        "--read-buffer-size",
        type=SizeParam(minimum=1024),
        help="Read buffer per open offloaded ledger, e.g. 1M (Pulsar: 1M).",
    ),
    click.option(
        "--offload-concurrency",
        type=click.IntRange(min=1, max=64),
        help="Blocks uploaded in parallel per offload (default 4).",
    ),
)
_BROKER_OPTION_NAMES = (
    "max_entries_per_ledger",
    "max_ledger_size",
    "min_rollover_time",
    "max_rollover_time",
    "max_block_size",
    "read_buffer_size",
    "offload_concurrency",
)


def broker_options(func: F) -> F:
    """Add the broker settings options to a command; :func:`open_offloader` applies them."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        overrides = {name: kwargs.pop(name, None) for name in _BROKER_OPTION_NAMES}
        click.get_current_context().meta[_META_KEY] = overrides
        return func(*args, **kwargs)

    decorated = cast(F, wrapper)
    for option in reversed(_BROKER_OPTIONS):
        decorated = option(decorated)
    return decorated


@dataclass(frozen=True)
class ResolvedSettings:
    """Everything :meth:`Offloader.from_settings` needs, resolved from options and file."""

    home: Path
    store_url: str
    endpoint_url: str | None
    region: str | None
    broker: BrokerSettings


def resolve_settings(cli: CliContext, overrides: dict[str, Any] | None = None) -> ResolvedSettings:
    """Options over ``offloader.toml`` over defaults; the 5M block minimum for S3 stores."""
    file_config = load_file_config(cli.home)
    store_url = cli.store_url or file_config.store or cli.store
    broker = apply_broker_values(file_config.broker, overrides or {})
    is_s3 = store_url.lower().startswith("s3://")
    block_size = broker.offload.max_block_size
    if is_s3 and block_size < MIN_S3_BLOCK_SIZE:
        message = (
            f"max block size {block_size} is below S3's minimum part size "
            f"{MIN_S3_BLOCK_SIZE} (5M): s3:// stores need --max-block-size 5M or more"
        )
        if overrides and overrides.get("max_block_size") is not None:
            raise click.BadParameter(message, param_hint="'--max-block-size'")
        raise ConfigError(message)
    broker = replace(broker, offload=broker.offload.replace(enforce_min_block_size=is_s3))
    return ResolvedSettings(
        home=cli.home,
        store_url=store_url,
        endpoint_url=cli.endpoint_url or file_config.endpoint_url,
        region=file_config.region,
        broker=broker,
    )


def open_offloader(cli: CliContext) -> Offloader:
    """The :class:`Offloader` of this invocation (use it as a context manager)."""
    ctx = click.get_current_context(silent=True)
    overrides = ctx.meta.get(_META_KEY) if ctx is not None else None
    settings = resolve_settings(cli, overrides)
    return Offloader.from_settings(
        settings.home,
        settings.store_url,
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        broker=settings.broker,
    )
