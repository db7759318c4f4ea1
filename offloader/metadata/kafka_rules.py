"""The decisions the SQLite and PostgreSQL Kafka metadata stores share: one place, both call it.

This module owns what the two ``KafkaMetadataStore`` backends decide alike, apart from the
statements (written once in :mod:`offloader.metadata.kafka`): the checks of a new
segment and of a gap, the topic-id check of a known partition, the segment state machine
(:data:`~offloader.metadata.kafka_base.ALLOWED_TRANSITIONS`), the NotFound/AlreadyExists errors
with their messages, the values a new segment row holds (:data:`SEGMENT_COLUMNS`), the
``list_segments``/``list_partitions``/``list_gaps`` filters (written in the
:class:`~offloader.metadata.rules.Dialect` of :mod:`offloader.metadata.rules`), and the mapping
of rows to records. Pure, like ``rules.py``: no I/O and no database module; the shared store
calls these between its statements, inside the backend's transaction.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from formats.kafka.names import KafkaKeyScheme
from formats.kafka.spans import ObjectChecksums
from offloader.errors import (
    AlreadyExists,
    CorruptDataError,
    InvalidLedgerState,
    MetadataError,
    NotFound,
    OffloadConflict,
)
from offloader.metadata.kafka_base import (
    ALLOWED_TRANSITIONS,
    COPY_FINISHED,
    COPY_STARTED,
    KafkaGap,
    KafkaPartitionRecord,
    KafkaRetention,
    NewRemoteSegment,
    RemoteSegmentRecord,
    RemoteSegmentState,
    SegmentChecks,
)
from offloader.metadata.rules import Dialect, Row, already_exists, need
from offloader.policies import TransformPolicy

#: the columns of a new ``kafka_remote_segments`` row, in the order of :func:`segment_values`
SEGMENT_COLUMNS = (
    "segment_id",
    "topic",
    "partition",
    "topic_id",
    "base_offset",
    "end_offset",
    "max_timestamp",
    "size_bytes",
    "leader_epochs",
    "object_keys",
    "state",
    "started_ms",
    "updated_ms",
    "start_offset",
)
#: the order of ``list_segments`` (KafkaMetadataStore's promise, then a stable tie-break)
SEGMENT_ORDER = " ORDER BY topic, partition, base_offset, started_ms, segment_id"


# --- partitions -----------------------------------------------------------------------------
def check_topic_id(recorded: str, topic: str, partition: int, topic_id: str) -> None:
    """A known partition keeps its topic id: another one means the topic was re-created."""
    if recorded != topic_id:
        raise OffloadConflict(
            f"{topic}-{partition} was recorded with topic id {recorded}, the "
            f"log directory has {topic_id}: the topic was re-created"
        )


def unknown_partition(topic: str, partition: int) -> NotFound:
    """The error for a partition that has no row."""
    return NotFound(f"Kafka partition {topic}-{partition} is not known")


def topic_filter(dialect: Dialect, topic: str | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause ("" for every topic) of ``list_partitions`` and ``list_gaps``."""
    if topic is None:
        return "", ()
    return f" WHERE topic = {dialect.mark}", (topic,)


# --- remote segments ------------------------------------------------------------------------
def check_new_segment(s: NewRemoteSegment) -> None:
    """``start_copy``'s argument check: offsets in order (the effective start within the
    segment), a size that is not negative."""
    if (
        s.end_offset < s.base_offset
        or s.size_bytes < 0
        or not s.base_offset <= s.first_offset <= s.end_offset
    ):
        start = "" if s.start_offset is None else f" (from {s.start_offset})"
        raise InvalidLedgerState(
            f"segment {s.segment_id}: offsets {s.base_offset}..{s.end_offset}{start}, "
            f"size {s.size_bytes}"
        )


def overlap_query(dialect: Dialect) -> str:
    """The live copies (COPY_SEGMENT_STARTED or FINISHED) of a partition that hold an offset of
    ``first..end``; parameters: topic, partition, end, first."""
    m = dialect.mark
    return (
        "SELECT segment_id, state, start_offset, end_offset FROM kafka_remote_segments "
        f"WHERE topic = {m} AND partition = {m} AND state IN ('{COPY_STARTED}', "
        f"'{COPY_FINISHED}') AND start_offset <= {m} AND end_offset >= {m} "
        "ORDER BY start_offset LIMIT 1"
    )


