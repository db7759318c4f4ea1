"""Reading a transformed Kafka segment (spec/transforms.md §8) as if it were the plain ``.log``.

A segment whose record names a ``chunks`` object was stored chunked: :func:`load_section`
fetches and checks that small object (one GET; callers cache it; its size, CRC32C and
transform against the ones pinned in the record, :mod:`offloader.kafka.integrity`), and
:func:`segment_view` returns the :class:`~offloader.read.transformed.TransformedObjectView`
in which the ``.log`` key answers in original coordinates, so a fetch by offset, a Spark task
or an export reads it with **one** ranged GET of the chunks covering the wanted bytes. The data
key is unwrapped with the key ring (``MissingKeyError`` naming the key id, ``WrongKeyError``); a
tampered chunk is a ``ChunkAuthenticationError``.
"""

from __future__ import annotations

from formats.kafka.names import kafka_uuid_to_uuid
from formats.transform import (
    AAD_MAGIC_KAFKA,
    ChunkDecoder,
    ChunkMap,
    ObjectIdentity,
    TransformSection,
    decode_segment_table,
)
from offloader.errors import IndexInconsistentError
from offloader.kafka.integrity import check_transform, verified_object
from offloader.metadata.kafka_base import RemoteSegmentRecord
from offloader.read.transformed import TransformedObjectView, data_key_of, shared_chunk_cache
from offloader.store.base import ObjectStore

#: the record's key of the chunk-table object (present exactly when the segment is transformed)
CHUNKS = "chunks"


def is_transformed(record: RemoteSegmentRecord) -> bool:
    return CHUNKS in record.keys


def segment_identity(segment_id: str, base_offset: int) -> ObjectIdentity:
    """What a segment's chunks are bound to: its remote segment id and its base offset."""
    return ObjectIdentity(str(kafka_uuid_to_uuid(segment_id)), base_offset, AAD_MAGIC_KAFKA)


def decode_table(data: bytes, record: RemoteSegmentRecord) -> TransformSection:
    """The section of the record's ``.chunks`` object bytes, checked against the record."""
    section = decode_segment_table(
        data, str(kafka_uuid_to_uuid(record.segment_id)), record.base_offset
    )
    if section.original_size != record.size_bytes:
        raise IndexInconsistentError(
            f"{record.keys[CHUNKS]}: the chunk table covers {section.original_size} bytes, the "
            f"segment's .log has {record.size_bytes}"
        )
    return section


def load_section(store: ObjectStore, record: RemoteSegmentRecord) -> TransformSection:
    """The transform section of a transformed segment (one GET of its ``.chunks``), checked
    against the record's pinned checksum and transform before it is decoded."""
    section = decode_table(verified_object(store, record, CHUNKS), record)
    check_transform(record, section)
    return section


def segment_view(
    store: ObjectStore,
    key: str,
    segment_id: str,
    base_offset: int,
    section: TransformSection,
    *,
    key_ring: str | None,
    cache_bytes: int = 0,
) -> TransformedObjectView:
    """``store`` with the ``.log`` ``key`` read through its chunks (the key unwrapped now)."""
    decoder = ChunkDecoder(
        ChunkMap(section),
        segment_identity(segment_id, base_offset),
        data_key_of(section, key_ring),
    )
    return TransformedObjectView(store, key, decoder, shared_chunk_cache(cache_bytes))
