"""Kafka segment manifests: the completion marker of a copied segment and the partition
watermark's name (spec/kafka-manifests.md). Pure: values in, keys and small bodies out, and back.

A **segment marker** ``_offloader/v1/kafka/segments/<topic>/<partition>/<base:020d>.<segmentId>.
<fields>`` is written last, after every object of the copy is complete: its key alone carries
the record a rebuild needs (topic id, start and end offsets, max timestamp, ``.log`` size and
CRC32C, transform, the kinds of objects uploaded, when it finished, the leader epochs), so a
rebuild can list the markers without a GET or HEAD per segment. Its small JSON body repeats
every field, with the object keys and the transform's full description, and (from body
``version`` 2) what the key has no room for: each object's span CRC32Cs (``checks``, the
:meth:`formats.kafka.spans.ObjectChecksums.encode` texts) and when the copy started
(``started_ms``), so that a rebuild that reads the body recreates the record exactly. Older
bodies, without them, still decode (both empty).

A segment's leader epochs are in the key while it stays within :data:`MAX_KEY_BYTES`; a segment
with so many epochs that it would not has ``q~`` instead, and a rebuild GETs that one body.

The partition's **watermark** is a :mod:`formats.manifest` watermark of kind
:data:`KAFKA_KIND`, named ``<topic>-<topicId>/<partition>`` (:func:`watermark_name`): the
highest end offset of the partition's finished copies, tagged with the segment's UUID.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from formats.errors import FormatError, InvalidKeyError
from formats.kafka.errors import KafkaNameError
from formats.kafka.names import (
    KafkaKeyScheme,
    check_topic,
    entropy_digits,
    kafka_uuid_to_uuid,
    scheme_key,
)
from formats.manifest import MANIFEST_ROOT, MAX_KEY_BYTES, MAX_POSITION

__all__ = [
    "BODY_VERSION",
    "KAFKA_KIND",
    "KAFKA_MARKERS",
    "KINDS",
    "TRANSFORMS",
    "SegmentMarker",
    "decode_segment_marker_body",
    "encode_segment_marker_body",
    "infer_key_scheme",
    "parse_segment_marker_key",
    "parse_watermark_name",
    "segment_marker_key",
    "segment_marker_prefix",
    "transform_token",
    "watermark_name",
]

#: every Kafka segment marker's key starts with this
KAFKA_MARKERS = MANIFEST_ROOT + "kafka/segments/"
#: the watermark kind of a Kafka partition: its highest finished offset
KAFKA_KIND = "kafka-partitions"
#: the marker's transform field (how the ``.log`` is stored, spec/transforms.md §8)
TRANSFORMS = ("none", "zstd", "aes", "zstdaes")
#: the object kinds of a copy, each with its one-letter code in the marker's ``k`` field
KINDS: Mapping[str, str] = {
    "log": "l",
    "chunks": "c",
    "index": "i",
    "timeindex": "t",
    "snapshot": "s",
    "txnindex": "x",
    "leader-epoch-checkpoint": "e",
}
_LETTERS = {letter: kind for kind, letter in KINDS.items()}
_ID = r"[A-Za-z0-9_-]{22}"
_U64 = r"(?:0|[1-9][0-9]{0,19})"
_FIELDS = re.compile(
    rf"^(?P<base>[0-9]{{20}})\.(?P<segment>{_ID})\.i(?P<topic_id>{_ID})"
    rf"\.s(?P<start>{_U64})\.e(?P<end>{_U64})\.m(?P<max_ts>-1|{_U64})"
    rf"\.z(?P<size>{_U64})\.c(?P<crc>[0-9a-f]{{8}})\.t(?P<transform>[a-z]+)"
    rf"\.k(?P<kinds>[a-z]{{1,7}})\.o(?P<finished>{_U64})"
    rf"\.q(?P<epochs>~|(?:{_U64}-{_U64}(?:_{_U64}-{_U64})*)?)$"
)
_HASHED_EPOCHS = "~"
#: the longest last key segment a marker gets: a file store's file name (NAME_MAX, 255 bytes)
MAX_NAME_BYTES = 255
#: the body's ``version``: 2 adds ``checks`` and ``started_ms`` (a body without ``version`` is
#: version 1); ``format`` stays 1, so a version-1 reader still decodes a version-2 body
BODY_VERSION = 2


def transform_token(describe: str) -> str:
    """The marker's ``t`` field for a pinned transform (``none``, ``zstd``, ``aes-256-gcm``,
    ``zstd+aes-256-gcm``: the chunk table's description)."""
    zstd, aes = "zstd" in describe, "aes" in describe
    if aes:
        return "zstdaes" if zstd else "aes"
    return "zstd" if zstd else "none"