def overlap_args(s: NewRemoteSegment) -> tuple[object, ...]:
    return (s.topic, s.partition, s.end_offset, s.first_offset)


def copy_overlaps(s: NewRemoteSegment, row: Row) -> OffloadConflict:
    """The error for a ``start_copy`` whose offsets another live copy holds."""
    return OffloadConflict(
        f"offsets {s.first_offset}..{s.end_offset} of {s.topic}-{s.partition} already have a "
        f"copy ({row['segment_id']}, {row['state']}, offsets {row['start_offset']}.."
        f"{row['end_offset']}): one copy per offset range"
    )


def segment_exists(segment_id: str) -> AlreadyExists:
    """The error for a ``start_copy`` whose segment id is taken."""
    return already_exists(f"remote segment {segment_id}")


def segment_values(s: NewRemoteSegment, now_ms: int) -> tuple[object, ...]:
    """The new row of ``s`` (COPY_SEGMENT_STARTED), in :data:`SEGMENT_COLUMNS` order."""
    return (
        s.segment_id,
        s.topic,
        s.partition,
        s.topic_id,
        s.base_offset,
        s.end_offset,
        s.max_timestamp,
        s.size_bytes,
        json.dumps({str(k): v for k, v in s.leader_epochs.items()}),
        json.dumps(dict(s.keys), sort_keys=True),
        COPY_STARTED,
        now_ms,
        now_ms,
        s.first_offset,
    )


def need_segment(row: Row | None, segment_id: str) -> RemoteSegmentRecord:
    """The segment's record, or NotFound "remote segment ... does not exist"."""
    return segment_record(need(row, f"remote segment {segment_id}"))


def check_transition(current: RemoteSegmentRecord, target: RemoteSegmentState) -> None:
    """The segment may move from its state to ``target`` (InvalidLedgerState if not)."""
    if target not in ALLOWED_TRANSITIONS[current.state]:
        raise InvalidLedgerState(
            f"remote segment {current.segment_id} is {current.state}; it cannot become {target}"
        )


def segment_filter(
    dialect: Dialect,
    topic: str | None,
    partition: int | None,
    states: Sequence[RemoteSegmentState] | None,
) -> tuple[str, list[object]]:
    """``list_segments``'s WHERE clause ("" for no filter) and its parameters."""
    clauses: list[str] = []
    args: list[object] = []
    if topic is not None:
        clauses.append(f"topic = {dialect.mark}")
        args.append(topic)
    if partition is not None:
        clauses.append(f"partition = {dialect.mark}")
        args.append(partition)
    if states is not None:
        clause, values = dialect.one_of("state", states)
        clauses.append(clause)
        args.extend(values)
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), args


def check_checks_update(current: RemoteSegmentRecord) -> None:
    """``set_segment_checks`` is for a finished segment only."""
    if current.state != COPY_FINISHED:
        raise InvalidLedgerState(
            f"remote segment {current.segment_id} is {current.state}; only a "
            f"{COPY_FINISHED} segment's checks can be replaced"
        )


def checks_json(checks: SegmentChecks | None) -> str | None:
    """The ``checks`` column of a segment (spec/kafka-segments.md §6): JSON with each
    object's :meth:`~formats.kafka.spans.ObjectChecksums.encode` text."""
    if checks is None:
        return None
    doc: dict[str, object] = {
        "v": 1,
        "transform": checks.transform,
        "objects": {k: c.encode() for k, c in sorted(checks.objects.items())},
    }
    if checks.next_chunks is not None:
        doc["next_chunks"] = checks.next_chunks.encode()
    return json.dumps(doc, sort_keys=True)


def checks_of(text: str | None, segment_id: str) -> SegmentChecks | None:
    """The checks of a ``checks`` column (None: a row from before they were recorded);
    decoded once per text (a fetch lists its partition's segments every time: a 1 GiB
    segment's checks are a thousand CRC32Cs)."""
    if text is None:
        return None
    return _decoded_checks(text, segment_id)


