"""Decoded Pulsar messages -> Arrow batches of the ``pulsar-messages`` source's columns.

Owns the columns (named as Pulsar SQL named them, without the underscores), the value formats
(``binary``, ``string``, ``json`` with a DDL ``schema``, ``avro`` with an ``avro_schema``) and
the time bounds used to drop rows and skip blocks. Imported by executors; pure apart from
pyarrow and fastavro.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from formats.pulsar import Message
from formats.pulsar.rich_columns import MAX_SPARK_MS
from offloader.errors import ConfigError

__all__ = [
    "BASE_COLUMNS",
    "TIME_COLUMNS",
    "TimeBounds",
    "ValueDecoder",
    "avro_to_ddl",
    "messages_arrow_schema",
    "messages_batch",
    "schema_ddl",
    "to_micros",
]

#: every column but ``value``, in order, with its Spark type
BASE_COLUMNS = (
    ("topic", "STRING"),
    ("ledger_id", "BIGINT"),
    ("entry_id", "BIGINT"),
    ("batch_index", "INT"),
    ("message_id", "STRING"),
    ("key", "STRING"),
    ("ordering_key", "BINARY"),
    ("properties", "MAP<STRING, STRING>"),
    ("publish_time", "TIMESTAMP"),
    ("event_time", "TIMESTAMP"),
    ("producer_name", "STRING"),
    ("sequence_id", "BIGINT"),
    ("schema_version", "BINARY"),
    ("is_null", "BOOLEAN"),
    ("encrypted", "BOOLEAN"),
)
TIME_COLUMNS = ("publish_time", "event_time")
_ARROW_TYPES = {
    "STRING": pa.string(),
    "BIGINT": pa.int64(),
    "INT": pa.int32(),
    "BINARY": pa.binary(),
    "MAP<STRING, STRING>": pa.map_(pa.string(), pa.string()),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "BOOLEAN": pa.bool_(),
}


def messages_arrow_schema(value: pa.DataType | None = None) -> pa.Schema:
    """The Arrow schema of ``pulsar-messages`` batches with ``value`` of type ``value`` (bytes
    by default: the default ``value_format``), as Spark hands it to the reader; no JVM."""
    fields = [pa.field(name, _ARROW_TYPES[kind]) for name, kind in BASE_COLUMNS]
    return pa.schema([*fields, pa.field("value", pa.binary() if value is None else value)])


VALUE_FORMATS = ("binary", "string", "json", "avro")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS = 1000  # microseconds per millisecond


def _avro_type(schema: Any) -> str:
    if isinstance(schema, list):
        rest = [s for s in schema if s != "null"]
        if len(rest) == 1:
            return _avro_type(rest[0])
        raise ConfigError(
            f"avro_schema: unions other than [null, T] need a schema option: {schema}"
        )
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            fields = ", ".join(f"`{f['name']}`: {_avro_type(f['type'])}" for f in schema["fields"])
            return f"STRUCT<{fields}>"
        if kind == "array":
            return f"ARRAY<{_avro_type(schema['items'])}>"
        if kind == "map":
            return f"MAP<STRING, {_avro_type(schema['values'])}>"
        if kind == "enum":
            return "STRING"
        if kind == "fixed":
            return "BINARY"
        if schema.get("logicalType") == "timestamp-millis":
            return "TIMESTAMP"
        return _avro_type(kind)
    simple = {
        "string": "STRING",
        "int": "INT",
        "long": "BIGINT",
        "float": "FLOAT",
        "double": "DOUBLE",
        "boolean": "BOOLEAN",
        "bytes": "BINARY",
        "null": "STRING",
    }
    if schema not in simple:
        raise ConfigError(f"avro_schema: unsupported type {schema!r}")
    return simple[schema]


def avro_to_ddl(avro_schema: str) -> str:
    """The Spark type of values written with ``avro_schema`` (JSON)."""
    try:
        parsed = json.loads(avro_schema)
    except ValueError as exc:
        raise ConfigError(f"avro_schema is not JSON: {exc}") from None
    return _avro_type(parsed)


def schema_ddl(options: dict[str, str]) -> str:
    """The source's schema for ``value_format`` (and ``schema`` / ``avro_schema``)."""
    fmt = (options.get("value_format") or "binary").lower()
    if fmt not in VALUE_FORMATS:
        raise ConfigError(f"value_format={fmt!r}: choose one of {', '.join(VALUE_FORMATS)}")
    if fmt == "binary":
        value = "BINARY"
    elif fmt == "string":
        value = "STRING"
    elif options.get("schema"):
        value = f"STRUCT<{options['schema']}>"
    elif fmt == "avro" and options.get("avro_schema"):
        value = avro_to_ddl(options["avro_schema"])
    else:
        raise ConfigError(
            f"value_format={fmt} needs option " + ("schema" if fmt == "json" else "avro_schema")
        )
    return ", ".join(f"{name} {kind}" for name, kind in (*BASE_COLUMNS, ("value", value)))