@dataclass(frozen=True)
class SegmentMarker:
    """A finished copy of one Kafka segment, as its completion marker records it."""

    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    #: the first offset this copy answers for (``base_offset`` unless it straddled the
    #: partition's watermark)
    start_offset: int
    end_offset: int
    max_timestamp: int
    #: the ``.log``'s size as Kafka wrote it
    log_size: int
    log_crc32c: int
    transform: str
    kinds: tuple[str, ...]
    finished_ms: int
    #: leader epoch -> its first offset in this segment
    leader_epochs: Mapping[int, int] = field(default_factory=dict)
    #: the full transform description (``zstd+aes-256-gcm``; the body only)
    transform_detail: str = ""
    #: object key by kind (the body only: a rebuild takes them from the listing)
    keys: Mapping[str, str] = field(default_factory=dict)
    #: each uploaded object's span CRC32Cs by kind, as ObjectChecksums.encode() text (the
    #: body only, from version 2; empty in an older body or one parsed from a key)
    checks: Mapping[str, str] = field(default_factory=dict)
    #: when the copy started (the body only, from version 2; None: not recorded)
    started_ms: int | None = None
    #: the ``.chunks`` checksums a re-key is writing (ObjectChecksums text), accepted beside
    #: ``checks["chunks"]`` until it is done (the body only, version 2; None: no re-key)
    next_chunks: str | None = None

    def __post_init__(self) -> None:
        try:
            check_topic(self.topic)
            kafka_uuid_to_uuid(self.topic_id)
            kafka_uuid_to_uuid(self.segment_id)
        except KafkaNameError as exc:
            raise InvalidKeyError(f"segment marker: {exc}") from exc
        for name in (
            "partition",
            "base_offset",
            "start_offset",
            "end_offset",
            "log_size",
            "finished_ms",
        ):
            _check_int(name, getattr(self, name), 0)
        _check_int("max_timestamp", self.max_timestamp, -1)
        if self.partition > 2**31 - 1:
            raise InvalidKeyError(f"partition {self.partition} is out of range")
        if not self.base_offset <= self.start_offset <= self.end_offset:
            raise InvalidKeyError(
                f"offsets out of order: base {self.base_offset}, start {self.start_offset}, "
                f"end {self.end_offset}"
            )
        if not 0 <= self.log_crc32c <= 0xFFFFFFFF:
            raise InvalidKeyError(f".log CRC32C {self.log_crc32c} is not a 32-bit value")
        if self.transform not in TRANSFORMS:
            raise InvalidKeyError(f"transform {self.transform!r} is not one of {TRANSFORMS}")
        if "log" not in self.kinds or any(k not in KINDS for k in self.kinds):
            raise InvalidKeyError(f"object kinds {self.kinds} need 'log' and known kinds only")
        object.__setattr__(self, "kinds", tuple(k for k in KINDS if k in self.kinds))
        for epoch, offset in self.leader_epochs.items():
            _check_int("leader epoch", epoch, 0)
            _check_int("leader epoch offset", offset, 0)
        if self.started_ms is not None:
            _check_int("started_ms", self.started_ms, 0)
        for kind, text in self.checks.items():
            if kind not in KINDS or not isinstance(text, str):
                raise InvalidKeyError(f"segment marker checks of {kind!r} are not a known kind's")
        if self.next_chunks is not None and not isinstance(self.next_chunks, str):
            raise InvalidKeyError("segment marker next_chunks is not a checksums text")

    @property
    def segment_uuid(self) -> str:
        """The segment id as a lower-case UUID (the watermark's tag)."""
        return str(kafka_uuid_to_uuid(self.segment_id))


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidKeyError(f"segment marker field {name} must be an int, not {value!r}")
    if not low <= value <= MAX_POSITION:
        raise InvalidKeyError(f"segment marker field {name} = {value} is out of range")


