"""Rebuilding Pulsar ledgers' records from the bucket (spec/bucket-manifests.md §4).

From the listing alone: every completion marker is a finished copy (its key carries the
record), every data/index object or multipart upload of a UUID without a marker is an
unfinished attempt, and the watermark objects give each managed ledger's highest finished
ledger. A marker whose data or index object is not listed, or is listed with another size
than the marker records, is a contradiction, reported as a ``problem`` and not recorded.

Two finished copies of one ledger (two uploaders, or a re-upload after a lost completion):
the copy the managed ledger's watermark names is kept, else the lowest UUID; the other is
recorded as a SUPERSEDED attempt, so ``objects orphans`` lists it and ``objects gc`` deletes it.
Unfinished attempts of a ledger that has a finished copy are recorded as FAILED attempts (gc
deletes them too); those of a ledger with no finished copy are reported as ``orphan`` and
left to the orphan audit (it lists them as ``unclaimed-uuid``).

Records are written through the :class:`~offloader.metadata.base.MetadataStore` Protocol, per
topic in ledger order: the namespace and topic if missing, then per ledger ``add_ledger``,
``close_ledger`` (its entry count and bytes), the unfinished and superseded attempts, and the
kept copy's ``begin_offload`` → ``complete_offload`` → ``mark_local_deleted`` (the new home
has no local copy). A topic's records are written in one batch (``MetadataStore.batch``: one
transaction, each call in a savepoint of it), so a rebuild commits once per topic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from formats.extension import crc32c
from formats.keys import data_key, index_key, parse_key
from formats.manifest import (
    LEDGER_MARKERS,
    LEDGERS_KIND,
    WATERMARKS,
    LedgerMarker,
    MarkerKey,
    decode_marker_body,
    decode_watermark_body,
    parse_ledger_marker_key,
    parse_watermark_key,
)
from offloader.errors import (
    AlreadyExists,
    FormatError,
    InvalidKeyError,
    InvalidName,
    NotFound,
    ObjectNotFound,
)
from offloader.logs import get_logger
from offloader.metadata.base import LedgerRecord, namespace_of_topic
from offloader.naming import TopicName
from offloader.rebuild.base import RebuildItem, StoreListing, TopicSelector, watermark_item
from offloader.runtime import Runtime

__all__ = ["KIND", "LedgerPlan", "PulsarLedgers", "TopicPlan"]

log = get_logger(__name__)

KIND = "pulsar-ledgers"
UNFINISHED_ERROR = "rebuilt: an attempt without a completion marker (unfinished)"


@dataclass(frozen=True)
class Attempt:
    """An attempt seen in the listing without a marker: its keys that exist."""

    uuid: str
    ledger_id: int
    keys: tuple[str, ...]
    upload: bool


@dataclass
class LedgerPlan:
    """One ledger: the copy kept, the other finished copies, the unfinished attempts."""

    kept: LedgerMarker
    superseded: list[LedgerMarker] = field(default_factory=list)
    unfinished: list[Attempt] = field(default_factory=list)


@dataclass
class TopicPlan:
    """One topic: its ledgers in id order and its watermark (bucket object, markers)."""

    topic: str
    managed_ledger_name: str
    ledgers: list[LedgerPlan] = field(default_factory=list)
    watermark: tuple[int, str] | None = None
    problems: list[RebuildItem] = field(default_factory=list)


@dataclass
class Plan:
    topics: list[TopicPlan]
    orphans: list[Attempt]
    problems: list[RebuildItem]


def _marker_item(action: str, topic: str, m: LedgerMarker, detail: str = "") -> RebuildItem:
    return RebuildItem(
        KIND,
        action,  # type: ignore[arg-type]
        topic,
        m.ledger_id,
        m.uuid,
        detail,
        {
            "entries": m.entries,
            "entry_bytes": m.entry_bytes,
            "data_size": m.data_size,
            "index_size": m.index_size,
            "index_crc32c": m.index_crc32c,
            "transform": m.transform,
            "offloaded_ms": m.offloaded_ms,
        },
    )


def _attempt_item(action: str, topic: str | None, a: Attempt, detail: str) -> RebuildItem:
    return RebuildItem(
        KIND,
        action,  # type: ignore[arg-type]
        topic,
        a.ledger_id,
        a.uuid,
        detail,
        {"keys": ",".join(a.keys), "multipart_upload": "yes" if a.upload else "no"},
    )


class PulsarLedgers:
    """The :class:`~offloader.rebuild.base.Rebuilder` of Pulsar ledgers."""

    kind = KIND

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def existing_records(self, rt: Runtime) -> int:
        return len(rt.meta.list_topics())

    # --- planning -------------------------------------------------------------------------
    def _name_of(self, rt: Runtime, parsed: MarkerKey) -> LedgerMarker:
        """A hashed marker's full record: one GET per hashed name segment, cached."""
        name = self._names.get(parsed.segment)
        if name is None:
            name = decode_marker_body(rt.store.get(parsed.key).data).managed_ledger_name
            self._names[parsed.segment] = name
        return parsed.with_name(name)

    def _watermark_name(self, rt: Runtime, key: str, segment: str) -> str:
        name = self._names.get(segment)
        if name is None:
            name = decode_watermark_body(rt.store.get(key).data)[1]
            self._names[segment] = name
        return name

    def plan(self, rt: Runtime, listing: StoreListing, select: TopicSelector) -> Plan:
        markers: dict[str, dict[int, list[LedgerMarker]]] = defaultdict(lambda: defaultdict(list))
        watermarks: dict[str, tuple[int, str]] = {}
        problems: list[RebuildItem] = []
        marked: set[str] = set()
        objects: dict[tuple[str, int], list[str]] = defaultdict(list)
        for info in listing.objects:
            key = info.key
            try:
                if key.startswith(LEDGER_MARKERS):
                    parsed = parse_ledger_marker_key(key)
                    marker = parsed.marker or self._name_of(rt, parsed)
                    markers[marker.managed_ledger_name][marker.ledger_id].append(marker)
                    marked.add(marker.uuid)
                elif key.startswith(WATERMARKS):
                    wm = parse_watermark_key(key)
                    if wm.kind != LEDGERS_KIND:
                        continue
                    name = wm.name or self._watermark_name(rt, key, wm.segment)
                    if name not in watermarks or wm.position > watermarks[name][0]:
                        watermarks[name] = (wm.position, wm.tag)
                else:
                    ok = parse_key(key)
                    objects[(ok.uuid, ok.ledger_id)].append(key)
            except (InvalidKeyError, ObjectNotFound, FormatError) as exc:
                if key.startswith(LEDGER_MARKERS) or key.startswith(WATERMARKS):
                    problems.append(RebuildItem(KIND, "problem", None, detail=f"{key}: {exc}"))
                continue  # not ours (Kafka segments, READMEs): other rebuilders' or nobody's
        uploads: set[tuple[str, int]] = set()
        for upload in listing.uploads:
            try:
                ok = parse_key(upload.key)
            except InvalidKeyError:
                continue
            if not ok.is_index:
                uploads.add((ok.uuid, ok.ledger_id))
        attempts = {
            (u, lid): Attempt(u, lid, tuple(sorted(objects.get((u, lid), []))), (u, lid) in uploads)
            for (u, lid) in set(objects) | uploads
            if u not in marked
        }
        by_ledger: dict[int, list[Attempt]] = defaultdict(list)
        for attempt in attempts.values():
            by_ledger[attempt.ledger_id].append(attempt)
        topics: list[TopicPlan] = []
        claimed_ledgers: set[int] = set()
        for name in sorted(set(markers) | set(watermarks)):
            try:
                topic = str(TopicName.from_managed_ledger_name(name))
            except InvalidName as exc:
                problems.append(RebuildItem(KIND, "problem", None, detail=str(exc)))
                continue
            if not select(topic):
                claimed_ledgers.update(markers.get(name, {}))
                continue
            tp = TopicPlan(topic, name, watermark=watermarks.get(name))
            for ledger_id in sorted(markers.get(name, {})):
                claimed_ledgers.add(ledger_id)
                found = self._one_per_attempt(rt, markers[name][ledger_id], listing.sizes)
                ledger = self._plan_ledger(tp, ledger_id, found, listing.sizes)
                if ledger is not None:
                    ledger.unfinished = sorted(by_ledger.pop(ledger_id, []), key=lambda a: a.uuid)
                    tp.ledgers.append(ledger)
            topics.append(tp)
        orphans: list[Attempt] = []
        for ledger_id, lost in sorted(by_ledger.items()):
            if ledger_id not in claimed_ledgers:
                orphans.extend(sorted(lost, key=lambda a: a.uuid))
        return Plan(topics, orphans, problems)

    def _one_per_attempt(
        self, rt: Runtime, found: list[LedgerMarker], sizes: Mapping[str, int]
    ) -> list[LedgerMarker]:
        """One marker per attempt. Two of one attempt are a crash inside ``objects rekey``'s
        marker refresh (new marker written, stale one not yet deleted): the one whose index
        size matches the listing, and if both do, the one whose CRC32C matches the index
        (one GET, only then)."""
        by_uuid: dict[str, list[LedgerMarker]] = defaultdict(list)
        for m in found:
            by_uuid[m.uuid].append(m)
        out: list[LedgerMarker] = []
        for same in by_uuid.values():
            if len(same) > 1:
                key = index_key(same[0].uuid, same[0].ledger_id)
                sized = [m for m in same if sizes.get(key) == m.index_size] or same
                if len(sized) > 1:
                    try:
                        crc = crc32c(rt.store.get(key).data)
                    except ObjectNotFound:
                        crc = None
                    sized = [m for m in sized if m.index_crc32c == crc] or sized[:1]
                same = sized[:1]
            out.extend(same)
        return out

    def _plan_ledger(
        self, tp: TopicPlan, ledger_id: int, found: list[LedgerMarker], sizes: Mapping[str, int]
    ) -> LedgerPlan | None:
        valid: list[LedgerMarker] = []
        for m in found:
            wrong = []
            for key, size in (
                (data_key(m.uuid, ledger_id), m.data_size),
                (index_key(m.uuid, ledger_id), m.index_size),
            ):
                if key not in sizes:
                    wrong.append(f"{key} missing")
                elif sizes[key] != size:
                    wrong.append(f"{key} is {sizes[key]} bytes, the marker says {size}")
            if wrong:
                detail = f"marker without its objects: {'; '.join(wrong)}"
                tp.problems.append(_marker_item("problem", tp.topic, m, detail))
            else:
                valid.append(m)
        if not valid:
            return None
        named = tp.watermark
        kept = next(
            (m for m in valid if named is not None and (m.ledger_id, m.uuid) == named), None
        )
        if kept is None:
            kept = min(valid, key=lambda m: m.uuid)
        others = sorted((m for m in valid if m is not kept), key=lambda m: m.uuid)
        return LedgerPlan(kept, others)

    def items(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        out: list[RebuildItem] = list(plan.problems)
        for tp in plan.topics:
            existing: dict[int, LedgerRecord] | None = None
            if merge:  # what a --merge run would find already recorded (reads only)
                try:
                    existing = {r.ledger_id: r for r in rt.meta.list_ledgers(tp.topic)}
                except NotFound:
                    existing = None
            if existing is None:
                out.append(RebuildItem(KIND, "topic", tp.topic))
            out.extend(self._ledger_items(tp, existing or {}))
            out.append(self._watermark_item(tp))
        out.extend(
            _attempt_item("orphan", None, a, "no finished copy of this ledger: objects orphans")
            for a in plan.orphans
        )
        return out

    def _ledger_items(
        self, tp: TopicPlan, existing: Mapping[int, LedgerRecord]
    ) -> list[RebuildItem]:
        out = list(tp.problems)
        for lp in tp.ledgers:
            record = existing.get(lp.kept.ledger_id)
            if record is not None:
                out.append(self._compare(tp.topic, record, lp))
                continue
            out.append(_marker_item("offload", tp.topic, lp.kept))
            out.extend(
                _marker_item(
                    "superseded", tp.topic, m, f"a second finished copy; kept {lp.kept.uuid}"
                )
                for m in lp.superseded
            )
            out.extend(
                _attempt_item("unfinished", tp.topic, a, "no completion marker")
                for a in lp.unfinished
            )
        return out

    @staticmethod
    def _watermark_item(tp: TopicPlan) -> RebuildItem:
        highest = max((lp.kept.ledger_id for lp in tp.ledgers), default=None)
        return watermark_item(KIND, tp.topic, highest, tp.watermark, in_ledger_column=True)

    # --- writing --------------------------------------------------------------------------
    def apply(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        out: list[RebuildItem] = list(plan.problems)
        for tp in plan.topics:
            with rt.meta.batch():  # one transaction per topic, not six per ledger
                out.extend(self._apply_topic(rt, tp, merge=merge))
            out.append(self._watermark_item(tp))
        out.extend(
            _attempt_item("orphan", None, a, "no finished copy of this ledger: objects orphans")
            for a in plan.orphans
        )
        return out

    def _apply_topic(self, rt: Runtime, tp: TopicPlan, *, merge: bool) -> list[RebuildItem]:
        meta = rt.meta
        out: list[RebuildItem] = []
        namespace = namespace_of_topic(tp.topic)
        try:
            meta.get_namespace(namespace)
        except NotFound:
            meta.create_namespace(namespace, rt.now_ms())
            out.append(RebuildItem(KIND, "namespace", tp.topic, detail=namespace))
        existing: dict[int, LedgerRecord] = {}
        try:
            for found in meta.list_ledgers(tp.topic, include_deleted=True):
                existing[found.ledger_id] = found
        except NotFound:
            created = min((lp.kept.created_ms for lp in tp.ledgers), default=rt.now_ms())
            meta.create_topic(tp.topic, created)
            out.append(RebuildItem(KIND, "topic", tp.topic))
        out.extend(tp.problems)
        top = max(existing, default=None)
        for lp in tp.ledgers:
            kept = lp.kept
            record = existing.get(kept.ledger_id)
            if record is not None:
                out.append(self._compare(tp.topic, record, lp))
                continue
            if top is not None and kept.ledger_id < top:
                out.append(
                    _marker_item(
                        "conflict",
                        tp.topic,
                        kept,
                        f"below the topic's recorded ledgers (up to {top}): not added",
                    )
                )
                continue
            try:
                out.extend(self._write_ledger(rt, tp.topic, lp))
            except AlreadyExists as exc:
                out.append(_marker_item("conflict", tp.topic, kept, str(exc)))
        return out

    @staticmethod
    def _compare(topic: str, record: LedgerRecord, lp: LedgerPlan) -> RebuildItem:
        context = record.offload
        kept = lp.kept
        if context is not None and context.complete and context.uuid == kept.uuid:
            return _marker_item("present", topic, kept)
        if (
            context is not None
            and context.complete
            and any(m.uuid == context.uuid for m in lp.superseded)
        ):
            return _marker_item("present", topic, kept, f"recorded copy {context.uuid} kept")
        recorded = "not offloaded" if context is None or not context.complete else context.uuid
        return _marker_item(
            "conflict", topic, kept, f"ledger recorded with {recorded} ({record.state}): left as is"
        )

    @staticmethod
    def _write_ledger(rt: Runtime, topic: str, lp: LedgerPlan) -> list[RebuildItem]:
        meta, kept = rt.meta, lp.kept
        lid = kept.ledger_id
        meta.add_ledger(topic, lid, kept.created_ms)
        meta.close_ledger(lid, kept.closed_ms, kept.entries, kept.entry_bytes)
        out: list[RebuildItem] = []
        for attempt in lp.unfinished:
            meta.begin_offload(
                lid,
                attempt.uuid,
                rt.driver,
                rt.now_ms(),
                data_key=data_key(attempt.uuid, lid),
                index_key=index_key(attempt.uuid, lid),
            )
            meta.fail_offload(lid, attempt.uuid, rt.now_ms(), UNFINISHED_ERROR)
            out.append(_attempt_item("unfinished", topic, attempt, "recorded FAILED: an orphan"))
        for m in [*lp.superseded, kept]:
            meta.begin_offload(
                lid,
                m.uuid,
                rt.driver,
                m.offloaded_ms,
                data_key=data_key(m.uuid, lid),
                index_key=index_key(m.uuid, lid),
            )
        meta.complete_offload(
            lid,
            kept.uuid,
            kept.offloaded_ms,
            data_size=kept.data_size,
            index_size=kept.index_size,
            index_crc32c=kept.index_crc32c,
        )
        meta.mark_local_deleted(lid, kept.uuid)
        out.append(_marker_item("offload", topic, kept))
        out.extend(
            _marker_item("superseded", topic, m, f"recorded SUPERSEDED; kept {kept.uuid}")
            for m in lp.superseded
        )
        return out
