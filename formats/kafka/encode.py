"""The record batch encoder (magic 2): for tests, tools and fixtures, not for brokers.

:func:`encode_batch` lays out :class:`NewRecord` s as one batch with the CRC32C Kafka expects;
what it writes, Kafka clients read (``tests/kafka`` checks it with kafka-python's reader).
:func:`control_record` makes a transaction marker (COMMIT / ABORT) for a control batch.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from formats.kafka.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from formats.kafka.codecs import NONE, codec_name, compress
from formats.kafka.errors import KafkaFormatError
from formats.kafka.varint import write_varint


@dataclass(frozen=True)
class NewRecord:
    """A record to encode; ``offset_delta`` defaults to its place in the batch."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset_delta: int | None = None


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return write_varint(-1)
    return write_varint(len(data)) + data


def encode_record(record: NewRecord, offset_delta: int, base_timestamp: int) -> bytes:
    body = bytearray(b"\x00")
    body += write_varint(record.timestamp - base_timestamp)
    body += write_varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += write_varint(len(record.headers))
    for key, value in record.headers:
        body += _bytes_field(key.encode("utf-8"))
        body += _bytes_field(value)
    return write_varint(len(body)) + bytes(body)


def control_record(kind: int, *, coordinator_epoch: int = 0, timestamp: int) -> NewRecord:
    """A COMMIT (1) or ABORT (0) marker for a control batch."""
    return NewRecord(
        timestamp,
        struct.pack(">hh", 0, kind),
        struct.pack(">hi", 0, coordinator_epoch),
    )


def encode_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int,
    codec: int = NONE,
    leader_epoch: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
) -> bytes:
    """One batch holding ``records`` (at least one), compressed with ``codec``."""
    codec_name(codec)
    if not records:
        raise KafkaFormatError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    deltas = [i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)]
    if any(b <= a for a, b in itertools.pairwise(deltas)) or deltas[0] < 0:
        raise KafkaFormatError("record offset deltas must start at 0 or more and increase")
    body = b"".join(
        encode_record(r, d, base_timestamp) for r, d in zip(records, deltas, strict=True)
    )
    payload = compress(codec, body)
    attributes = codec
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    max_timestamp = max(r.timestamp for r in records)
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_timestamp = log_append_time
    buf = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        len(buf) - LOG_OVERHEAD,
        leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        deltas[-1],
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, CRC_OFFSET, _crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)