def segment_marker_prefix(
    topic: str, partition: int | None = None, base_offset: int | None = None
) -> str:
    """The prefix of a topic's markers (of one partition, of one base offset)."""
    prefix = f"{KAFKA_MARKERS}{topic}/"
    if partition is None:
        return prefix
    prefix += f"{partition}/"
    return prefix if base_offset is None else prefix + f"{base_offset:020d}."


def _kinds_code(kinds: tuple[str, ...]) -> str:
    return "".join(KINDS[k] for k in KINDS if k in kinds)


def segment_marker_key(marker: SegmentMarker) -> str:
    """The marker's key (every field of the record in it; the epochs hashed to ``~`` when
    they would make it longer than :data:`MAX_KEY_BYTES`, or its last segment, the file
    name on a file store, longer than :data:`MAX_NAME_BYTES`)."""
    m = marker
    epochs = "_".join(f"{e}-{o}" for e, o in sorted(m.leader_epochs.items()))
    key = (
        f"{segment_marker_prefix(m.topic, m.partition)}{m.base_offset:020d}.{m.segment_id}"
        f".i{m.topic_id}.s{m.start_offset}.e{m.end_offset}.m{m.max_timestamp}"
        f".z{m.log_size}.c{m.log_crc32c:08x}.t{m.transform}.k{_kinds_code(m.kinds)}"
        f".o{m.finished_ms}.q"
    )
    name = len(key) - key.rindex("/") - 1
    if len(key) + len(epochs) > MAX_KEY_BYTES or name + len(epochs) > MAX_NAME_BYTES:
        return key + _HASHED_EPOCHS
    return key + epochs


@dataclass(frozen=True)
class MarkerKey:
    """A parsed marker key; ``marker`` is None when its epochs are hashed (``~``): the caller
    reads that marker's body."""

    key: str
    topic: str
    partition: int
    base_offset: int
    segment_id: str
    marker: SegmentMarker | None


def parse_segment_marker_key(key: str) -> MarkerKey:
    """The inverse of :func:`segment_marker_key` (raises InvalidKeyError)."""
    if not key.startswith(KAFKA_MARKERS):
        raise InvalidKeyError(f"{key!r} is not a Kafka segment marker key")
    parts = key[len(KAFKA_MARKERS) :].split("/")
    match = _FIELDS.match(parts[2]) if len(parts) == 3 else None
    if match is None or not re.fullmatch(r"0|[1-9][0-9]{0,9}", parts[1]):
        raise InvalidKeyError(
            f"{key!r} is not a Kafka segment marker key (spec/kafka-manifests.md)"
        )
    topic, partition = parts[0], int(parts[1])
    base, segment = int(match["base"]), match["segment"]
    marker = None
    if match["epochs"] != _HASHED_EPOCHS:
        epochs: dict[int, int] = {}
        for pair in filter(None, match["epochs"].split("_")):
            epoch, offset = pair.split("-")
            epochs[int(epoch)] = int(offset)
        marker = SegmentMarker(
            topic=topic,
            topic_id=match["topic_id"],
            partition=partition,
            base_offset=base,
            segment_id=segment,
            start_offset=int(match["start"]),
            end_offset=int(match["end"]),
            max_timestamp=int(match["max_ts"]),
            log_size=int(match["size"]),
            log_crc32c=int(match["crc"], 16),
            transform=match["transform"],
            kinds=tuple(_LETTERS[c] for c in match["kinds"] if c in _LETTERS),
            finished_ms=int(match["finished"]),
            leader_epochs=epochs,
        )
        if segment_marker_key(marker) != key:
            raise InvalidKeyError(f"{key!r} is not in canonical form")
    return MarkerKey(key, topic, partition, base, segment, marker)


def _json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def encode_segment_marker_body(marker: SegmentMarker) -> bytes:
    """The marker's body: its fields, the object keys, the transform's description, and
    (``version`` 2) the objects' span checksums and the copy's start time."""
    m = marker
    extra: dict[str, Any] = {"version": BODY_VERSION, "checks": dict(sorted(m.checks.items()))}
    if m.started_ms is not None:
        extra["started_ms"] = m.started_ms
    if m.next_chunks is not None:
        extra["next_chunks"] = m.next_chunks
    return _json(
        {
            **extra,
            "format": 1,
            "kind": "kafka-segment-marker",
            "topic": m.topic,
            "topic_id": m.topic_id,
            "partition": m.partition,
            "base_offset": m.base_offset,
            "segment_id": m.segment_id,
            "start_offset": m.start_offset,
            "end_offset": m.end_offset,
            "max_timestamp": m.max_timestamp,
            "log_size": m.log_size,
            "log_crc32c": m.log_crc32c,
            "transform": m.transform,
            "transform_detail": m.transform_detail,
            "kinds": list(m.kinds),
            "finished_ms": m.finished_ms,
            "leader_epochs": [[e, o] for e, o in sorted(m.leader_epochs.items())],
            "keys": dict(sorted(m.keys.items())),
        }
    )


