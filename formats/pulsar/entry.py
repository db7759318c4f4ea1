"""One stored Pulsar entry -> its messages (pure; no I/O).

Entry layout (spec/pulsar-messages.md §2)::

    [0x0e02 u16 | size i32 | BrokerEntryMetadata]      optional, written by the broker
    [0x0e01 u16 | crc32c u32]                           absent in entries of very old clients
    metadata_size i32 | MessageMetadata | payload       crc32c covers all of this line

:func:`parse_entry` splits an entry and checks its CRC32C; :func:`entry_messages` turns a
parsed (and, for chunks, reassembled) entry into :class:`Message` values: decrypt (when a
:class:`~formats.pulsar.crypto.Decryptor` is given), decompress (bounded), split a batch.
Every malformed input is a :class:`~formats.pulsar.errors.PulsarMessageError` naming the ledger
and entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from formats.errors import ProtobufError
from formats.extension import crc32c
from formats.pulsar.batch import split_batch
from formats.pulsar.compression import DEFAULT_LIMIT, NONE, decompress
from formats.pulsar.errors import (
    MalformedMessageError,
    MessageChecksumError,
    MessageTruncatedError,
    PulsarMessageError,
)
from formats.pulsar.metadata import (
    BrokerEntryMetadata,
    MessageMetadata,
    Properties,
    decode_broker_entry_metadata,
    decode_message_metadata,
)

if TYPE_CHECKING:
    from formats.pulsar.crypto import Decryptor


MAGIC_CRC32C = b"\x0e\x01"
MAGIC_BROKER_ENTRY_METADATA = b"\x0e\x02"


@dataclass(slots=True)
class Message:
    """One user message, as a consumer would see it."""

    ledger_id: int
    entry_id: int
    partition: int
    #: index inside its batch; -1 for a message that was not batched
    batch_index: int
    producer_name: str
    sequence_id: int
    publish_time: int
    #: milliseconds since the epoch; None when the producer did not set it
    event_time: int | None
    key: str | None
    ordering_key: bytes | None
    properties: Properties
    schema_version: bytes | None
    is_null: bool
    #: True when ``value`` is still ciphertext (no key given): the stored payload, whole batch
    encrypted: bool
    value: bytes
    key_b64_encoded: bool = False

    @property
    def message_id(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.partition}:{self.batch_index}"


@dataclass(slots=True)
class ParsedEntry:
    """An entry split into its parts; ``payload`` as stored (maybe compressed, encrypted, or
    one chunk of a larger message)."""

    metadata: MessageMetadata
    payload: bytes
    broker_metadata: BrokerEntryMetadata | None = None
    has_checksum: bool = False


def _int32(data: bytes, pos: int, what: str) -> int:
    if pos + 4 > len(data):
        raise MessageTruncatedError(f"entry ends inside the {what}", offset=pos)
    return int.from_bytes(data[pos : pos + 4], "big", signed=True)


def parse_entry(
    data: bytes | bytearray | memoryview,
    *,
    ledger_id: int | None = None,
    entry_id: int | None = None,
    verify_checksum: bool = True,
) -> ParsedEntry:
    """Split one entry; a CRC32C mismatch is a :class:`MessageChecksumError`."""
    buf = bytes(data)
    try:
        return _parse(buf, verify_checksum)
    except PulsarMessageError as exc:
        raise exc.located(ledger_id, entry_id) from exc.__cause__
    except ProtobufError as exc:  # pragma: no cover - metadata decoding wraps these
        raise MalformedMessageError(str(exc), ledger_id=ledger_id, entry_id=entry_id) from None


def _parse(buf: bytes, verify_checksum: bool) -> ParsedEntry:
    pos = 0
    broker: BrokerEntryMetadata | None = None
    if buf[:2] == MAGIC_BROKER_ENTRY_METADATA:
        size = _int32(buf, 2, "broker entry metadata size")
        if size < 0:
            raise MalformedMessageError(f"negative broker entry metadata size {size}", offset=2)
        if 6 + size > len(buf):
            raise MessageTruncatedError(
                f"broker entry metadata of {size} bytes overruns the entry", offset=2
            )
        broker = decode_broker_entry_metadata(memoryview(buf)[6 : 6 + size], 6)
        pos = 6 + size
    has_checksum = buf[pos : pos + 2] == MAGIC_CRC32C
    if has_checksum:
        if pos + 6 > len(buf):
            raise MessageTruncatedError("entry ends inside the checksum", offset=pos + 2)
        stored = int.from_bytes(buf[pos + 2 : pos + 6], "big")
        pos += 6
        if verify_checksum:
            actual = crc32c(memoryview(buf)[pos:])
            if actual != stored:
                raise MessageChecksumError(
                    f"CRC32C mismatch: stored {stored:#010x}, computed {actual:#010x}",
                    offset=pos - 4,
                )
    size = _int32(buf, pos, "metadata size")
    if size < 0:
        raise MalformedMessageError(f"negative metadata size {size}", offset=pos)
    start = pos + 4
    if start + size > len(buf):
        raise MessageTruncatedError(
            f"metadata of {size} bytes overruns the entry ({len(buf) - start} left)", offset=pos
        )
    md = decode_message_metadata(memoryview(buf)[start : start + size], start)
    return ParsedEntry(md, buf[start + size :], broker, has_checksum)


def not_a_message(prefix: bytes | bytearray | memoryview, length: int | None = None) -> str | None:
    """Why an entry cannot be a Pulsar message entry, judged from its first bytes ``prefix``
    (``length``: the whole entry's size; default ``len(prefix)``, the whole entry), or None when
    it may be one.

    The layout's fixed parts are checked as far as ``prefix`` reaches: the broker entry
    metadata's size, the checksum's place, the metadata size (within the entry) and the
    MessageMetadata itself (its required fields) when ``prefix`` holds it. The CRC32C is not
    checked (a mismatch is damage to a message, not another format). Raw payloads fail here:
    ``b"entry-0"`` read as a metadata size is 1701737586 bytes."""
    buf = bytes(prefix)
    total = len(buf) if length is None else length
    if total == 0:
        return "the entry is empty"
    pos = 0
    if buf[:2] == MAGIC_BROKER_ENTRY_METADATA:
        if total < 6:
            return f"an entry of {total} bytes ends inside the broker entry metadata size"
        if len(buf) < 6:
            return None
        size = int.from_bytes(buf[2:6], "big", signed=True)
        if size < 0 or 6 + size > total:
            return f"broker entry metadata of {size} bytes does not fit the entry of {total}"
        pos = 6 + size
    if buf[pos : pos + 2] == MAGIC_CRC32C:
        if pos + 6 > total:
            return f"an entry of {total} bytes ends inside its checksum"
        pos += 6
    if pos + 4 > total:
        return f"an entry of {total} bytes ends inside the metadata size"
    if pos + 4 > len(buf):
        return None
    size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    start = pos + 4
    if size < 0 or start + size > total:
        return (
            f"metadata of {size} bytes does not fit the entry ({total - start} bytes left; "
            "no Pulsar magic 0x0e01 or 0x0e02 at its start)"
        )
    if start + size > len(buf):
        return None
    try:
        decode_message_metadata(memoryview(buf)[start : start + size], start)
    except (PulsarMessageError, ProtobufError) as exc:
        return f"its metadata does not decode: {exc}"
    return None


def entry_messages(
    parsed: ParsedEntry,
    *,
    ledger_id: int = -1,
    entry_id: int = -1,
    partition: int = -1,
    decryptor: Decryptor | None = None,
    limit: int = DEFAULT_LIMIT,
    include_markers: bool = False,
) -> list[Message]:
    """The messages of a whole (non-chunk, or reassembled) entry; markers give none."""
    md = parsed.metadata
    if md.marker_type is not None and not include_markers:
        return []
    try:
        return _messages(parsed, ledger_id, entry_id, partition, decryptor, limit)
    except PulsarMessageError as exc:
        raise exc.located(ledger_id, entry_id) from exc.__cause__


def _messages(
    parsed: ParsedEntry,
    ledger_id: int,
    entry_id: int,
    partition: int,
    decryptor: Decryptor | None,
    limit: int,
) -> list[Message]:
    md = parsed.metadata
    payload = parsed.payload
    encrypted = bool(md.encryption_keys)
    if encrypted:
        if decryptor is None:
            return [_single(md, payload, ledger_id, entry_id, partition, encrypted=True)]
        payload = decryptor.decrypt(md, payload)
    codec = md.compression or NONE
    if codec != NONE:
        payload = decompress(codec, payload, md.uncompressed_size or 0, limit)
    if md.is_batch:
        return split_batch(md, payload, ledger_id, entry_id, partition, Message)
    return [_single(md, payload, ledger_id, entry_id, partition, encrypted=False)]


def _single(
    md: MessageMetadata,
    payload: bytes,
    ledger_id: int,
    entry_id: int,
    partition: int,
    *,
    encrypted: bool,
) -> Message:
    is_null = bool(md.null_value) and not encrypted
    return Message(
        ledger_id,
        entry_id,
        partition,
        -1,
        md.producer_name,
        md.sequence_id,
        md.publish_time,
        md.event_time,
        None if md.null_partition_key else md.partition_key,
        md.ordering_key,
        md.properties,
        md.schema_version,
        is_null,
        encrypted,
        b"" if is_null else payload,
        bool(md.partition_key_b64_encoded),
    )


def decode_entry(
    data: bytes | bytearray | memoryview,
    *,
    ledger_id: int = -1,
    entry_id: int = -1,
    partition: int = -1,
    decryptor: Decryptor | None = None,
    verify_checksum: bool = True,
    limit: int = DEFAULT_LIMIT,
) -> list[Message]:
    """The messages of one entry that is not a chunk (chunks: :mod:`formats.pulsar.chunks`)."""
    parsed = parse_entry(
        data, ledger_id=ledger_id, entry_id=entry_id, verify_checksum=verify_checksum
    )
    if parsed.metadata.is_chunk:
        from formats.pulsar.errors import ChunkError

        raise ChunkError(
            "a chunk of a larger message: decode with formats.pulsar.iter_messages",
            ledger_id=ledger_id,
            entry_id=entry_id,
        )
    return entry_messages(
        parsed,
        ledger_id=ledger_id,
        entry_id=entry_id,
        partition=partition,
        decryptor=decryptor,
        limit=limit,
    )
