"""A batch payload (decompressed) -> its messages, with a hand-tuned SingleMessageMetadata
reader (this loop runs once per message, so it avoids the generic field table).

Batch layout: ``num_messages_in_batch`` times ``size i32 | SingleMessageMetadata (size bytes)
| payload (payload_size bytes)``, nothing after the last one. Messages marked
``compacted_out`` are skipped (their batch_index is still counted).
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate
from typing import Any

from formats.pulsar.errors import MalformedMessageError, MessageTruncatedError
from formats.pulsar.metadata import MessageMetadata
from formats.pulsar.rich_columns import append_rich
from formats.pulsar.speedups import C_MODULE

_STRING_FIELDS = {2: "partition_key", 7: "ordering_key"}


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise MessageTruncatedError("truncated varint in SingleMessageMetadata", offset=pos)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise MalformedMessageError("varint longer than 10 bytes", offset=pos)


def _text(raw: bytes, pos: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessageError("a string that is not UTF-8", offset=pos) from None


def _key_value(data: bytes, pos: int, end: int) -> tuple[str, str]:
    key: str | None = None
    value: str | None = None
    while pos < end:
        tag = data[pos]
        if tag & 0x80:
            tag, pos = _varint(data, pos, end)
        else:
            pos += 1
        wire = tag & 7
        if wire == 2:
            if pos < end and data[pos] < 0x80:
                length = data[pos]
                pos += 1
            else:
                length, pos = _varint(data, pos, end)
            if length > end - pos:
                raise MalformedMessageError("KeyValue field overruns", offset=pos)
            if tag >> 3 == 1:
                key = _text(data[pos : pos + length], pos)
            elif tag >> 3 == 2:
                value = _text(data[pos : pos + length], pos)
            pos += length
        else:
            pos = _skip(data, pos, end, wire)
    if key is None or value is None:
        raise MalformedMessageError("KeyValue without its key or value", offset=pos)
    return key, value


def _skip(data: bytes, pos: int, end: int, wire: int) -> int:
    if wire == 0:
        return _varint(data, pos, end)[1]
    if wire == 2:
        length, pos = _varint(data, pos, end)
        if length > end - pos:
            raise MalformedMessageError("field overruns SingleMessageMetadata", offset=pos)
        return pos + length
    if wire in (1, 5):
        width = 8 if wire == 1 else 4
        if width > end - pos:
            raise MessageTruncatedError("truncated fixed-width field", offset=pos)
        return pos + width
    raise MalformedMessageError(f"unsupported wire type {wire}", offset=pos)


#: the 9 columns of a split batch: batch_index, key, ordering_key, properties, event_time,
#: sequence_id (None: the batch's + index), is_null, value, key_b64
Columns = tuple[
    list[int],
    list[str | None],
    list[bytes | None],
    list[tuple[tuple[str, str], ...]],
    list[int | None],
    list[int | None],
    list[bool],
    list[bytes],
    list[bool],
]


_C_SPLIT = C_MODULE.split_batch_columns if C_MODULE is not None else None
_C_INTO = C_MODULE.split_batch_into if C_MODULE is not None else None
_MAX_I64 = (1 << 63) - 1
_MAX_I32 = (1 << 31) - 1


def split_into(
    md: MessageMetadata, data: bytes, cols: tuple[bytearray, ...], *, use_c: bool = True
) -> int | None:
    """A batch's messages appended to 18 column bytearrays (C when built, no Python object per
    message): batch_index (int32), sequence_id (int64; unset: the batch's + index), is_null
    (int8, one byte a row staged), value offsets (int32, going on from the last one there),
    value bytes, key offsets (int32, idem), key bytes (UTF-8), key valid (int8), all in native
    byte order, then the ten of ordering_key, properties and event_time
    (:mod:`formats.pulsar.rich_columns`: untouched while no row has one). Returns the number
    of rows appended.

    None, with nothing appended, when a sequence id is past BIGINT or an offset past 2**31 - 1
    (the caller's list path handles those); bad input: the typed error (the Python twin)."""
    count = md.num_messages_in_batch or 0
    if use_c and _C_INTO is not None and count >= 0:
        staged = _C_INTO(data, count, md.sequence_id, cols)
        if staged is not None:
            return staged  # type: ignore[no-any-return]
    return _split_into_py(md, data, cols)


def _split_into_py(md: MessageMetadata, data: bytes, cols: tuple[bytearray, ...]) -> int | None:
    """The pure-Python twin of the C ``split_batch_into`` (built on :func:`_split_columns_py`)."""
    index, keys, ordering, props, events, seqs, nulls, values, _b64 = _split_columns_py(md, data)
    base = md.sequence_id
    seq = [base + i if s is None else s for i, s in zip(index, seqs, strict=True)]
    if any(s > _MAX_I64 for s in seq):
        return None
    key_bytes = [b"" if k is None else k.encode("utf-8") for k in keys]
    offsets, key_offsets = cols[3], cols[5]
    value_base = int.from_bytes(offsets[-4:], sys.byteorder, signed=True)
    key_base = int.from_bytes(key_offsets[-4:], sys.byteorder, signed=True)
    if (
        value_base + sum(map(len, values)) > _MAX_I32
        or key_base + sum(map(len, key_bytes)) > _MAX_I32
    ):
        return None
    if not append_rich(cols[8:], len(cols[2]), ordering, props, events):
        return None
    cols[0].extend(array("i", index))
    cols[1].extend(array("q", seq))
    cols[2].extend(bytes(nulls))
    cols[3].extend(array("i", list(accumulate(map(len, values), initial=value_base))[1:]))
    cols[4].extend(b"".join(values))
    cols[5].extend(array("i", list(accumulate(map(len, key_bytes), initial=key_base))[1:]))
    cols[6].extend(b"".join(key_bytes))
    cols[7].extend(bytes(k is not None for k in keys))
    return len(index)


def split_columns(md: MessageMetadata, data: bytes, *, use_c: bool = True) -> Columns:
    """A batch's messages as columns (C when built; the Python twin judges any input the C
    version declines, raising the typed error)."""
    count = md.num_messages_in_batch or 0
    if use_c and _C_SPLIT is not None and count >= 0:
        columns = _C_SPLIT(data, count)
        if columns is not None:
            return columns  # type: ignore[no-any-return]
    return _split_columns_py(md, data)


def split_batch(
    md: MessageMetadata,
    data: bytes,
    ledger_id: int,
    entry_id: int,
    partition: int,
    make: Any,
) -> list[Any]:
    """The messages of a batch; ``make`` is the Message constructor (positional fields)."""
    index, keys, ordering, props, events, seqs, nulls, values, b64s = split_columns(md, data)
    producer = md.producer_name
    publish = md.publish_time
    schema = md.schema_version
    base = md.sequence_id
    return [
        make(
            ledger_id,
            entry_id,
            partition,
            i,
            producer,
            base + i if seq is None else seq,
            publish,
            event,
            key,
            okey,
            prop,
            schema,
            null,
            False,
            value,
            b64,
        )
        for i, key, okey, prop, event, seq, null, value, b64 in zip(
            index, keys, ordering, props, events, seqs, nulls, values, b64s, strict=True
        )
    ]


def _split_columns_py(md: MessageMetadata, data: bytes) -> Columns:
    """The pure-Python twin of the C splitter."""
    count = md.num_messages_in_batch or 0
    if count < 0:
        raise MalformedMessageError(f"negative num_messages_in_batch {count}")
    cols: Columns = ([], [], [], [], [], [], [], [], [])
    end = len(data)
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise MessageTruncatedError(f"batch of {count} messages ends after {index}", offset=pos)
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        stop = pos + size
        if size < 0 or stop > end:
            raise MessageTruncatedError(
                f"SingleMessageMetadata of {size} bytes overruns the batch", offset=pos - 4
            )
        properties: list[tuple[str, str]] = []
        key: str | None = None
        ordering: bytes | None = None
        payload_size = -1
        compacted = False
        event: int | None = None
        b64 = False
        seq: int | None = None
        is_null = False
        null_key = False
        while pos < stop:
            tag = data[pos]
            if tag & 0x80:
                tag, pos = _varint(data, pos, stop)
            else:
                pos += 1
            field = tag >> 3
            wire = tag & 7
            if wire == 0 and 3 <= field <= 10:
                if pos < stop and data[pos] < 0x80:
                    value = data[pos]
                    pos += 1
                else:
                    value, pos = _varint(data, pos, stop)
                if field == 3:
                    payload_size = value if value < 1 << 31 else -1
                elif field == 5:
                    event = value or None
                elif field == 8:
                    seq = value
                elif field == 9:
                    is_null = bool(value)
                elif field == 4:
                    compacted = bool(value)
                elif field == 6:
                    b64 = bool(value)
                elif field == 10:
                    null_key = bool(value)
                else:
                    raise MalformedMessageError(f"field {field} is not a varint", offset=pos)
            elif wire == 2 and field in (1, 2, 7):
                if pos < stop and data[pos] < 0x80:
                    length = data[pos]
                    pos += 1
                else:
                    length, pos = _varint(data, pos, stop)
                if length > stop - pos:
                    raise MalformedMessageError(
                        f"SingleMessageMetadata field {field} overruns", offset=pos
                    )
                if field == 1:
                    properties.append(_key_value(data, pos, pos + length))
                elif field == 2:
                    key = _text(data[pos : pos + length], pos)
                else:
                    ordering = data[pos : pos + length]
                pos += length
            elif field in (1, 2, 7) or 3 <= field <= 10 or field == 0:
                raise MalformedMessageError(
                    f"SingleMessageMetadata field {field} has wire type {wire}", offset=pos
                )
            else:
                pos = _skip(data, pos, stop, wire)
        if payload_size < 0:
            raise MalformedMessageError(
                "SingleMessageMetadata without a valid payload_size", offset=stop
            )
        if payload_size > end - pos:
            raise MessageTruncatedError(
                f"message {index} of {payload_size} bytes overruns the batch", offset=pos
            )
        value_bytes = data[pos : pos + payload_size]
        pos += payload_size
        if compacted:
            continue
        cols[0].append(index)
        cols[1].append(None if null_key else key)
        cols[2].append(ordering)
        cols[3].append(tuple(properties))
        cols[4].append(event)
        cols[5].append(seq)
        cols[6].append(is_null)
        cols[7].append(b"" if is_null else value_bytes)
        cols[8].append(b64)
    if pos != end:
        raise MalformedMessageError(
            f"{end - pos} bytes left after the {count} messages of the batch", offset=pos
        )
    return cols
