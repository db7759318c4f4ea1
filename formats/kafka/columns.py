"""A Kafka batch's records decoded straight into columns (offsets, timestamps, keys, values,
headers): no object per record, for the callers that want records (the ``kafka read`` CLI, the
export, the ``kafka-segments`` Spark source).

:func:`batch_columns` takes a buffer and the :class:`~formats.kafka.batch.BatchHeader` of a
batch in it (its CRC32C is the caller's to check), decompresses the records region when the
batch is compressed (:func:`~formats.kafka.batch.records_bytes`) and decodes the records.
:func:`decode_columns` is the record loop on an uncompressed records region: the C twin in
``formats/_kafka_speedups.c`` (:data:`C_MODULE`) when it is built, else this module's pure
Python loop, :func:`decode_columns_py`. The C loop accepts exactly what the pure one accepts and
returns None for anything else (malformed records, or an int64 overflow it does not compute):
the pure loop then runs and raises the typed error (:mod:`formats.kafka.errors`), so both give
the same values and the same errors. ``LEDGER_OFFLOADER_PURE_PYTHON`` set: the pure loop only.

The checks are :func:`formats.kafka.batch.decode_records`': every record's length fits and its
fields fill it exactly, lengths are -1 (null) or more, header keys are UTF-8 and never null,
offset deltas lie in ``0..lastOffsetDelta`` and increase, the batch holds exactly its announced
record count and nothing after it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from formats.kafka.batch import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader, records_bytes
from formats.kafka.codecs import NONE
from formats.kafka.errors import KafkaCorruptError, KafkaTruncatedError
from formats.kafka.varint import read_varint, read_varlong

__all__ = [
    "C_MODULE",
    "RecordColumns",
    "batch_columns",
    "batch_rows",
    "decode_columns",
    "decode_columns_py",
    "decode_rows",
    "decode_rows_py",
]

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]
_NO_HEADERS: Headers = ()


@dataclass(frozen=True)
class RecordColumns:
    """The records of one batch, one list per field (same length, in offset order)."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Headers]

    def __len__(self) -> int:
        return len(self.offsets)


