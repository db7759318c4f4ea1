"""Kafka record batches (magic 2, ``DefaultRecordBatch``): headers, CRC32C, records.

A batch is a 61-byte header then its records (compressed as one block when the codec is not
none)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records

``batchLength`` counts the bytes after itself (a batch is ``batchLength + 12`` bytes); the CRC32C
covers ``attributes`` to the end of the batch (neither the base offset nor the leader epoch, which
a broker rewrites). Each record is ``length varint | attributes i8 | timestampDelta varlong |
offsetDelta varint | keyLength varint | key | valueLength varint | value | headerCount varint |
(keyLength varint | key utf-8 | valueLength varint | value)*`` with ``-1`` lengths for null.

:func:`iter_batch_headers` walks a buffer batch by batch without touching the records (the CRC
checked when asked); :func:`decode_records` decodes one batch's records. Every malformed input
raises a :mod:`formats.kafka.errors` error naming the segment (``source``) and byte offset;
magic 0 and 1 message sets raise :class:`~formats.kafka.errors.UnsupportedMagicError`, but only
when the bytes really are one (:func:`is_legacy_message`: a plausible v0/v1 layout whose CRC32
matches); any other magic byte is corruption, :class:`~formats.kafka.errors.CorruptBatchError`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import crc32c as _crc32c

from formats.kafka.codecs import DEFAULT_MAX_SIZE, NONE, codec_name, decompress
from formats.kafka.errors import (
    CorruptBatchError,
    KafkaChecksumError,
    KafkaCorruptError,
    KafkaTruncatedError,
    UnsupportedMagicError,
)
from formats.kafka.varint import read_varint, read_varlong

Buffer = bytes | bytearray | memoryview

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAGIC_V2: Final = 2
NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1

_CONTROL_KEY = struct.Struct(">hh")
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1


@dataclass(frozen=True)
class BatchHeader:
    """A batch's header fields and where the batch sits in its buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (Spark's ``timestampType``)."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


@dataclass(frozen=True)
class Record:
    """One record, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


@dataclass(frozen=True)
class ControlRecord:
    """The key and value of a control record (a transaction marker)."""

    type: int  # CONTROL_ABORT or CONTROL_COMMIT
    version: int
    coordinator_epoch: int


def read_batch_header(
    buf: Buffer, pos: int, *, source: str | None = None, whole: bool = True, shift: int = 0
) -> BatchHeader:
    """The header of the batch at ``pos`` (its length checked against ``buf``, CRC not).
    ``whole`` False: the batch may run past the end of ``buf`` (a stream read in pieces, whose
    next piece holds the rest). ``shift``: added to ``pos`` in the header's ``position`` and
    in error offsets (``buf`` is a piece of a file starting at byte ``shift``)."""
    end = len(buf)
    at = pos + shift
    if pos + MAGIC_OFFSET + 1 > end:
        raise KafkaTruncatedError(
            f"record batch header needs {HEADER_SIZE} bytes, {end - pos} left",
            offset=at,
            source=source,
        )
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        if is_legacy_message(buf, pos):
            raise UnsupportedMagicError(magic, offset=at, source=source)
        raise CorruptBatchError(magic, offset=at, source=source)
    if pos + HEADER_SIZE > end:
        raise KafkaTruncatedError(
            f"record batch header needs {HEADER_SIZE} bytes, {end - pos} left",
            offset=at,
            source=source,
        )
    fields = HEADER.unpack_from(buf, pos)
    header = BatchHeader(at, *fields)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise KafkaCorruptError(
            f"batch length {header.batch_length} is below the {HEADER_SIZE - LOG_OVERHEAD}-byte"
            " minimum",
            offset=at,
            source=source,
        )
    if whole and pos + header.size > end:
        raise KafkaTruncatedError(
            f"record batch of {header.size} bytes runs past the end ({end - pos} left)",
            offset=at,
            source=source,
        )
    if header.base_offset < 0 or header.last_offset_delta < 0 or header.record_count < 0:
        raise KafkaCorruptError(
            f"record batch with base offset {header.base_offset}, last offset delta "
            f"{header.last_offset_delta} and {header.record_count} records",
            offset=at,
            source=source,
        )
    if header.compression > 4:
        raise KafkaCorruptError(
            f"unknown compression type {header.compression}", offset=at, source=source
        )
    return header


#: a magic 0/1 message: offset i64 | size i32 | crc u32 | magic i8 | attributes i8
_LEGACY_HEAD = struct.Struct(">qiIbb")
_LEGACY_CODEC_BITS = 0x07  # none, gzip, snappy, lz4
_LEGACY_TIMESTAMP_TYPE = 0x08  # magic 1 only


def is_legacy_message(buf: Buffer, pos: int) -> bool:
    """True when the bytes at ``pos`` are a whole magic 0 or 1 message (Kafka < 0.11): known
    attribute bits, key and value lengths that fill the announced size exactly, and a CRC32 (of
    magic to the end) that matches. A message cut off by the end of ``buf`` counts when its
    header is plausible (its CRC cannot be checked)."""
    end = len(buf)
    if pos + _LEGACY_HEAD.size > end:
        return False
    _, size, crc, magic, attributes = _LEGACY_HEAD.unpack_from(buf, pos)
    if magic not in (0, 1):
        return False
    allowed = _LEGACY_CODEC_BITS | (_LEGACY_TIMESTAMP_TYPE if magic == 1 else 0)
    fixed = 4 + 1 + 1 + (8 if magic == 1 else 0)  # crc, magic, attributes, timestamp
    if attributes & ~allowed or attributes & _LEGACY_CODEC_BITS > 3 or size < fixed + 8:
        return False
    message_end = pos + LOG_OVERHEAD + size
    if message_end > end:
        return True  # cut off: the header is all there is to judge
    at = pos + LOG_OVERHEAD + fixed
    for _ in ("key", "value"):
        if at + 4 > message_end:
            return False
        (length,) = struct.unpack_from(">i", buf, at)
        if length < -1:
            return False
        at += 4 + max(length, 0)
    if at != message_end:
        return False
    checked = memoryview(buf)[pos + LOG_OVERHEAD + 4 : message_end]
    return bool(zlib.crc32(checked) == crc)


def batch_crc(buf: Buffer, header: BatchHeader) -> int:
    """CRC32C of the batch's bytes from ``attributes`` to its end."""
    view = memoryview(buf)[header.position + ATTRIBUTES_OFFSET : header.end]
    return int(_crc32c.crc32c(view))