class ValueDecoder:
    """Turns message values into the ``value`` column; a value that does not parse is NULL."""

    def __init__(self, fmt: str, avro_schema: str | None = None) -> None:
        self.fmt = fmt.lower()
        self._avro = None
        if self.fmt == "avro":
            if not avro_schema:
                raise ConfigError("value_format=avro needs option avro_schema")
            self._avro = fastavro.parse_schema(json.loads(avro_schema))

    def decode(self, value: bytes, is_null: bool, encrypted: bool) -> Any:
        if self.fmt == "binary":
            return value
        if is_null or encrypted:
            return None
        if self.fmt == "string":
            return value.decode("utf-8", errors="replace")
        try:
            if self.fmt == "json":
                return json.loads(value)
            return fastavro.schemaless_reader(io.BytesIO(value), self._avro)  # type: ignore[arg-type]
        except Exception:  # a value the schema does not describe: NULL, like Spark's PERMISSIVE
            return None


@dataclass(frozen=True)
class TimeBounds:
    """Inclusive bounds in microseconds on one timestamp column (None: unbounded)."""

    lo: int | None = None
    hi: int | None = None

    def and_(self, op: str, micros: int) -> TimeBounds:
        lo, hi = self.lo, self.hi
        if op in ("=", ">", ">="):
            lo = micros if lo is None else max(lo, micros)
        if op in ("=", "<", "<="):
            hi = micros if hi is None else min(hi, micros)
        return TimeBounds(lo, hi)

    def overlaps_ms(self, first_ms: int, last_ms: int) -> bool:
        """Can a row with a time in ``first_ms..last_ms`` (milliseconds) pass?"""
        if self.lo is not None and last_ms * _MS < self.lo:
            return False
        return self.hi is None or first_ms * _MS <= self.hi

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None


def to_micros(value: Any) -> int | None:
    """A pushed-down timestamp literal in microseconds since the epoch, or None (unusable)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # TIMESTAMP_NTZ: not ours; never prune on it
            return None
        return (value - _EPOCH) // dt.timedelta(microseconds=1)
    return None


def _ts(ms: int | None) -> int | None:
    return None if ms is None or ms > MAX_SPARK_MS else ms * _MS


def messages_batch(
    topic: str | None,
    messages: Sequence[Message],
    schema: pa.Schema,
    values: ValueDecoder,
) -> pa.RecordBatch:
    """One Arrow batch of ``messages`` (the source's column order)."""
    n = len(messages)

    def col(values_: Iterable[Any], kind: pa.DataType) -> pa.Array:
        return pa.array(values_, kind)

    ts = pa.timestamp("us", tz="UTC")
    columns = [
        pa.repeat(pa.scalar(topic, pa.string()), n),
        col((m.ledger_id for m in messages), pa.int64()),
        col((m.entry_id for m in messages), pa.int64()),
        col((m.batch_index for m in messages), pa.int32()),
        col((m.message_id for m in messages), pa.string()),
        col((m.key for m in messages), pa.string()),
        col((m.ordering_key for m in messages), pa.binary()),
        col((list(m.properties) for m in messages), pa.map_(pa.string(), pa.string())),
        col((_ts(m.publish_time) for m in messages), ts),
        col((_ts(m.event_time) for m in messages), ts),
        col((m.producer_name for m in messages), pa.string()),
        col((m.sequence_id if m.sequence_id < 1 << 63 else None for m in messages), pa.int64()),
        col((m.schema_version for m in messages), pa.binary()),
        col((m.is_null for m in messages), pa.bool_()),
        col((m.encrypted for m in messages), pa.bool_()),
        col(
            (values.decode(m.value, m.is_null, m.encrypted) for m in messages),
            schema.field("value").type,
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
