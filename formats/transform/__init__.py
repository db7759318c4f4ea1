"""Chunked compression and encryption at rest (spec/transforms.md): pure codecs, no I/O.

``section``: the chunk table + wrapped data key (index extension tag 3) and the original <->
stored offset map; ``chunks``: zstd / AES-256-GCM of chunks and AES-KW of data keys;
``precompressed``: the cheap "already compressed?" look at Pulsar message metadata and Kafka
batch attributes; ``segment_table``: the ``.chunks`` object of a transformed Kafka segment.
"""

from formats.extension import TAG_TRANSFORM
from formats.transform.chunks import (
    AAD_MAGIC_KAFKA,
    AAD_MAGIC_PULSAR,
    DATA_KEY_LEN,
    DEFAULT_ZSTD_LEVEL,
    ChunkDecoder,
    ChunkEncoder,
    ObjectIdentity,
    unwrap_data_key,
    wrap_data_key,
)
from formats.transform.precompressed import (
    compress_hints,
    kafka_compress_hints,
    pulsar_compression_codec,
)
from formats.transform.section import (
    CHUNKED_FORMAT_VERSION,
    DEFAULT_CHUNK_SIZE,
    ChunkMap,
    ChunkSpan,
    StoredChunk,
    TransformSection,
    decode_section,
    encode_section,
    transform_extension_section,
    transform_of,
)
from formats.transform.segment_table import (
    TABLE_MAGIC,
    SegmentTable,
    decode_segment_table,
    encode_segment_table,
    read_segment_table,
)

__all__ = [
    "AAD_MAGIC_KAFKA",
    "AAD_MAGIC_PULSAR",
    "CHUNKED_FORMAT_VERSION",
    "DATA_KEY_LEN",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_ZSTD_LEVEL",
    "TABLE_MAGIC",
    "TAG_TRANSFORM",
    "ChunkDecoder",
    "ChunkEncoder",
    "ChunkMap",
    "ChunkSpan",
    "ObjectIdentity",
    "SegmentTable",
    "StoredChunk",
    "TransformSection",
    "compress_hints",
    "decode_section",
    "decode_segment_table",
    "encode_section",
    "encode_segment_table",
    "kafka_compress_hints",
    "pulsar_compression_codec",
    "read_segment_table",
    "transform_extension_section",
    "transform_of",
    "unwrap_data_key",
    "wrap_data_key",
]
