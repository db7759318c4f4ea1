"""One export run on the driver: the exactly-once protocol around the engine's writes.

For each topic, under its export lock (:mod:`offloader.export.lock`):

1. read the watermark (keyed by the target's canonical spelling; one stored under another
   spelling of the same target is found and stored under it); refuse settings that changed at
   the same generation;
2. remove what an earlier, crashed run left past the watermark (complete files whose range
   ends after it, temporary files, unfinished S3 uploads): a file past the watermark was never
   committed, and the re-run writes the same names again; then count the files at or before
   it against the watermark's count: files gone from the target (deleted by hand) are written
   again first (:func:`repair`: the engine's tasks write only the rows no file there holds,
   with the same names and bytes), those whose ledger is gone reported and no longer counted;
3. plan ``(watermark, last closed entry]`` (cut before the first message published at or after
   ``--until``, when given);

then the engine writes every topic's rows (each file under a temporary name, renamed, or on S3
put whole); a chunked message whose first chunk is in the range but whose last chunk is not in
a closed ledger yet stops the topic's plan just before it (:func:`~offloader.export.plan.
hold_back`: the files past that are removed, the next run writes them again); and per topic
the driver checks every reported file is there, advances the
watermark (compare-and-set on the position read in step 1) and writes ``_SUCCESS`` in each
time partition whose end the watermark's publish time has passed. A crash anywhere before the
compare-and-set leaves the watermark where it was; a crash after it leaves complete files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from offloader.crashpoints import crash_point
from offloader.errors import ExportError
from offloader.export.lock import export_lock
from offloader.export.naming import INVALID, ExportFile, Partitioning, parse_file_name
from offloader.export.plan import (
    ExportRunner,
    Position,
    TopicPlan,
    WrittenFile,
    before,
    hold_back,
    topic_plan,
)
from offloader.export.record import encode_record, record_path
from offloader.export.settings import ExportSpec, same_target
from offloader.export.target import ExportTarget, TargetListing, TargetSpec
from offloader.logs import get_logger
from offloader.metadata.base import LedgerRecord, MetadataStore
from offloader.metadata.export_base import NOTHING, ExportMetadataStore, ExportWatermark
from offloader.naming import TopicName

__all__ = [
    "Missing",
    "TopicExportReport",
    "adopt_watermark",
    "check_settings",
    "commit",
    "find_watermark",
    "missing_below",
    "prepare_topic",
    "pulsar_spans",
    "remove_past",
    "repair",
    "repair_plan",
    "run_export",
    "target_spec",
    "write_markers",
    "write_record",
]

log = get_logger(__name__)

#: the closed ledgers after the watermark's a repair may read to finish a chunked message (the
#: ``pulsar-messages`` source follows at most 16)
FOLLOWING = 17


@dataclass(frozen=True)
class TopicExportReport:
    """What one run did for one topic."""

    topic: str
    target: str
    generation: int
    previous: tuple[int, int]
    watermark: tuple[int, int]
    files: int
    rows: int
    invalid_rows: int
    bytes: int
    removed_leftovers: int
    markers_written: int
    publish_time_ms: int | None
    #: files below the watermark that were gone and were written again
    repaired: int = 0
    #: files below the watermark that could not be written again (their ledger is gone):
    #: reported once, then no longer counted by the watermark
    missing: int = 0


@dataclass(frozen=True)
class Missing:
    """What a target lacks below a watermark: ``count`` files the watermark counts that are
    not there, and the inclusive position ranges of the stream no file there covers (where
    they were; entries that hold no row, such as a chunked message's later chunks, show too)."""

    count: int
    ranges: tuple[tuple[Position, Position], ...]


def missing_below(
    mark: ExportWatermark | None,
    committed: Sequence[ExportFile],
    spans: Sequence[tuple[int, int, int]],
) -> Missing:
    """Compare the watermark's file count with the ``committed`` files there (those at or
    before it); when some are gone, the parts of ``spans`` (``(ledger, first, last)``: the
    stream's positions up to the watermark) that no file covers."""
    if mark is None or mark.files <= len(committed):
        return Missing(0, ())
    covered: dict[int, list[tuple[int, int]]] = {}
    for f in committed:
        covered.setdefault(f.ledger_id, []).append((f.first_entry, f.last_entry))
    out: list[tuple[Position, Position]] = []
    for ledger, first, last in spans:
        at = first
        for a, b in sorted(covered.get(ledger, [])):
            if a > at:
                out.append(((ledger, at), (ledger, min(a - 1, last))))
            at = max(at, b + 1)
            if at > last:
                break
        if at <= last:
            out.append(((ledger, at), (ledger, last)))
    return Missing(mark.files - len(committed), tuple(r for r in out if r[0] <= r[1]))


def pulsar_spans(ledgers: Sequence[LedgerRecord], end: Position) -> list[tuple[int, int, int]]:
    """A topic's positions up to ``end``, per ledger: ``(ledger, 0, last entry)``."""
    return [
        (r.ledger_id, 0, min(r.entries - 1, end[1]) if r.ledger_id == end[0] else r.entries - 1)
        for r in ledgers
        if r.state != "DELETED" and r.entries > 0 and r.ledger_id <= end[0]
    ]


def target_spec(spec: ExportSpec) -> TargetSpec:
    return TargetSpec(spec.target, spec.endpoint_url, spec.region)


def write_markers(
    target: ExportTarget,
    listing: TargetListing,
    generation: int,
    partitioning: Partitioning,
    publish_time_ms: int | None,
    extra_dirs: Sequence[str] = (),
) -> int:
    """``_SUCCESS`` in each partition directory (of ``generation``'s files) whose end is at or
    before ``publish_time_ms`` and that has none yet; returns how many were written."""
    if publish_time_ms is None:
        return 0
    dirs = {f.directory: f.value for f in listing.of_generation(generation)}
    written = 0
    for directory in sorted({*dirs, *extra_dirs}):
        value = dirs.get(directory) or _value_of_dir(directory, partitioning)
        if value is None or value == "invalid" or directory in listing.markers:
            continue
        bucket = partitioning.bucket_of_value(value)
        if bucket is not None and partitioning.end_ms(bucket) <= publish_time_ms:
            target.put_marker(directory)
            crash_point("export.after_marker")
            listing.markers.add(directory)
            written += 1
    return written


def write_record(target: ExportTarget, mark: ExportWatermark) -> None:
    """The target's copy of ``mark`` (:mod:`offloader.export.record`; spec/export.md §5a),
    written whole. After a run's compare-and-set (and its ``_SUCCESS`` markers); before a
    reset's: so the record is never ahead of the store's watermark, and a rebuild from it
    continues exactly once."""
    target.put_whole(record_path(mark.topic, mark.generation), encode_record(mark))
    crash_point("export.after_record")


def _value_of_dir(directory: str, partitioning: Partitioning) -> str | None:
    parts = dict(p.split("=", 1) for p in directory.split("/")[1:] if "=" in p)
    day = parts.get("dt")
    if day is None or day == INVALID:
        return None
    return f"{day}T{parts['hr']}" if "hr" in parts else day


def _cleanup(
    target: ExportTarget,
    listing: TargetListing,
    generation: int,
    start: tuple[int, int],
    only_ledger: int | None = None,
) -> tuple[TargetListing, int]:
    """Remove this generation's files past the watermark (of ``only_ledger``'s positions,
    when given: a Kafka partition) and the temporary files; the listing of what stays."""
    removed = 0
    gone = set()
    for f in listing.of_generation(generation):
        if (only_ledger is None or f.ledger_id == only_ledger) and f.last > start:
            target.delete(f.path)
            gone.add(f.path)
            removed += 1
    for path in listing.temps:
        target.delete(path)
        removed += 1
    kept = [f for f in listing.files if f.path not in gone]
    return TargetListing(kept, [], listing.markers), removed


def prepare_topic(
    target: ExportTarget, topic: str, generation: int, start: tuple[int, int]
) -> tuple[TargetListing, int]:
    """List the topic's directory and remove what a crashed run left past ``start``."""
    listing, removed = _cleanup(target, target.list_topic(topic), generation, start)
    removed += target.abort_uploads(topic)
    if removed:
        log.info("export.leftovers_removed", topic=topic, count=removed)
    return listing, removed


def remove_past(target: ExportTarget, past: Sequence[WrittenFile]) -> None:
    """Remove the files a run wrote past the watermark it commits (a chunked message held
    back before them): a crash first leaves them to the next run's cleanup."""
    for f in past:
        target.delete(f.path)
    if past:
        log.info("export.held_back", files=len(past), topics=sorted({f.topic for f in past}))


def find_watermark(
    exports: ExportMetadataStore, target: str, topic: str, generation: int
) -> ExportWatermark | None:
    """The watermark of ``(target, topic, generation)``, ``target`` canonical
    (:func:`~offloader.export.settings.normalize_target`). When none is stored under it, one
    stored under another spelling of the same target (written before targets were canonical;
    the furthest of several) is returned, carried over to ``target``."""
    mark = exports.get_watermark(target, topic, generation)
    if mark is not None:
        return mark
    legacy = [
        m
        for m in exports.list_watermarks(topic=topic)
        if m.generation == generation and m.target != target and same_target(m.target, target)
    ]
    if not legacy:
        return None
    return replace(max(legacy, key=lambda m: (m.position, m.updated_ms)), target=target)


def adopt_watermark(
    exports: ExportMetadataStore, target: str, topic: str, generation: int
) -> ExportWatermark | None:
    """:func:`find_watermark`, a watermark found under another spelling stored under the
    canonical one (call under the export's lock)."""
    mark = find_watermark(exports, target, topic, generation)
    if mark is not None and exports.get_watermark(target, topic, generation) is None:
        exports.advance(mark, None)
        log.info("export.watermark_adopted", target=target, topic=topic, position=mark.position)
    return mark


def repair_plan(
    topic: str,
    mark: ExportWatermark | None,
    committed: Sequence[ExportFile],
    spans: Sequence[tuple[int, int, int]],
    ledger_ids: Sequence[int],
) -> TopicPlan | None:
    """The plan that writes again the files below the watermark that are gone (None: none
    is): every task that meets a range no file covers (all of them when the ranges say
    nothing), ``ledger_ids`` the ledgers it may read (their following ones finish chunked
    messages)."""
    missing = missing_below(mark, committed, spans)
    if mark is None or not missing.count:
        return None
    log.warning(
        "export.files_missing",
        topic=topic,
        target=mark.target,
        files=missing.count,
        ranges=[f"{a[0]}:{a[1]}-{b[0]}:{b[1]}" for a, b in missing.ranges[:20]],
    )
    return TopicPlan(
        topic, NOTHING, mark.position, tuple(ledger_ids), tuple(committed),
        missing.ranges,
    )  # fmt: skip


def repair(
    exports: ExportMetadataStore,
    target: ExportTarget,
    runner: ExportRunner,
    plans: Sequence[TopicPlan],
    listings: dict[str, TargetListing],
    marks: dict[str, ExportWatermark | None],
    listing_of: Callable[[str], str] = lambda topic: topic,
) -> dict[str, tuple[int, int]]:
    """Write again, with their names and bytes, the files the repair ``plans`` find gone;
    per plan's topic, how many files were written and how many are still missing. The files
    join the listings (under ``listing_of(topic)``), so their partitions' ``_SUCCESS`` markers
    are written again too. Files that could not be written (their ledger is gone) are
    reported once: the watermark stops counting them (``marks`` updated), so later runs do
    not read the topic again for them."""
    todo = [p for p in plans if not p.empty]
    written = [w for w in runner.write(todo) if isinstance(w, WrittenFile)] if todo else []
    done: dict[str, int] = {}
    for w in written:
        if not target.exists(w.path):
            raise ExportError(f"repair of {w.topic}: {w.path} reported written is not there")
        parsed = parse_file_name(w.path, w.size)
        if parsed is not None:
            listings[listing_of(w.topic)].files.append(parsed)
        done[w.topic] = done.get(w.topic, 0) + 1
    out: dict[str, tuple[int, int]] = {}
    for plan in plans:
        mark = marks[plan.topic]
        assert mark is not None and plan.present is not None
        count = done.get(plan.topic, 0)
        still = max(0, mark.files - len(plan.present) - count)
        if count:
            log.info("export.files_repaired", topic=plan.topic, files=count)
        if still:
            log.warning("export.files_lost", topic=plan.topic, target=mark.target, files=still)
            settled = replace(mark, files=mark.files - still)
            exports.advance(settled, mark.position)
            marks[plan.topic] = settled
        out[plan.topic] = (count, still)
    return out


def check_settings(mark: ExportWatermark | None, spec: ExportSpec, name: str) -> None:
    if mark is not None and mark.settings and mark.settings != spec.fingerprint():
        raise ExportError(
            f"{name} was exported to {spec.target} at generation {spec.generation} with "
            f"other settings ({mark.settings}); export with --generation "
            f"{spec.generation + 1} to write beside those files"
        )


def run_export(
    meta: MetadataStore,
    exports: ExportMetadataStore,
    home: Path,
    spec: ExportSpec,
    topics: Sequence[str],
    runner: ExportRunner,
    now_ms: Callable[[], int],
    *,
    foreign: Collection[str] = (),
) -> list[TopicExportReport]:
    """``foreign``: topics another broker owns (a shared store), exported only as far as their
    ledgers are offloaded (:func:`~offloader.export.plan.topic_plan`)."""
    names = sorted({str(TopicName.parse(t)) for t in topics})
    if not names:
        raise ExportError("export run: name at least one topic")
    target = ExportTarget(target_spec(spec))
    fingerprint = spec.fingerprint()
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(
                export_lock(home, spec.target, name, spec.generation, shared=exports)
            )
        marks: dict[str, ExportWatermark | None] = {}
        listings: dict[str, TargetListing] = {}
        removed: dict[str, int] = {}
        plans: list[TopicPlan] = []
        repairs: list[TopicPlan] = []
        for name in names:
            mark = adopt_watermark(exports, spec.target, name, spec.generation)
            check_settings(mark, spec, name)
            start = mark.position if mark is not None else (-1, -1)
            marks[name] = mark
            listings[name], removed[name] = prepare_topic(target, name, spec.generation, start)
            crash_point("export.after_cleanup")
            ledgers = meta.list_ledgers(name)
            fix = _pulsar_repair(name, mark, listings[name].of_generation(spec.generation), ledgers)
            if fix is not None:
                repairs.append(fix)
            plans.append(topic_plan(name, ledgers, start, offloaded_only=name in foreign))
        repaired = repair(exports, target, runner, repairs, listings, marks)
        todo = [p for p in plans if not p.empty]
        if todo and spec.until_ms is not None:
            cuts = runner.first_at_or_after(todo, spec.until_ms)
            plans = [p.clipped(before(cuts[p.topic])) if p.topic in cuts else p for p in plans]
            todo = [p for p in plans if not p.empty]
        plans, written, past = hold_back(plans, runner.write(todo) if todo else [])
        remove_past(target, past)
        reports = [
            commit(
                exports,
                target,
                spec,
                fingerprint,
                plan,
                marks[plan.topic],
                listings[plan.topic],
                removed[plan.topic],
                [w for w in written if w.topic == plan.topic],
                now_ms(),
            )
            for plan in plans
        ]
        return [replace(r, repaired=repaired.get(r.topic, (0, 0))[0],
                        missing=repaired.get(r.topic, (0, 0))[1]) for r in reports]  # fmt: skip


def _pulsar_repair(
    name: str,
    mark: ExportWatermark | None,
    files: Sequence[ExportFile],
    ledgers: Sequence[LedgerRecord],
) -> TopicPlan | None:
    """A Pulsar topic's :func:`repair_plan`: its ledgers up to the watermark's, and the closed
    ones after it a chunked message may finish in."""
    if mark is None:
        return None
    end = mark.position
    committed = [f for f in files if f.last <= end]
    closed = [r.ledger_id for r in ledgers if r.state == "CLOSED" and r.entries > 0]
    ids = [i for i in closed if i <= end[0]] + [i for i in closed if i > end[0]][:FOLLOWING]
    return repair_plan(name, mark, committed, pulsar_spans(ledgers, end), ids)


def commit(
    exports: ExportMetadataStore,
    target: ExportTarget,
    spec: ExportSpec,
    fingerprint: str,
    plan: TopicPlan,
    mark: ExportWatermark | None,
    listing: TargetListing,
    removed: int,
    files: list[WrittenFile],
    now: int,
    *,
    markers: bool = True,
) -> TopicExportReport:
    """Check the files, compare-and-set the watermark, then (``markers``) the ``_SUCCESS``
    markers its publish time allows."""
    for f in files:
        if not target.exists(f.path):
            raise ExportError(
                f"export of {plan.topic}: {f.path} was reported written but is not there"
            )
    publish = [f.max_publish_ms for f in files if f.max_publish_ms is not None]
    if mark is not None and mark.publish_time_ms is not None:
        publish.append(mark.publish_time_ms)
    base = mark or ExportWatermark(spec.target, plan.topic, spec.generation)
    new = replace(
        base,
        ledger_id=max(plan.end, plan.start)[0],
        entry_id=max(plan.end, plan.start)[1],
        publish_time_ms=max(publish) if publish else None,
        settings=fingerprint,
        rows=base.rows + sum(f.rows for f in files),
        files=base.files + len(files),
        invalid_rows=base.invalid_rows + sum(f.invalid_rows for f in files),
        updated_ms=now,
    )
    crash_point("export.before_advance")
    if mark is None or new != mark:
        exports.advance(new, None if mark is None else mark.position)
    crash_point("export.after_advance")
    dirs = [f.path.rpartition("/")[0] for f in files]
    written = 0
    if markers:
        written = write_markers(
            target, listing, spec.generation, spec.partitioning, new.publish_time_ms, dirs
        )
    write_record(target, new)
    log.info("export.committed", topic=plan.topic, watermark=new.position, files=len(files))
    return TopicExportReport(
        plan.topic,
        spec.target,
        spec.generation,
        plan.start,
        new.position,
        len(files),
        sum(f.rows for f in files),
        sum(f.invalid_rows for f in files),
        sum(f.size for f in files),
        removed,
        written,
        new.publish_time_ms,
    )
