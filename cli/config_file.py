"""``<home>/offloader.toml``: read, checked, and turned into broker settings.

Every key is optional. A bad value is an operational :class:`~offloader.errors.ConfigError`
(exit code 1) naming the file and the key; so is a file that is not a regular file (a FIFO, a
device, a directory: never read) or is larger than :data:`MAX_CONFIG_BYTES`, and a home that is
not a directory; :mod:`cli.settings` merges the file with the
command's options (options win) and Pulsar's defaults.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cli.config_keys import refuse_unknown_keys
from cli.config_transform import apply_transform_table
from offloader.api import (
    BrokerSettings,
    ExportJob,
    ExportSpec,
    MetricsAddress,
    TopicSelection,
    parse_kafka_metadata_url,
    parse_metrics_addr,
)
from offloader.errors import ConfigError
from offloader.units import parse_duration_seconds, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "CONFIG_FILE",
    "MAX_CONFIG_BYTES",
    "FileConfig",
    "apply_broker_values",
    "check_home_dir",
    "load_file_config",
    "toml_text",
]

CONFIG_FILE = "offloader.toml"
#: the largest offloader.toml read (a configuration is a few KiB; this bounds a mistake)
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FileConfig:
    """What ``offloader.toml`` says (every field optional)."""

    store: str | None = None
    #: the metadata store's URL (``postgresql://...``); None: SQLite under the home
    metadata: str | None = None
    #: a real Pulsar cluster's metadata store (``zk:host:port/chroot``): ``--pulsar-metadata``
    pulsar_metadata: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    #: ``metrics_addr = "127.0.0.1:9108"``: where ``service run`` serves metrics
    metrics_addr: MetricsAddress | None = None
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    #: the file that was read (None: there is none)
    path: Path | None = None
    #: the ``[[export]]`` tables: exports the service runs after each pass
    exports: tuple[ExportJob, ...] = ()
    #: the ``[broker]`` table as written, to quote a value when it is refused
    broker_table: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


#: the top-level keys whose values are strings
_STRING_KEYS = (
    "store",
    "metadata",
    "pulsar_metadata",
    "kafka_metadata",
    "endpoint_url",
    "region",
    "metrics_addr",
)
_TOP_KEYS = {*_STRING_KEYS, "broker", "transform", "kafka", "export"}
_EXPORT_KEYS = {
    "topics",
    "to",
    "catalog",
    "warehouse",
    "partition_by",
    "time_field",
    "max_file_size",
    "generation",
    "engine",
    "value_format",
    "schema",
    "avro_schema",
    "flatten",
    "endpoint_url",
}
_INT_KEYS = {"max_entries_per_ledger", "offload_concurrency"}
_SIZE_KEYS = {"max_ledger_size", "max_block_size", "read_buffer_size", "one_request_upload_max"}
_TIME_KEYS = {
    "min_rollover_time",
    "max_rollover_time",
    "offload_deletion_lag",
    "orphan_min_age",
    "cluster_lease",
}
_FSYNC_VALUES = ("always", "batch", "never")


def check_home_dir(home: Path) -> None:
    """Refuse a home that exists but is not a directory (``--home /dev/null``), or lies under
    a file, with one :class:`ConfigError` naming it (not an errno from whatever opens it
    first). A home that does not exist yet is fine: commands that write create it."""
    path = home
    while True:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            if path == path.parent:
                return
            path = path.parent
            continue
        except NotADirectoryError:
            path = path.parent  # a component above is a file: found on the way up
            continue
        except OSError as exc:
            raise ConfigError(f"offloader home {home}: cannot be read ({exc.strerror})") from None
        if stat.S_ISDIR(mode):
            return
        if path == home:
            raise ConfigError(f"offloader home {home} is not a directory (check --home)")
        raise ConfigError(f"offloader home {home}: {path} is not a directory (check --home)")


def _read_config_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist. Only a regular file (a symlink to one
    is fine) of at most :data:`MAX_CONFIG_BYTES` is read: a FIFO would block, ``/dev/zero``
    never ends."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{path}: is a directory, not a configuration file")
        raise ConfigError(
            f"{path}: not a regular file (a FIFO or a device), not read; give a TOML file"
        )
    with os.fdopen(fd, "rb") as file:
        try:
            raw = file.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB; a configuration file is small"
        )
    return raw


def load_file_config(home: Path) -> FileConfig:
    """``<home>/offloader.toml`` parsed and checked; defaults when the file does not exist."""
    check_home_dir(home)
    path = home / CONFIG_FILE
    raw = _read_config_bytes(path)
    if raw is None:
        return FileConfig()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    refuse_unknown_keys(data, _TOP_KEYS, f"{path}: unknown key(s)")
    strings: dict[str, str | None] = {}
    for key in _STRING_KEYS:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string")
        strings[key] = value or None
    metrics_addr = None
    if strings["metrics_addr"] is not None:
        try:
            metrics_addr = parse_metrics_addr(strings["metrics_addr"])
        except ConfigError as exc:
            raise ConfigError(f"{path}: metrics_addr: {exc}") from None
    broker_table = data.get("broker", {})
    if not isinstance(broker_table, dict):
        raise ConfigError(f"{path}: [broker] must be a table")
    try:
        broker = _broker_from_table(broker_table, BrokerSettings())
        broker = _kafka_from_table(data.get("kafka", {}), broker)
        if strings["kafka_metadata"] is not None:
            parse_kafka_metadata_url(strings["kafka_metadata"])  # refused here, named
            broker = replace(broker, kafka_metadata=strings["kafka_metadata"])
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if "transform" in data:
        try:
            broker = apply_transform_table(data["transform"], broker)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    try:
        exports = _exports_from_tables(data.get("export", []), strings["endpoint_url"])
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return FileConfig(
        exports=exports,
        store=strings["store"],
        metadata=strings["metadata"],
        pulsar_metadata=strings["pulsar_metadata"],
        endpoint_url=strings["endpoint_url"],
        region=strings["region"],
        metrics_addr=metrics_addr,
        broker=broker,
        path=path,
        broker_table=dict(broker_table),
    )


def _kafka_from_table(table: object, base: BrokerSettings) -> BrokerSettings:
    """``[kafka] log_dirs = ["/var/lib/kafka/data"]`` and ``topics = "orders,clicks"`` (the one
    selection form, :mod:`offloader.selection`: names or a regex)."""
    if not isinstance(table, dict):
        raise ConfigError("[kafka] must be a table")
    refuse_unknown_keys(table, {"log_dirs", "topics"}, "unknown [kafka] key(s)")
    log_dirs = table.get("log_dirs", [])
    if not isinstance(log_dirs, list) or not all(isinstance(d, str) and d for d in log_dirs):
        raise ConfigError("[kafka] log_dirs must be a list of directory paths")
    topics = table.get("topics")
    if topics is not None and not isinstance(topics, str):
        raise ConfigError("[kafka] topics must be a string (topic names or a regular expression)")
    if topics is not None:
        try:
            TopicSelection.parse(topics).require_flat()
        except ConfigError as exc:
            raise ConfigError(f"[kafka] {exc}") from None
    return replace(base, kafka_log_dirs=tuple(log_dirs), kafka_topics=topics)


def _exports_from_tables(tables: object, endpoint: str | None) -> tuple[ExportJob, ...]:
    """``[[export]] topics = ["orders"]  to = "s3://lake/p"  partition_by = "dt"`` ..."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("export must be an array of tables ([[export]])")
    jobs = []
    for table in tables:
        refuse_unknown_keys(table, _EXPORT_KEYS, "unknown [[export]] key(s)")
        topics = table.get("topics")
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            raise ConfigError(
                "[[export]] topics must be a list of topic names (or namespaces, or regexes)"
            )
        try:
            if topics:
                TopicSelection.parse_all(topics)
        except ConfigError as exc:
            raise ConfigError(f"[[export]] {exc}") from None
        if not isinstance(table.get("to"), str):
            raise ConfigError(
                "[[export]] to must be a local directory, s3://bucket/prefix, "
                "gs://bucket/prefix, az://container/prefix or iceberg://NAMESPACE.TABLE"
            )
        try:
            iceberg = table["to"].strip().lower().startswith("iceberg://")
            spec = ExportSpec(
                table["to"],
                partition_by=str(table.get("partition_by", "dt" if iceberg else "dt,hr")),
                time_field=str(table.get("time_field", "publish_time")),
                max_file_size=parse_size(table.get("max_file_size", "128M")),
                generation=int(table.get("generation", 1)),
                value_format=str(table.get("value_format", "binary")),
                schema=table.get("schema"),
                avro_schema=table.get("avro_schema"),
                flatten=bool(table.get("flatten", False)),
                endpoint_url=table.get("endpoint_url") or endpoint,
                catalog=table.get("catalog"),
                warehouse=table.get("warehouse"),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[[export]]: {exc}") from None
        jobs.append(ExportJob(tuple(topics), spec, str(table.get("engine", "local"))))
    return tuple(jobs)


def toml_text(value: object) -> str:
    """A value as it would be written in TOML (``"1M"``, ``4``)."""
    return json.dumps(value) if isinstance(value, (str, int, float, bool)) else repr(value)


def _toml_kind(value: object) -> str:
    """What TOML type a value was written as, for an error message."""
    if isinstance(value, bool):
        return "the boolean"
    if isinstance(value, float):
        return "the float"
    if isinstance(value, list):
        return "the array"
    if isinstance(value, dict):
        return "the table"
    return "the value"


def _broker_from_table(table: dict[str, Any], base: BrokerSettings) -> BrokerSettings:
    known = _INT_KEYS | _SIZE_KEYS | _TIME_KEYS | {"fsync"}
    refuse_unknown_keys(table, known, "unknown [broker] key(s)")
    values: dict[str, int | str] = {}
    for key, value in table.items():
        if key in _INT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"[broker] {key} must be a positive integer, not {toml_text(value)}"
                )
            values[key] = value
        elif key == "fsync":
            if value not in _FSYNC_VALUES:
                raise ConfigError(f"[broker] fsync must be one of {', '.join(_FSYNC_VALUES)}")
            values[key] = value
        else:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                kind = (
                    'size (e.g. "64M" or bytes)'
                    if key in _SIZE_KEYS
                    else ('time (e.g. "10m" or seconds)')
                )
                raise ConfigError(
                    f"[broker] {key} must be a {kind}, not {_toml_kind(value)} {toml_text(value)}"
                )
            try:
                if key in _SIZE_KEYS:
                    values[key] = parse_size(value)
                else:
                    lag = key == "offload_deletion_lag"
                    values[key] = parse_duration_seconds(value, allow_negative=lag)
                if key == "max_rollover_time" and values[key] == 0:
                    raise ConfigError("must be at least 1s")
                apply_broker_values(base, {key: values[key]})  # the per-value checks
            except ConfigError as exc:
                raise ConfigError(f"[broker] {key} = {toml_text(value)}: {exc}") from None
    return apply_broker_values(base, values)


