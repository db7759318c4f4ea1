"""Names in a Kafka log directory, its small text files, and our remote object keys.

* Segment files: ``<20-digit base offset>.<kind>`` (``log``, ``index``, ``timeindex``,
  ``txnindex``, ``snapshot``), with a ``.deleted`` suffix once Kafka has staged them for deletion.
* Partition directories: ``<topic>-<partition>`` (the partition after the last ``-``).
* ``leader-epoch-checkpoint``: ``version\\ncount\\n(epoch startOffset\\n)*`` (version 0).
* ``partition.metadata``: ``version: 0\\ntopic_id: <base64url uuid>``.
* Remote keys (KIP-405 style): ``[<hash>/]<prefix>/<topic>-<topicId>/<partition>/<20-digit base
  offset>-<segment uuid>.<suffix>``, the optional hash prefix spreading the key space; or
  Pinterest's form ``<prefix>/<entropy bits>/<cluster>/<topic>-<topicId>/...`` (the same tail).
  A tier's :class:`KafkaKeyScheme` says which (spec/kafka-segments.md, "Names").
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Final

from formats.errors import quoted_name
from formats.kafka.errors import KafkaFormatError, KafkaNameError

SEGMENT_KINDS: Final = ("log", "index", "timeindex", "txnindex", "snapshot")
DELETED_SUFFIX: Final = ".deleted"
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
PARTITION_METADATA: Final = "partition.metadata"
_SEGMENT_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)(\.deleted)?$")
_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_CLUSTER_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
#: the widest hash prefix (hex digits of MD5) and Pinterest-style entropy (bits)
MAX_HASH_PREFIX = 32
MAX_ENTROPY_BITS = 32
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d{1,10})$")
_REMOTE_RE = re.compile(
    r"^(?:[0-9a-f]+/)?(?:.+/)?(.+)-([A-Za-z0-9_-]{22})/(\d+)/(\d{20})-([A-Za-z0-9_-]{22})\.([a-z-]+)$"
)


@dataclass(frozen=True)
class SegmentFileName:
    base_offset: int
    kind: str
    deleted: bool = False

    @property
    def name(self) -> str:
        return segment_file_name(self.base_offset, self.kind, deleted=self.deleted)


def segment_file_name(base_offset: int, kind: str, *, deleted: bool = False) -> str:
    if kind not in SEGMENT_KINDS:
        raise KafkaNameError(f"unknown segment file kind {kind!r}")
    if not 0 <= base_offset < 10**20:
        raise KafkaNameError(f"base offset {base_offset} does not fit a segment name")
    return f"{base_offset:020d}.{kind}" + (DELETED_SUFFIX if deleted else "")


def parse_segment_file_name(name: str) -> SegmentFileName:
    match = _SEGMENT_RE.match(name)
    if match is None:
        raise KafkaNameError(f"{name!r} is not a Kafka segment file name")
    return SegmentFileName(int(match.group(1)), match.group(2), match.group(3) is not None)


#: the largest partition number (Kafka's partitions are a Java int)
MAX_PARTITION: Final = 2**31 - 1


def check_topic(topic: str) -> str:
    """``topic`` when it is a legal Kafka topic name (1 to 249 of ``a-z A-Z 0-9 . _ -``, not
    ``.`` or ``..``), else :class:`KafkaNameError`."""
    if not _TOPIC_RE.match(topic) or topic in (".", ".."):
        raise KafkaNameError(
            f"{quoted_name(topic)} is not a legal Kafka topic name (1 to 249 of the "
            "characters a-z, A-Z, 0-9, '.', '_' and '-'; not '.' or '..')"
        )
    return topic


def check_partition(partition: int) -> int:
    """``partition`` when it is a Kafka partition number (0..2147483647), else
    :class:`KafkaNameError`."""
    if not 0 <= partition <= MAX_PARTITION:
        raise KafkaNameError(
            f"partition {partition} is out of range: it must be 0..{MAX_PARTITION}"
        )
    return partition


def parse_partition_dir(name: str) -> tuple[str, int]:
    """``(topic, partition)`` of a ``<topic>-<partition>`` directory name."""
    match = _PARTITION_DIR_RE.match(name)
    if match is None:
        raise KafkaNameError(f"{name!r} is not a <topic>-<partition> directory")
    topic, partition = match.group(1), int(match.group(2))
    if partition > MAX_PARTITION:
        raise KafkaNameError(f"partition {partition} is out of range in {name!r}")
    return check_topic(topic), partition


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{check_topic(topic)}-{partition}"


def parse_leader_epoch_checkpoint(
    text: bytes, *, source: str | None = None
) -> tuple[tuple[int, int], ...]:
    """``(epoch, start offset)`` pairs of a ``leader-epoch-checkpoint`` file."""
    try:
        lines = text.decode("utf-8").splitlines()
        if not lines or int(lines[0]) != 0:
            raise KafkaFormatError("leader epoch checkpoint is not version 0", source=source)
        count = int(lines[1])
        pairs = []
        for line in lines[2 : 2 + count]:
            epoch, start = line.split()
            pairs.append((int(epoch), int(start)))
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise KafkaFormatError(f"malformed leader epoch checkpoint: {exc}", source=source) from exc
    if len(pairs) != count:
        raise KafkaFormatError(
            f"leader epoch checkpoint announces {count} entries, holds {len(pairs)}", source=source
        )
    return tuple(pairs)


def encode_leader_epoch_checkpoint(pairs: tuple[tuple[int, int], ...]) -> bytes:
    lines = ["0", str(len(pairs)), *(f"{e} {o}" for e, o in pairs)]
    return ("\n".join(lines) + "\n").encode()


def segment_leader_epochs(
    pairs: tuple[tuple[int, int], ...], start_offset: int, end_offset: int
) -> dict[int, int]:
    """KIP-405's ``segmentLeaderEpochs``: each epoch that leads some offset of
    ``start_offset..end_offset`` mapped to its first offset within the segment."""
    found: dict[int, int] = {}
    ordered = sorted(pairs, key=lambda p: p[1])
    for i, (epoch, start) in enumerate(ordered):
        nxt = ordered[i + 1][1] if i + 1 < len(ordered) else None
        if start > end_offset or (nxt is not None and nxt <= start_offset):
            continue
        found[epoch] = max(start, start_offset)
    return found


def parse_partition_metadata(text: bytes, *, source: str | None = None) -> str:
    """The topic id (Kafka's base64url uuid string) of a ``partition.metadata`` file."""
    fields: dict[str, str] = {}
    try:
        for line in text.decode("utf-8").splitlines():
            if line.strip():
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
    except UnicodeDecodeError as exc:
        raise KafkaFormatError("partition.metadata is not UTF-8", source=source) from exc
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise KafkaFormatError("partition.metadata lacks version 0 or topic_id", source=source)
    topic_id = fields["topic_id"]
    kafka_uuid_to_uuid(topic_id, source=source)
    return topic_id


def encode_partition_metadata(topic_id: str) -> bytes:
    return f"version: 0\ntopic_id: {topic_id}\n".encode()


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def kafka_uuid_to_uuid(text: str, *, source: str | None = None) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError as exc:
        raise KafkaFormatError(f"{text!r} is not a Kafka uuid", source=source) from exc
    if len(raw) != 16 or len(text) != 22:
        raise KafkaFormatError(f"{text!r} is not a Kafka uuid", source=source)
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class KafkaKeyScheme:
    """How a Kafka tier names its objects; one per tier, persisted by its first upload.

    * ``cluster`` None (the KIP-405 form): ``[<hash>/]<prefix>/<tail>``, ``<hash>`` the first
      ``hash_prefix_len`` hex digits of MD5(``<topic>-<topicId>/<partition>``);
    * ``cluster`` set (Pinterest's form): ``<prefix>/[<entropy>/]<cluster>/<tail>``,
      ``<entropy>`` the first ``entropy_bits`` bits of MD5(``<cluster>/<topic>-<partition>``)
      written as that many ``0``/``1`` digits.

    ``<tail>`` is ``<topic>-<topicId>/<partition>/<20-digit base offset>-<segment uuid>.<suffix>``
    in both forms.
    """

    prefix: str = "kafka"
    hash_prefix_len: int = 0
    cluster: str | None = None
    entropy_bits: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", self.prefix.strip("/"))
        if not 0 <= self.hash_prefix_len <= MAX_HASH_PREFIX:
            raise KafkaNameError(
                f"hash prefix length {self.hash_prefix_len} not in 0..{MAX_HASH_PREFIX}"
            )
        if not 0 <= self.entropy_bits <= MAX_ENTROPY_BITS:
            raise KafkaNameError(f"entropy bits {self.entropy_bits} not in 0..{MAX_ENTROPY_BITS}")
        if self.cluster is None:
            if self.entropy_bits:
                raise KafkaNameError("entropy bits need a cluster name (Pinterest's key form)")
        else:
            if not _CLUSTER_RE.match(self.cluster) or self.cluster in (".", ".."):
                raise KafkaNameError(f"{self.cluster!r} is not a usable cluster name")
            if self.hash_prefix_len:
                raise KafkaNameError(
                    "a hash prefix and a cluster name do not mix: Pinterest's form spreads keys "
                    "with entropy bits after the prefix"
                )

    def describe(self) -> str:
        """One line for messages: the form and its settings."""
        if self.cluster is None:
            return f"prefix {self.prefix!r}, hash prefix {self.hash_prefix_len}"
        return f"prefix {self.prefix!r}, cluster {self.cluster!r}, entropy bits {self.entropy_bits}"


def entropy_digits(cluster: str, topic: str, partition: int, bits: int) -> str:
    """Pinterest's salt: the first ``bits`` bits of MD5(``<cluster>/<topic>-<partition>``),
    as ``0``/``1`` digits."""
    if bits <= 0:
        return ""
    digest = hashlib.md5(f"{cluster}/{topic}-{partition}".encode()).digest()
    value = int.from_bytes(digest, "big") >> (128 - bits)
    return format(value, f"0{bits}b")


def remote_key(
    prefix: str,
    topic: str,
    topic_id: str,
    partition: int,
    base_offset: int,
    segment_id: str,
    suffix: str,
    *,
    hash_prefix_len: int = 0,
    cluster: str | None = None,
    entropy_bits: int = 0,
) -> str:
    """The object key of one file of one remote segment (see the module docstring and
    :class:`KafkaKeyScheme`)."""
    check_topic(topic)
    kafka_uuid_to_uuid(topic_id)
    kafka_uuid_to_uuid(segment_id)
    tail = f"{topic}-{topic_id}/{partition}/{base_offset:020d}-{segment_id}.{suffix}"
    parts = [prefix.strip("/")] if prefix.strip("/") else []
    if cluster is not None:
        entropy = entropy_digits(cluster, topic, partition, entropy_bits)
        parts += ([entropy] if entropy else []) + [cluster]
    key = "/".join([*parts, tail])
    if hash_prefix_len and cluster is None:
        digest = hashlib.md5(f"{topic}-{topic_id}/{partition}".encode()).hexdigest()
        key = f"{digest[:hash_prefix_len]}/{key}"
    return key


def scheme_key(
    scheme: KafkaKeyScheme,
    topic: str,
    topic_id: str,
    partition: int,
    base_offset: int,
    segment_id: str,
    suffix: str,
) -> str:
    """:func:`remote_key` in ``scheme``."""
    return remote_key(
        scheme.prefix,
        topic,
        topic_id,
        partition,
        base_offset,
        segment_id,
        suffix,
        hash_prefix_len=scheme.hash_prefix_len,
        cluster=scheme.cluster,
        entropy_bits=scheme.entropy_bits,
    )


@dataclass(frozen=True)
class RemoteKey:
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    suffix: str


def parse_remote_key(key: str) -> RemoteKey:
    match = _REMOTE_RE.match(key)
    if match is None:
        raise KafkaNameError(f"{key!r} is not a remote Kafka segment key")
    topic, topic_id, partition, base, segment_id, suffix = match.groups()
    return RemoteKey(
        topic.rsplit("/", 1)[-1], topic_id, int(partition), int(base), segment_id, suffix
    )


def is_remote_key(key: str) -> bool:
    """True when ``key`` is a remote Kafka segment key (:func:`remote_key`'s shape)."""
    return _REMOTE_RE.match(key) is not None