@functools.lru_cache(maxsize=1024)
def _decoded_checks(text: str, segment_id: str) -> SegmentChecks:
    try:
        doc = json.loads(text)
        if doc.get("v") != 1:
            raise ValueError(f"version {doc.get('v')!r}")
        nxt = doc.get("next_chunks")
        return SegmentChecks(
            {str(k): ObjectChecksums.decode(v) for k, v in doc["objects"].items()},
            str(doc["transform"]),
            None if nxt is None else ObjectChecksums.decode(nxt),
        )
    except (ValueError, KeyError, TypeError, AttributeError, CorruptDataError) as exc:
        raise MetadataError(f"remote segment {segment_id}: unreadable checks: {exc}") from exc


def _column(row: Row, name: str) -> object:
    """A column that rows of an older schema (or a hand-built row) may lack."""
    try:
        return row[name]
    except (KeyError, IndexError):
        return None


# --- gaps, retention and transform policies -------------------------------------------------
def check_gap(start_offset: int, end_offset: int) -> None:
    """A recorded gap holds at least one offset."""
    if end_offset < start_offset:
        raise InvalidLedgerState(f"gap {start_offset}..{end_offset} is empty")


def retention_values(r: KafkaRetention) -> tuple[str, int, int]:
    """What is stored of a retention (``extra`` is not)."""
    return (r.topic, r.retention_ms, r.retention_bytes)


def transform_values(topic: str, p: TransformPolicy) -> tuple[object, ...]:
    """The ``kafka_topic_transforms`` row of a topic's policy."""
    return (topic, p.compression, p.level, p.encryption, p.key_id)


# --- rows to records ------------------------------------------------------------------------
def segment_record(row: Row) -> RemoteSegmentRecord:
    return RemoteSegmentRecord(
        segment_id=row["segment_id"],
        topic=row["topic"],
        topic_id=row["topic_id"],
        partition=row["partition"],
        base_offset=row["base_offset"],
        end_offset=row["end_offset"],
        max_timestamp=row["max_timestamp"],
        size_bytes=row["size_bytes"],
        leader_epochs={int(k): int(v) for k, v in json.loads(row["leader_epochs"]).items()},
        keys=dict(json.loads(row["object_keys"])),
        state=row["state"],
        started_ms=row["started_ms"],
        updated_ms=row["updated_ms"],
        log_crc32c=row["log_crc32c"],
        error=row["error"],
        start_offset=row["start_offset"],
        checks=checks_of(_column(row, "checks"), row["segment_id"]),  # type: ignore[arg-type]
    )


def partition_record(row: Row) -> KafkaPartitionRecord:
    return KafkaPartitionRecord(
        row["topic"],
        row["partition"],
        row["topic_id"],
        row["watermark"],
        row["updated_ms"],
        row["last_error"],
    )


def gap_record(row: Row) -> KafkaGap:
    return KafkaGap(
        row["topic"],
        row["partition"],
        row["start_offset"],
        row["end_offset"],
        row["recorded_ms"],
        row["reason"],
    )


def retention_record(topic: str, row: Row | None) -> KafkaRetention:
    """The topic's retention; keep forever (-1, -1) when it has no row."""
    if row is None:
        return KafkaRetention(topic)
    return KafkaRetention(topic, row["retention_ms"], row["retention_bytes"])


def key_scheme_values(k: KafkaKeyScheme) -> tuple[object, ...]:
    """The one ``kafka_key_scheme`` row of a tier."""
    return (1, k.prefix, k.hash_prefix_len, k.cluster, k.entropy_bits)


def key_scheme(row: Row | None) -> KafkaKeyScheme | None:
    """The tier's persisted key scheme, None before the first upload."""
    if row is None:
        return None
    return KafkaKeyScheme(
        row["prefix"], row["hash_prefix_len"], row["cluster"], row["entropy_bits"]
    )


def transform_policy(row: Row | None) -> TransformPolicy | None:
    """The topic's stored transform policy, None when it has no row."""
    if row is None:
        return None
    return TransformPolicy(row["compression"], row["level"], row["encryption"], row["key_id"])
