"""KafkaSettings: where and how the Kafka tier writes (the key scheme asked for, part size) and
how it transforms segments (the key ring, the chunk size, the decoded-chunk cache, and
offloader.toml's per-topic transform policies; spec/transforms.md §8), and the Kafka cluster
whose metadata gates uploads."""

from __future__ import annotations

from dataclasses import dataclass

from formats.transform.section import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from offloader.config import MiB, check_s3_part_size
from offloader.errors import ConfigError
from offloader.policies import TransformPolicy


@dataclass(frozen=True)
class KafkaSettings:
    #: the key scheme asked for (spec/kafka-segments.md, "Names"); None: not asked, the tier's
    #: persisted scheme applies (the first upload persists what it is given, the defaults for
    #: what it is not: prefix "kafka", no hash prefix, no cluster). A value that differs from
    #: the persisted scheme is a ConfigError (:func:`offloader.kafka.keys.resolve_key_scheme`).
    #: key prefix under the store's root
    prefix: str | None = None
    #: hex digits of MD5(topic-topicId/partition) in front of each key (0: none)
    hash_prefix_len: int | None = None
    #: Pinterest's key form: the cluster name after the prefix (and the entropy bits)
    cluster: str | None = None
    #: Pinterest's key form: bits of MD5(cluster/topic-partition) between prefix and cluster
    entropy_bits: int | None = None
    #: multipart part size of the .log upload (a .log of at most this size is one PUT)
    part_size: int = 64 * MiB
    #: parts in flight at once (memory: each holds one part of the segment, read with pread)
    concurrency: int = 4
    #: a COPY_SEGMENT_STARTED attempt older than this is abandoned (a crashed uploader) and
    #: cleaned up by the next upload run
    stale_attempt_ms: int = 3_600_000
    #: enforce S3's 5 MiB minimum part size (off only for tests against small objects)
    enforce_min_part_size: bool = True
    #: the key ring file of encrypted segments (None: $OFFLOADER_KEY_RING, else ./.offloader/keys;
    #: the facade fills in the home's)
    key_ring: str | None = None
    #: original bytes per chunk of a transformed ``.log`` (None: the broker's [transform]
    #: chunk_size, 1 MiB by default)
    transform_chunk_size: int | None = None
    #: decoded chunks kept for repeated reads, per process (None: the broker's; 0: off)
    chunk_cache_bytes: int | None = None
    #: offloader.toml's [transform.kafka_topics]: the policy of topics that set none in the
    #: metadata store
    topic_transforms: tuple[tuple[str, TransformPolicy], ...] = ()
    #: the Kafka cluster's metadata (``zk:host:port[/chroot]`` or ``kraft:<metadata log dir>``):
    #: only partitions this broker leads, of topics with remote.storage.enable=true, are
    #: uploaded (:mod:`offloader.kafka.leadership`); None: every partition of the log dir
    cluster_metadata: str | None = None

    @property
    def chunk_size(self) -> int:
        return self.transform_chunk_size or DEFAULT_CHUNK_SIZE

    @property
    def cache_bytes(self) -> int:
        return self.chunk_cache_bytes or 0

    def __post_init__(self) -> None:
        chunk = self.transform_chunk_size
        if chunk is not None and not MIN_CHUNK_SIZE <= chunk <= MAX_CHUNK_SIZE:
            raise ConfigError(f"transform chunk size {chunk} not in 16..64M")
        if self.chunk_cache_bytes is not None and self.chunk_cache_bytes < 0:
            raise ConfigError("chunk cache size must not be negative")
        if self.hash_prefix_len is not None and not 0 <= self.hash_prefix_len <= 32:
            raise ConfigError(f"hash prefix length {self.hash_prefix_len} not in 0..32")
        if self.entropy_bits is not None and not 0 <= self.entropy_bits <= 32:
            raise ConfigError(f"entropy bits {self.entropy_bits} not in 0..32")
        if self.enforce_min_part_size:
            check_s3_part_size(self.part_size, "part size", "part_size")
        if self.part_size < 1024:
            raise ConfigError(f"part size {self.part_size} is too small")
        if not 1 <= self.concurrency <= 64:
            raise ConfigError(f"concurrency {self.concurrency} not in 1..64")
        if self.stale_attempt_ms < 0:
            raise ConfigError("stale attempt age must not be negative")
