"""Rebuilding Kafka remote segment records from the bucket (spec/kafka-manifests.md §4).

From the listing alone (:func:`formats.kafka.discover.discover_kafka`, shared with the Spark
source's ``discover``): every completion marker whose objects are all listed is a finished
copy; a segment id with objects (or an open multipart upload) and no marker is an unfinished
attempt; each partition's watermark objects give its highest finished offset. A marker whose
objects are missing, or whose plain ``.log`` is listed with another size, is a ``problem``.

Two finished copies of overlapping offsets (two uploaders, a re-upload after a lost
``finish_copy``): the lower start offset is kept, then the copy the bucket watermark names,
then the lower segment id; the other is reported ``superseded`` and not recorded, so the
orphan audit lists its objects (``kafka-superseded-copy``: gc with ``--min-age`` deletes them)
beside the unfinished attempts (reported ``orphan``; superseded too when a recorded copy holds
their base offset).

Records are written through the :class:`~offloader.metadata.kafka_base.KafkaMetadataStore`
Protocol: per partition ``ensure_partition`` (at the bucket watermark), then per kept copy
``start_copy`` → ``finish_copy`` (COPY_SEGMENT_FINISHED, the watermark raised in the same
transaction; never lowered). Each copy recorded has its marker's body read (one small GET,
on apply only): from body version 2 it holds the objects' span CRC32Cs and the copy's start
time, and the record is recreated exactly as the uploader wrote it (checks, start and finish
times, max timestamp, ``.log`` CRC32C). A version-1 body (or one that cannot be read) gives
the key's fields and ``checks`` None (reads then verify Kafka's batch CRC32Cs and offsets).
The tier's key scheme is claimed from the first kept copy's ``.log`` key when the store has
none, so that a resumed upload names its objects alike.

The marker bodies (those the records need on apply, and those of markers whose key cannot
carry the marker, on plan) are read through a :class:`~offloader.rebuild.base.BodyReader`:
``body_concurrency`` GETs in flight, a bounded window ahead of the copy being recorded, so
that the GETs overlap each other and the metadata writes; records are still written one
partition and one copy at a time in the plan's order, and a GET's error is the same typed
error, met where the serial read met it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from formats.errors import FormatError
from formats.kafka.discover import (
    FoundSegment,
    KafkaDiscovery,
    PartitionFound,
    UnfinishedAttempt,
    discover_kafka,
)
from formats.kafka.manifest import (
    KAFKA_MARKERS,
    SegmentMarker,
    decode_segment_marker_body,
    infer_key_scheme,
    parse_segment_marker_key,
)
from formats.kafka.spans import ObjectChecksums
from offloader.errors import NotFound, OffloadConflict, OffloaderError
from offloader.logs import get_logger
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    PLAIN_TRANSFORM,
    KafkaMetadataStore,
    NewRemoteSegment,
    SegmentChecks,
)
from offloader.rebuild.base import (
    BODY_CONCURRENCY,
    BodyReader,
    RebuildItem,
    StoreListing,
    TopicSelector,
    watermark_item,
)
from offloader.runtime import Runtime

__all__ = ["KIND", "KafkaSegments"]

log = get_logger(__name__)

KIND = "kafka-segments"


@dataclass
class Plan:
    found: KafkaDiscovery
    problems: list[RebuildItem] = field(default_factory=list)


def _segment_item(action: str, seg: FoundSegment, detail: str = "") -> RebuildItem:
    m = seg.marker
    return RebuildItem(
        KIND,
        action,  # type: ignore[arg-type]
        m.topic,
        None,
        m.segment_id,
        detail,
        {
            "partition": m.partition,
            "base_offset": m.base_offset,
            "start_offset": m.start_offset,
            "end_offset": m.end_offset,
            "log_size": m.log_size,
            "transform": m.transform,
            "finished_ms": m.finished_ms,
        },
    )


def _attempt_item(a: UnfinishedAttempt) -> RebuildItem:
    return RebuildItem(
        KIND,
        "orphan",
        a.topic,
        None,
        a.segment_id,
        "no completion marker: an unfinished attempt (objects orphans)",
        {
            "partition": a.partition,
            "base_offset": a.base_offset,
            "keys": ",".join(a.keys),
            "multipart_upload": "yes" if a.upload else "no",
        },
    )


def _watermark_item(pf: PartitionFound) -> RebuildItem:
    highest = max((s.marker.end_offset for s in pf.kept), default=None)
    return watermark_item(KIND, pf.topic, highest, pf.watermark, fields={"partition": pf.partition})


class KafkaSegments:
    """The :class:`~offloader.rebuild.base.Rebuilder` of Kafka remote segments."""

    kind = KIND
    #: marker-body GETs in flight (1: one after another; the benchmark's "before")
    body_concurrency = BODY_CONCURRENCY

    def __init__(self, meta: KafkaMetadataStore) -> None:
        self.meta = meta

    def existing_records(self, rt: Runtime) -> int:
        return len(self.meta.list_partitions())

    def plan(self, rt: Runtime, listing: StoreListing, select: TopicSelector) -> Plan:
        with BodyReader(
            rt.store, _bodies_needed(listing, select), concurrency=self.body_concurrency
        ) as bodies:
            found = discover_kafka(
                ((o.key, o.size) for o in listing.objects),
                (u.key for u in listing.uploads),
                bodies.read,
                select,
            )
        problems = [
            RebuildItem(KIND, "problem", None, detail=f"{key}: {message}")
            for key, message in found.problems
        ]
        return Plan(found, problems)

    def items(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        out = list(plan.problems)
        for pf in plan.found.partitions.values():
            for seg in pf.kept:
                action = "offload"
                if merge:
                    try:
                        record = self.meta.get_segment(seg.marker.segment_id)
                        action = "present" if record.state == COPY_FINISHED else "conflict"
                    except NotFound:
                        pass
                out.append(_segment_item(action, seg))
            out.extend(self._superseded(pf))
            out.append(_watermark_item(pf))
        out.extend(_attempt_item(a) for a in plan.found.unfinished)
        return out

    @staticmethod
    def _superseded(pf: PartitionFound) -> list[RebuildItem]:
        return [
            _segment_item(
                "superseded",
                seg,
                f"a second finished copy of offsets up to {kept.marker.end_offset}; kept "
                f"{kept.marker.segment_id} (objects orphans)",
            )
            for seg, kept in pf.superseded
        ]

    def apply(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        out = list(plan.problems)
        self._claim_scheme(plan.found)
        wanted = [
            seg.marker_key
            for pf in plan.found.partitions.values()
            for seg in pf.kept
            if _needs_body(seg) and not self._recorded(seg.marker.segment_id)
        ]
        with BodyReader(rt.store, wanted, concurrency=self.body_concurrency) as bodies:
            for pf in plan.found.partitions.values():
                out.extend(self._apply_partition(rt, pf, bodies))
                out.extend(self._superseded(pf))
                out.append(_watermark_item(pf))
        out.extend(_attempt_item(a) for a in plan.found.unfinished)
        return out

    def _claim_scheme(self, found: KafkaDiscovery) -> None:
        if self.meta.get_key_scheme() is not None:
            return
        for seg in found.segments():
            m = seg.marker
            scheme = infer_key_scheme(
                seg.keys["log"], m.topic, m.topic_id, m.partition, m.base_offset, m.segment_id
            )
            if scheme is not None:
                self.meta.claim_key_scheme(scheme)
                log.info("Kafka key scheme rebuilt", scheme=scheme.describe())
                return

    def _recorded(self, segment_id: str) -> bool:
        try:
            self.meta.get_segment(segment_id)
        except NotFound:
            return False
        return True

    def _apply_partition(
        self, rt: Runtime, pf: PartitionFound, bodies: BodyReader
    ) -> list[RebuildItem]:
        out: list[RebuildItem] = []
        bucket = pf.watermark[0] if pf.watermark is not None else -1
        try:
            self.meta.ensure_partition(
                pf.topic, pf.partition, pf.topic_id, rt.now_ms(), watermark=bucket
            )
        except OffloadConflict as exc:
            return [_segment_item("conflict", seg, str(exc)) for seg in pf.kept]
        for seg in pf.kept:
            m = seg.marker
            try:
                record = self.meta.get_segment(m.segment_id)
            except NotFound:
                record = None
            if record is not None:
                action = "present" if record.state == COPY_FINISHED else "conflict"
                detail = "" if action == "present" else f"recorded {record.state}: left as is"
                out.append(_segment_item(action, seg, detail))
                continue
            m, checks = _full_marker(seg, bodies)
            try:
                self.meta.start_copy(
                    NewRemoteSegment.of_marker(m, seg.keys),
                    m.finished_ms if m.started_ms is None else m.started_ms,
                )
            except OffloadConflict as exc:
                out.append(_segment_item("conflict", seg, f"{exc}: not added"))
                continue
            self.meta.finish_copy(
                m.segment_id,
                m.finished_ms,
                log_crc32c=m.log_crc32c,
                checks=checks,
                max_timestamp=m.max_timestamp,
            )
            out.append(_segment_item("offload", seg))
        return out


def _bodies_needed(listing: StoreListing, select: TopicSelector) -> list[str]:
    """The marker keys, in listing order, whose marker only their body holds (hashed
    epochs): the GETs :func:`~formats.kafka.discover.discover_kafka` will make."""
    keys = []
    for info in listing.objects:
        if not info.key.startswith(KAFKA_MARKERS):
            continue
        try:
            parsed = parse_segment_marker_key(info.key)
        except FormatError:
            continue  # discover reports it
        if parsed.marker is None and select(parsed.topic):
            keys.append(info.key)
    return keys


def _needs_body(seg: FoundSegment) -> bool:
    return not seg.marker.checks and seg.marker.started_ms is None


def _full_marker(
    seg: FoundSegment, bodies: BodyReader
) -> tuple[SegmentMarker, SegmentChecks | None]:
    """The copy's marker as its body has it (one GET, unless the listing already read it)
    and the span checks it pins (None from a version-1 body: the record then has none)."""
    m = seg.marker
    if _needs_body(seg):
        try:
            body = decode_segment_marker_body(bodies.read(seg.marker_key))
        except (OffloaderError, FormatError) as exc:
            log.warning(
                "Kafka segment marker body unreadable; its record is rebuilt without checks",
                marker=seg.marker_key,
                error=str(exc),
            )
            return m, None
        if body.segment_id == m.segment_id:
            m = body
    if not m.checks:
        return m, None
    try:
        objects = {kind: ObjectChecksums.decode(text) for kind, text in m.checks.items()}
        nxt = None if m.next_chunks is None else ObjectChecksums.decode(m.next_chunks)
    except FormatError as exc:
        log.warning(
            "Kafka segment marker checks unreadable; its record is rebuilt without them",
            marker=seg.marker_key,
            error=str(exc),
        )
        return m, None
    return m, SegmentChecks(objects, m.transform_detail or PLAIN_TRANSFORM, nxt)