def check_crc(buf: Buffer, header: BatchHeader, *, source: str | None = None) -> None:
    actual = batch_crc(buf, header)
    if actual != header.crc:
        raise KafkaChecksumError(
            f"record batch at base offset {header.base_offset} has CRC32C {actual:#010x}, "
            f"its header says {header.crc:#010x}",
            offset=header.position,
            source=source,
        )


def iter_batch_headers(
    buf: Buffer,
    start: int = 0,
    *,
    source: str | None = None,
    verify_crc: bool = True,
    stop_at_partial: bool = False,
) -> Iterator[BatchHeader]:
    """Every batch header of ``buf`` from ``start`` to its end, back to back.

    ``stop_at_partial`` ends quietly at a batch cut off by the end of ``buf`` (a ranged read
    of a prefix); otherwise a cut-off batch is a ``KafkaTruncatedError``.
    """
    pos = start
    end = len(buf)
    previous_next = -1
    while pos < end:
        try:
            header = read_batch_header(buf, pos, source=source)
        except KafkaTruncatedError:
            if stop_at_partial:
                return
            raise
        if verify_crc:
            check_crc(buf, header, source=source)
        if header.base_offset < previous_next:
            raise KafkaCorruptError(
                f"batch base offset {header.base_offset} goes back (previous batch ended at "
                f"offset {previous_next - 1})",
                offset=pos,
                source=source,
            )
        previous_next = header.next_offset
        yield header
        pos = header.end


def _read_bytes(
    data: memoryview, pos: int, what: str, source: str | None
) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise KafkaCorruptError(f"{what} length {length}", offset=pos, source=source)
        return None, pos
    if pos + length > len(data):
        raise KafkaTruncatedError(
            f"{what} of {length} bytes runs past its record", offset=pos, source=source
        )
    return bytes(data[pos : pos + length]), pos + length