def apply_broker_values(base: BrokerSettings, values: dict[str, Any]) -> BrokerSettings:
    """``base`` with the given settings (names as in ``[broker]``; None = keep) applied."""
    values = {key: value for key, value in values.items() if value is not None}
    offload_changes = {
        key: values[key]
        for key in (
            "max_block_size",
            "read_buffer_size",
            "offload_concurrency",
            "one_request_upload_max",
        )
        if key in values
    }
    broker_changes: dict[str, Any] = {}
    for key, field_name in (
        ("max_entries_per_ledger", "max_entries_per_ledger"),
        ("max_ledger_size", "max_ledger_size"),
        ("min_rollover_time", "min_rollover_seconds"),
        ("max_rollover_time", "max_rollover_seconds"),
        ("orphan_min_age", "orphan_min_age_seconds"),
        ("cluster_lease", "cluster_lease_seconds"),
        ("fsync", "fsync"),
    ):
        if key in values:
            broker_changes[field_name] = values[key]
    if "offload_deletion_lag" in values:
        broker_changes["default_deletion_lag_ms"] = int(values["offload_deletion_lag"]) * 1000
    offload = base.offload
    if offload_changes:
        # the 5M minimum is checked by resolve_settings, which knows the store
        offload = offload.replace(enforce_min_block_size=False, **offload_changes)
    return replace(base, offload=offload, **broker_changes)
