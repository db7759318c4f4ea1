"""What an export run is asked to do: :class:`ExportSpec`, validated, and its fingerprint.

The fingerprint is the part of the settings that shapes the files (partitioning, time field,
value decoding, flattening, file size); it is stored with the watermark, and a run whose
fingerprint differs at the same generation is refused (write a new ``--generation`` instead).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from offloader.errors import ConfigError
from offloader.export.iceberg_target import SCHEME, is_iceberg_url, parse_table_name
from offloader.export.naming import Partitioning
from offloader.location import is_s3_url

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "TIME_COLUMNS",
    "ExportJob",
    "ExportSpec",
    "normalize_target",
    "parse_time_ms",
    "same_target",
]

DEFAULT_MAX_FILE_SIZE = 128 << 20
#: time fields read from the message itself (anything else is a path into the decoded value)
TIME_COLUMNS = ("publish_time", "event_time")
VALUE_FORMATS = ("binary", "string", "json", "avro")


def parse_time_ms(text: str) -> int:
    """An instant: epoch milliseconds (digits) or ISO-8601 (no zone: UTC), as epoch ms."""
    value = str(text).strip()
    if value.isdigit():
        return int(value)
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"time {value!r}: give ISO-8601 (2025-06-15T03:00:00Z) or epoch milliseconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return int(parsed.timestamp() * 1000)


def normalize_target(url: str) -> str:
    """The canonical spelling of a target, which keys its watermarks and its lock: ``s3://bucket/
    prefix`` (``s3a://`` as ``s3://``, no empty segment, no trailing slash) or a local directory
    as :func:`os.path.realpath` gives it (symlinks, ``..`` and trailing slashes resolved), so
    two spellings of one directory are one target. Text that is not UTF-8 is refused."""
    text = str(url).strip()
    if not text:
        raise ConfigError("--to: give a local directory or s3://bucket/prefix")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"--to {text.encode('utf-8', 'surrogateescape')!r}: the target is not valid UTF-8 "
            "(its watermark and lock are keyed by its name): give a UTF-8 path"
        ) from None
    if is_iceberg_url(text):
        namespace, table = parse_table_name(text)
        return SCHEME + ".".join((*namespace, table))
    parts = urlsplit(text)
    if parts.scheme in ("s3", "s3a"):
        if not parts.netloc or "@" in parts.netloc:
            raise ConfigError(f"--to {text!r}: expected s3://bucket/prefix (no credentials)")
        segments = [s for s in parts.path.split("/") if s]
        if any(s in (".", "..") for s in segments) or parts.query or parts.fragment:
            raise ConfigError(
                f"--to {text!r}: an s3:// prefix has no '.' or '..' segments, '?' or '#'"
            )
        return f"s3://{parts.netloc}" + "".join(f"/{s}" for s in segments)
    if parts.scheme in ("gs", "az", "abfs", "abfss"):
        from offloader.location import parse_store_url

        location = parse_store_url(text)  # one parse of gs:// and az:// (abfs://) URLs
        segments = [s for s in location.prefix.split("/") if s]
        if any(s in (".", "..") for s in segments):
            raise ConfigError(f"--to {text!r}: a prefix has no '.' or '..' segments")
        return f"{location.scheme}://{location.bucket}" + "".join(f"/{s}" for s in segments)
    if parts.scheme == "file":
        text = parts.path
    elif parts.scheme and len(parts.scheme) > 1:
        raise ConfigError(
            f"--to {text!r}: give a local directory, s3://bucket/prefix, gs://bucket/prefix, "
            "az://container/prefix or iceberg://NAMESPACE.TABLE"
        )
    return os.path.realpath(os.path.expanduser(text))


def same_target(stored: str, target: str) -> bool:
    """Whether a watermark's ``stored`` target (perhaps written under another spelling before
    targets were canonical) is the canonical ``target``."""
    if stored == target:
        return True
    try:
        return normalize_target(stored) == target
    except ConfigError:
        return False


@dataclass(frozen=True)
class ExportSpec:
    """One export: where to, how partitioned, how values are decoded."""

    target: str
    partition_by: str = "dt,hr"
    time_field: str = "publish_time"
    generation: int = 1
    until_ms: int | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    flatten: bool = False
    value_format: str = "binary"
    schema: str | None = None
    avro_schema: str | None = None
    #: the S3 endpoint and region of an s3:// target (credentials: AWS_* environment)
    endpoint_url: str | None = None
    region: str | None = None
    #: an ``iceberg://NAMESPACE.TABLE`` target's catalog URI and warehouse (default: a SQLite
    #: catalog under the home, the warehouse beside it; spec/export.md)
    catalog: str | None = None
    warehouse: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", normalize_target(self.target))
        object.__setattr__(self, "value_format", self.value_format.lower())
        Partitioning(self.partition_by)
        if self.generation < 1:
            raise ConfigError(f"--generation {self.generation}: must be 1 or more")
        if self.max_file_size < 1024:
            raise ConfigError(f"--max-file-size {self.max_file_size}: at least 1 KiB")
        if self.value_format not in VALUE_FORMATS:
            raise ConfigError(
                f"--value-format {self.value_format!r}: choose one of {', '.join(VALUE_FORMATS)}"
            )
        if self.value_format == "json" and not self.schema:
            raise ConfigError("--value-format json needs --schema (a DDL, e.g. 'ts BIGINT')")
        if self.value_format == "avro" and not (self.avro_schema or self.schema):
            raise ConfigError("--value-format avro needs --avro-schema")
        if self.flatten and self.value_format not in ("json", "avro"):
            raise ConfigError("--flatten needs --value-format json or avro (a struct value)")
        if not self.time_field.strip() or self.time_field.startswith("."):
            raise ConfigError(f"--time-field {self.time_field!r}: give a field path like 'ts'")
        if (self.catalog or self.warehouse) and not self.is_iceberg:
            raise ConfigError("--catalog and --warehouse are for iceberg:// targets")

    @property
    def partitioning(self) -> Partitioning:
        return Partitioning(self.partition_by)

    @property
    def is_s3(self) -> bool:
        return is_s3_url(self.target)

    @property
    def is_remote(self) -> bool:
        """An object-store target (s3://, gs://, az://), not a local directory."""
        return self.target.split("://")[0] in ("s3", "gs", "az")

    @property
    def is_iceberg(self) -> bool:
        return self.target.startswith(SCHEME)

    @property
    def field_path(self) -> tuple[str, ...] | None:
        """The path into the decoded value, or None for a message time column."""
        if self.time_field in TIME_COLUMNS:
            return None
        path = self.time_field.removeprefix("value.")
        return tuple(path.split("."))

    def fingerprint(self) -> str:
        """The settings that shape the files, as stable JSON text."""
        return json.dumps(
            {
                "partition_by": self.partition_by,
                "time_field": self.time_field,
                "max_file_size": self.max_file_size,
                "flatten": self.flatten,
                "value_format": self.value_format,
                "schema": self.schema,
                "avro_schema": self.avro_schema,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


ENGINES = ("local", "spark")


@dataclass(frozen=True)
class ExportJob:
    """An export the service runs after each pass (``[[export]]`` in ``offloader.toml``)."""

    topics: tuple[str, ...]
    spec: ExportSpec
    engine: str = "local"

    def __post_init__(self) -> None:
        if not self.topics:
            raise ConfigError("[[export]] topics: name at least one topic")
        if self.engine not in ENGINES:
            raise ConfigError(f"[[export]] engine {self.engine!r}: choose {' or '.join(ENGINES)}")