def _decode_record(
    data: memoryview, pos: int, header: BatchHeader, source: str | None
) -> tuple[Record, int]:
    length, pos = read_varint(data, pos)
    record_end = pos + length
    if length < 6 or record_end > len(data):
        raise KafkaCorruptError(f"record length {length} does not fit", offset=pos, source=source)
    body = data[:record_end]
    attributes = body[pos]
    ts_delta, pos = read_varlong(body, pos + 1)
    offset_delta, pos = read_varint(body, pos)
    key, pos = _read_bytes(body, pos, "record key", source)
    value, pos = _read_bytes(body, pos, "record value", source)
    count, pos = read_varint(body, pos)
    if count < 0:
        raise KafkaCorruptError(f"record header count {count}", offset=pos, source=source)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        hkey, pos = _read_bytes(body, pos, "header key", source)
        if hkey is None:
            raise KafkaCorruptError("null record header key", offset=pos, source=source)
        hvalue, pos = _read_bytes(body, pos, "header value", source)
        try:
            headers.append((hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError as exc:
            raise KafkaCorruptError(
                "record header key is not UTF-8", offset=pos, source=source
            ) from exc
    if pos != record_end:
        raise KafkaCorruptError(
            f"record announces {length} bytes but its fields take {length + pos - record_end}",
            offset=pos,
            source=source,
        )
    if not 0 <= offset_delta <= header.last_offset_delta:
        raise KafkaCorruptError(
            f"record offset delta {offset_delta} outside the batch's 0..{header.last_offset_delta}",
            offset=pos,
            source=source,
        )
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + ts_delta
    record = Record(
        header.base_offset + offset_delta, timestamp, key, value, tuple(headers), attributes
    )
    return record, record_end


def records_bytes(
    buf: Buffer, header: BatchHeader, *, source: str | None = None, max_size: int = DEFAULT_MAX_SIZE
) -> bytes:
    """The batch's records region, decompressed."""
    region = memoryview(buf)[header.position + HEADER_SIZE : header.end]
    if header.compression == NONE:
        return bytes(region)
    try:
        return decompress(header.compression, region, max_size=max_size)
    except KafkaCorruptError as exc:
        raise KafkaCorruptError(
            f"batch at base offset {header.base_offset} ({codec_name(header.compression)}): {exc}",
            offset=header.position,
            source=source,
        ) from exc


def decode_records(buf: Buffer, header: BatchHeader, *, source: str | None = None) -> list[Record]:
    """The records of the batch ``header`` describes (its CRC is the caller's to check)."""
    data = memoryview(records_bytes(buf, header, source=source))
    records: list[Record] = []
    pos = 0
    previous = -1
    try:
        for _ in range(header.record_count):
            if pos >= len(data):
                raise KafkaTruncatedError(
                    f"batch announces {header.record_count} records, holds {len(records)}",
                    offset=header.position,
                    source=source,
                )
            record, pos = _decode_record(data, pos, header, source)
            if record.offset <= previous:
                raise KafkaCorruptError(
                    f"record offset {record.offset} does not increase",
                    offset=header.position,
                    source=source,
                )
            previous = record.offset
            records.append(record)
    except (KafkaTruncatedError, KafkaCorruptError) as exc:
        if exc.source is None and source is not None:
            raise KafkaCorruptError(
                f"batch at base offset {header.base_offset}: {exc}",
                offset=header.position,
                source=source,
            ) from exc
        raise
    if pos != len(data):
        raise KafkaCorruptError(
            f"batch at base offset {header.base_offset} has {len(data) - pos} bytes after its "
            f"{header.record_count} records",
            offset=header.position,
            source=source,
        )
    return records


def iter_records(
    buf: Buffer, start: int = 0, *, source: str | None = None, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record of every batch in ``buf`` with the header of its batch."""
    for header in iter_batch_headers(buf, start, source=source, verify_crc=verify_crc):
        for record in decode_records(buf, header, source=source):
            yield header, record


def decode_control(record: Record, *, source: str | None = None) -> ControlRecord:
    """The transaction marker of a control batch's record."""
    key, value = record.key, record.value
    if key is None or len(key) < 4 or value is None or len(value) < 6:
        raise KafkaCorruptError(
            f"control record at offset {record.offset} has a short key or value", source=source
        )
    version, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise KafkaCorruptError(
            f"control record at offset {record.offset} has unknown type {kind}", source=source
        )
    (epoch,) = struct.unpack_from(">i", value, 2)
    return ControlRecord(kind, version, epoch)