def _load() -> Any | None:
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from formats import _kafka_speedups  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - built without a compiler
        return None
    if not hasattr(_kafka_speedups, "decode_columns"):  # pragma: no cover - a stale build
        warnings.warn(
            "formats._kafka_speedups lacks decode_columns (built from an older source; run "
            "`make install`): using the pure-Python decoder",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _kafka_speedups


#: the extension module, or None (not built, stale, or pure Python asked for)
C_MODULE = _load()


def _bytes_field(data: Buffer, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise KafkaCorruptError(f"{what} length {length}", offset=pos)
        return None, pos
    if pos + length > end:
        raise KafkaTruncatedError(f"{what} of {length} bytes runs past its record", offset=pos)
    return bytes(data[pos : pos + length]), pos + length


def decode_columns_py(
    data: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    last_offset_delta: int,
    record_count: int,
    lo: int = -(2**63),
    limit: int = -1,
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[Headers]]:
    """The pure-Python record loop (see the module docstring): five lists. Every record is
    checked; those at offset ``lo`` or above, at most ``limit`` (-1: all), are returned."""
    view = memoryview(data).cast("B")
    size = len(view)
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[Headers] = []
    pos = 0
    previous = -1
    for n in range(record_count):
        if pos >= size:
            raise KafkaTruncatedError(f"batch announces {record_count} records, holds {n}")
        length, pos = read_varint(view, pos)
        end = pos + length
        if length < 6 or end > size:
            raise KafkaCorruptError(f"record length {length} does not fit", offset=pos)
        body = view[:end]
        ts_delta, pos = read_varlong(body, pos + 1)  # after the attributes byte
        delta, pos = read_varint(body, pos)
        key, pos = _bytes_field(body, pos, end, "record key")
        value, pos = _bytes_field(body, pos, end, "record value")
        count, pos = read_varint(body, pos)
        if count < 0:
            raise KafkaCorruptError(f"record header count {count}", offset=pos)
        found: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            hkey, pos = _bytes_field(body, pos, end, "header key")
            if hkey is None:
                raise KafkaCorruptError("null record header key", offset=pos)
            hvalue, pos = _bytes_field(body, pos, end, "header value")
            try:
                found.append((hkey.decode("utf-8"), hvalue))
            except UnicodeDecodeError as exc:
                raise KafkaCorruptError("record header key is not UTF-8", offset=pos) from exc
        if pos != end:
            raise KafkaCorruptError(
                f"record announces {length} bytes but its fields take {length + pos - end}",
                offset=pos,
            )
        if not 0 <= delta <= last_offset_delta:
            raise KafkaCorruptError(
                f"record offset delta {delta} outside the batch's 0..{last_offset_delta}",
                offset=pos,
            )
        if delta <= previous:
            raise KafkaCorruptError(f"record offset {base_offset + delta} does not increase")
        previous = delta
        if base_offset + delta < lo or 0 <= limit <= len(offsets):
            continue
        offsets.append(base_offset + delta)
        timestamps.append(max_timestamp if log_append_time else base_timestamp + ts_delta)
        keys.append(key)
        values.append(value)
        headers.append(tuple(found) if found else _NO_HEADERS)
    if pos != size:
        raise KafkaCorruptError(f"{size - pos} bytes after the batch's {record_count} records")
    return offsets, timestamps, keys, values, headers


def decode_columns(
    data: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    last_offset_delta: int,
    record_count: int,
    lo: int = -(2**63),
    limit: int = -1,
) -> RecordColumns:
    """The records of an uncompressed records region as columns (C loop, else pure); only
    those at offset ``lo`` or above, at most ``limit`` of them (-1: all)."""
    args = (
        data,
        base_offset,
        base_timestamp,
        max_timestamp,
        log_append_time,
        last_offset_delta,
        record_count,
        lo,
        limit,
    )
    found = C_MODULE.decode_columns(*args) if C_MODULE is not None else None
    if found is None:
        found = decode_columns_py(*args)
    return RecordColumns(*found)


#: a row type: a tuple subclass (a ``NamedTuple``) built by :func:`decode_rows`
Row = TypeVar("Row", bound=tuple[Any, ...])


def decode_rows_py(
    data: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    last_offset_delta: int,
    record_count: int,
    lo: int,
    limit: int,
    row_type: type[Row],
    head: tuple[Any, ...],
    kind: Any,
    tail: tuple[Any, ...],
) -> list[Row]:
    """The pure-Python twin of the C loop's rows mode: the records of
    :func:`decode_columns_py` as rows ``row_type(*head, offset, timestamp, kind, key, value,
    headers, *tail)`` (made as ``tuple.__new__`` makes them: no ``__new__`` of the type runs)."""
    cols = decode_columns_py(
        data, base_offset, base_timestamp, max_timestamp, log_append_time, last_offset_delta,
        record_count, lo, limit,
    )  # fmt: skip
    new = tuple.__new__
    return [
        new(row_type, (*head, offset, timestamp, kind, key, value, headers, *tail))
        for offset, timestamp, key, value, headers in zip(*cols, strict=True)
    ]


def decode_rows(
    data: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    last_offset_delta: int,
    record_count: int,
    lo: int,
    limit: int,
    row_type: type[Row],
    head: tuple[Any, ...],
    kind: Any,
    tail: tuple[Any, ...],
) -> list[Row]:
    """The records of an uncompressed records region as rows (C loop, else pure; see
    :func:`decode_rows_py`): one list, no column lists between, for a caller that wants one
    object per record (``kafka read``)."""
    args = (data, base_offset, base_timestamp, max_timestamp, log_append_time,
            last_offset_delta, record_count, lo, limit, row_type, head, kind, tail)  # fmt: skip
    found = C_MODULE.decode_columns(*args) if C_MODULE is not None else None
    if found is None:
        return decode_rows_py(*args)
    return cast(list[Row], found)


def batch_columns(
    buf: Buffer,
    header: BatchHeader,
    *,
    source: str | None = None,
    lo: int = -(2**63),
    limit: int = -1,
) -> RecordColumns:
    """The records of the batch ``header`` describes in ``buf`` (decompressed first when the
    batch is compressed), those at offset ``lo`` or above, at most ``limit`` (-1: all; every
    record is checked either way); a malformed record is a typed error naming the batch and
    ``source``."""
    return _decoded(
        buf, header, source, lambda payload, args: decode_columns(payload, *args, lo, limit)
    )


def batch_rows(
    buf: Buffer,
    header: BatchHeader,
    row_type: type[Row],
    head: tuple[Any, ...],
    tail: tuple[Any, ...],
    *,
    source: str | None = None,
    lo: int = -(2**63),
    limit: int = -1,
) -> list[Row]:
    """:func:`batch_columns` as rows: ``row_type(*head, offset, timestamp, timestamp type,
    key, value, headers, *tail)`` for each record kept (:func:`decode_rows`)."""
    kind = header.timestamp_type
    return _decoded(
        buf,
        header,
        source,
        lambda payload, args: decode_rows(payload, *args, lo, limit, row_type, head, kind, tail),
    )


T = TypeVar("T")


def _decoded(
    buf: Buffer,
    header: BatchHeader,
    source: str | None,
    decode: Callable[[Buffer, tuple[int, int, int, bool, int, int]], T],
) -> T:
    """``decode`` run on the batch's records region (decompressed when the batch is), its
    errors naming the batch and ``source``."""
    if header.compression == NONE:  # a view of the region: no copy before the C loop
        payload: Buffer = memoryview(buf)[header.position + HEADER_SIZE : header.end]
    else:
        payload = records_bytes(buf, header, source=source)
    try:
        return decode(
            payload,
            (
                header.base_offset,
                header.base_timestamp,
                header.max_timestamp,
                header.timestamp_type == LOG_APPEND_TIME,
                header.last_offset_delta,
                header.record_count,
            ),
        )
    except KafkaTruncatedError as exc:
        raise KafkaTruncatedError(
            f"batch at base offset {header.base_offset}: {exc}",
            offset=header.position,
            source=source,
        ) from exc
    except KafkaCorruptError as exc:
        raise KafkaCorruptError(
            f"batch at base offset {header.base_offset}: {exc}",
            offset=header.position,
            source=source,
        ) from exc
