"""The producer side: messages -> Pulsar entries (what a client sends and a broker stores).

Used by the tests (round trips, corruption) and by ``topics produce --format pulsar``. It
writes what the official client writes (checked against its captured bytes in
tests/golden/pulsar-messages): batch-level metadata holds the first message's key and sequence
id, each message's own fields are in its SingleMessageMetadata, ``uncompressed_size`` is set on
compressed entries only, compression happens before encryption, chunks cut the compressed
(and encrypted) whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from formats.extension import crc32c
from formats.pulsar.compression import NONE, compress
from formats.pulsar.entry import MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C
from formats.pulsar.errors import MessageEncodeError
from formats.pulsar.metadata import (
    BrokerEntryMetadata,
    MessageMetadata,
    Properties,
    SingleMessageMetadata,
    encode_broker_entry_metadata,
    encode_message_metadata,
    encode_single_message_metadata,
)

if TYPE_CHECKING:
    from formats.pulsar.crypto import Encryptor


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to encode; ``value=None`` is a null value (a tombstone)."""

    value: bytes | None
    key: str | None = None
    ordering_key: bytes | None = None
    properties: Properties = ()
    event_time: int | None = None
    sequence_id: int | None = None


def frame_entry(
    md: MessageMetadata,
    payload: bytes,
    *,
    checksum: bool = True,
    broker_metadata: BrokerEntryMetadata | None = None,
) -> bytes:
    """``[0x0e02 broker metadata] [0x0e01 crc32c] metadata_size metadata payload``."""
    meta = encode_message_metadata(md)
    body = len(meta).to_bytes(4, "big") + meta + payload
    if checksum:
        body = MAGIC_CRC32C + crc32c(body).to_bytes(4, "big") + body
    if broker_metadata is not None:
        bem = encode_broker_entry_metadata(broker_metadata)
        body = MAGIC_BROKER_ENTRY_METADATA + len(bem).to_bytes(4, "big") + bem + body
    return body


def batch_payload(messages: Sequence[OutgoingMessage]) -> bytes:
    """The uncompressed payload of a batch."""
    parts: list[bytes] = []
    for msg in messages:
        value = msg.value if msg.value is not None else b""
        smm = SingleMessageMetadata(
            properties=tuple(msg.properties),
            partition_key=msg.key,
            payload_size=len(value),
            event_time=msg.event_time or None,
            ordering_key=msg.ordering_key,
            sequence_id=msg.sequence_id,
            null_value=True if msg.value is None else None,
        )
        meta = encode_single_message_metadata(smm)
        parts.append(len(meta).to_bytes(4, "big"))
        parts.append(meta)
        parts.append(value)
    return b"".join(parts)


def _seal(md: MessageMetadata, raw: bytes, compression: int, encryptor: Encryptor | None) -> bytes:
    """Compress (setting uncompressed_size) and encrypt ``raw``, filling ``md``."""
    payload = raw
    if compression != NONE:
        md.compression = compression
        md.uncompressed_size = len(raw)
        payload = compress(compression, raw)
    if encryptor is not None:
        iv, payload = encryptor.encrypt(payload)
        md.encryption_keys = (encryptor.key,)
        md.encryption_param = iv
    return payload


def encode_entry(
    messages: Sequence[OutgoingMessage],
    *,
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    batch: bool = True,
    compression: int = NONE,
    schema_version: bytes | None = None,
    encryptor: Encryptor | None = None,
    checksum: bool = True,
    broker_metadata: BrokerEntryMetadata | None = None,
    marker_type: int | None = None,
) -> bytes:
    """One entry: a batch of ``messages`` (``batch=True``) or exactly one plain message."""
    if not messages:
        raise MessageEncodeError("an entry needs at least one message")
    first = messages[0]
    md = MessageMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id if first.sequence_id is None else first.sequence_id,
        publish_time=publish_time,
        partition_key=first.key,
        ordering_key=first.ordering_key,
        schema_version=schema_version,
        marker_type=marker_type,
    )
    if batch:
        md.num_messages_in_batch = len(messages)
        raw = batch_payload(messages)
    else:
        if len(messages) != 1:
            raise MessageEncodeError("a non-batched entry holds exactly one message")
        md.properties = tuple(first.properties)
        md.event_time = first.event_time or None
        md.null_value = True if first.value is None else None
        raw = first.value or b""
    payload = _seal(md, raw, compression, encryptor)
    return frame_entry(md, payload, checksum=checksum, broker_metadata=broker_metadata)


def encode_chunks(
    message: OutgoingMessage,
    *,
    chunk_size: int,
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    compression: int = NONE,
    schema_version: bytes | None = None,
    encryptor: Encryptor | None = None,
) -> list[bytes]:
    """One large message as chunk entries of at most ``chunk_size`` payload bytes each."""
    if chunk_size < 1:
        raise MessageEncodeError(f"chunk_size {chunk_size} < 1")
    template = MessageMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=publish_time,
        partition_key=message.key,
        ordering_key=message.ordering_key,
        properties=tuple(message.properties),
        event_time=message.event_time or None,
        schema_version=schema_version,
        null_value=True if message.value is None else None,
    )
    whole = _seal(template, message.value or b"", compression, encryptor)
    count = max(1, -(-len(whole) // chunk_size))
    if count < 2:
        raise MessageEncodeError("the message fits in one entry: use encode_entry")
    entries = []
    for chunk_id in range(count):
        md = MessageMetadata(**{name: getattr(template, name) for name in template.__slots__})
        md.uuid = f"{producer_name}-{sequence_id}"
        md.chunk_id = chunk_id
        md.num_chunks_from_msg = count
        md.total_chunk_msg_size = len(whole)
        piece = whole[chunk_id * chunk_size : (chunk_id + 1) * chunk_size]
        entries.append(frame_entry(md, piece))
    return entries