def decode_segment_marker_body(body: bytes) -> SegmentMarker:
    """The inverse of :func:`encode_segment_marker_body` (FormatError / InvalidKeyError)."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"Kafka segment marker body is not JSON: {exc}") from exc
    if not isinstance(value, dict) or value.get("format") != 1:
        raise FormatError("Kafka segment marker body is not format 1")
    if value.get("kind") != "kafka-segment-marker":
        raise FormatError("the body is not a Kafka segment marker")
    try:
        epochs = {int(e): int(o) for e, o in value["leader_epochs"]}
        return SegmentMarker(
            topic=value["topic"],
            topic_id=value["topic_id"],
            partition=value["partition"],
            base_offset=value["base_offset"],
            segment_id=value["segment_id"],
            start_offset=value["start_offset"],
            end_offset=value["end_offset"],
            max_timestamp=value["max_timestamp"],
            log_size=value["log_size"],
            log_crc32c=value["log_crc32c"],
            transform=value["transform"],
            kinds=tuple(value["kinds"]),
            finished_ms=value["finished_ms"],
            leader_epochs=epochs,
            transform_detail=value.get("transform_detail", ""),
            keys=dict(value.get("keys", {})),
            checks=dict(value.get("checks", {})),  # version 1 bodies have none
            started_ms=value.get("started_ms"),
            next_chunks=value.get("next_chunks"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FormatError(f"Kafka segment marker body lacks a field: {exc}") from exc


def watermark_name(topic: str, topic_id: str, partition: int) -> str:
    """The name of a partition's watermark (``<topic>-<topicId>/<partition>``: a re-created
    topic, with a new id, starts a new watermark)."""
    return f"{topic}-{topic_id}/{partition}"


def parse_watermark_name(name: str) -> tuple[str, str, int]:
    """``(topic, topic_id, partition)`` of :func:`watermark_name`'s value."""
    match = re.fullmatch(rf"(.+)-({_ID})/(0|[1-9][0-9]{{0,9}})", name)
    if match is None:
        raise InvalidKeyError(f"{name!r} is not a Kafka partition watermark name")
    return match[1], match[2], int(match[3])


def infer_key_scheme(
    key: str, topic: str, topic_id: str, partition: int, base_offset: int, segment_id: str
) -> KafkaKeyScheme | None:
    """The key scheme that names ``key`` the ``.log`` of that segment, None when no
    :class:`KafkaKeyScheme` does. Where two schemes give the same key for every segment
    (prefix ``a/c`` or prefix ``a`` and cluster ``c`` without entropy), the KIP-405 form; a
    hash prefix or entropy digits are taken only when they are the ones the segment hashes to."""
    tail = f"{topic}-{topic_id}/{partition}/{base_offset:020d}-{segment_id}.log"
    if not key.endswith(tail):
        return None
    head = [p for p in key[: -len(tail)].split("/") if p]
    candidates: list[KafkaKeyScheme] = []
    try:
        if head and re.fullmatch(r"[0-9a-f]{1,32}", head[0]):
            candidates.append(
                KafkaKeyScheme(prefix="/".join(head[1:]), hash_prefix_len=len(head[0]))
            )
        candidates.append(KafkaKeyScheme(prefix="/".join(head)))
        if len(head) >= 2 and re.fullmatch(r"[01]{1,32}", head[-2]):
            bits = head[-2]
            if entropy_digits(head[-1], topic, partition, len(bits)) == bits:
                candidates.insert(
                    0,
                    KafkaKeyScheme(
                        prefix="/".join(head[:-2]), cluster=head[-1], entropy_bits=len(bits)
                    ),
                )
    except KafkaNameError:
        pass
    for scheme in candidates:
        try:
            if (
                scheme_key(scheme, topic, topic_id, partition, base_offset, segment_id, "log")
                == key
            ):
                return scheme
        except KafkaNameError:
            continue
    return None
