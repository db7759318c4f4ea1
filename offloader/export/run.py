"""One export run on the driver: the exactly-once protocol around the engine's writes.

For each topic, under its export lock (:mod:`offloader.export.lock`):

1. read the watermark; refuse settings that changed at the same generation;
2. remove what an earlier, crashed run left past the watermark (complete files whose range
   ends after it, temporary files, unfinished S3 uploads): a file past the watermark was never
   committed, and the re-run writes the same names again;
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
from offloader.export.naming import INVALID, Partitioning
from offloader.export.plan import (
    ExportRunner,
    TopicPlan,
    WrittenFile,
    before,
    hold_back,
    topic_plan,
)
from offloader.export.settings import ExportSpec, same_target
from offloader.export.target import ExportTarget, TargetListing, TargetSpec
from offloader.logs import get_logger
from offloader.metadata.base import MetadataStore
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.naming import TopicName

__all__ = [
    "TopicExportReport",
    "adopt_watermark",
    "check_settings",
    "commit",
    "find_watermark",
    "prepare_topic",
    "remove_past",
    "run_export",
    "target_spec",
    "write_markers",
]

log = get_logger(__name__)


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
        for name in names:
            mark = adopt_watermark(exports, spec.target, name, spec.generation)
            check_settings(mark, spec, name)
            start = mark.position if mark is not None else (-1, -1)
            marks[name] = mark
            listings[name], removed[name] = prepare_topic(target, name, spec.generation, start)
            crash_point("export.after_cleanup")
            plans.append(
                topic_plan(name, meta.list_ledgers(name), start, offloaded_only=name in foreign)
            )
        todo = [p for p in plans if not p.empty]
        if todo and spec.until_ms is not None:
            cuts = runner.first_at_or_after(todo, spec.until_ms)
            plans = [p.clipped(before(cuts[p.topic])) if p.topic in cuts else p for p in plans]
            todo = [p for p in plans if not p.empty]
        plans, written, past = hold_back(plans, runner.write(todo) if todo else [])
        remove_past(target, past)
        return [
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
