"""``export status`` and ``export reset``: the watermark, the files and the lag; moving back.

Status also checks the files against the watermark: the count of files it committed (kept by
every run and reset) against the files at or before it in the target; when some are gone it
says how many and which ranges of the stream no file covers (``export run`` writes them again,
:func:`offloader.export.run.repair`).

Reset (Secor's reprocessing after a parser bug) picks the new watermark from the point given:
a message id (``ledger:entry[:batch]``: that entry and everything after it is exported again)
or a time (every file holding a message published at or after it, read from the Parquet
footers). The watermark goes back to just before the first entry of the first file it must
rewrite (never past a file that straddles it), the watermark is stored first, then exactly the
files after it are removed, with the ``_SUCCESS`` markers of their partitions. Files before the
new watermark are not touched; a crash in between is finished by the next run's cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from offloader.crashpoints import crash_point
from offloader.errors import ConfigError, NotFound
from offloader.export.kafka import split_key
from offloader.export.lock import export_lock
from offloader.export.naming import ExportFile
from offloader.export.plan import Position, before
from offloader.export.run import (
    adopt_watermark,
    find_watermark,
    missing_below,
    pulsar_spans,
    write_record,
)
from offloader.export.settings import parse_time_ms
from offloader.export.target import ExportTarget, TargetSpec
from offloader.metadata.base import MetadataStore
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import ClusterTopic

__all__ = [
    "ExportStatus",
    "ResetReport",
    "export_status",
    "lag_time_ms",
    "parse_reset_point",
    "pulsar_lag",
    "reset_export",
    "straddle_free",
]


@dataclass(frozen=True)
class ExportStatus:
    topic: str
    target: str
    generation: int
    watermark: Position
    publish_time_ms: int | None
    rows: int
    invalid_rows: int
    files: tuple[ExportFile, ...]  # committed (at or before the watermark)
    uncommitted_files: int  # past the watermark: a crashed run's, removed by the next run
    bytes: int
    markers: int
    last_closed: Position
    lag_entries: int
    lag_ms: int | None
    updated_ms: int
    #: files the watermark counts that are not in the target (deleted), and the position
    #: ranges no file there covers (where they were): ``export run`` writes them again
    missing_files: int = 0
    missing_ranges: tuple[tuple[Position, Position], ...] = ()


def export_status(
    meta: MetadataStore,
    exports: ExportMetadataStore,
    target_spec: TargetSpec,
    topic: str,
    generation: int,
    now_ms: int,
    kafka_meta: KafkaMetadataStore | None = None,
    cluster: tuple[str, ClusterTopic] | None = None,
) -> ExportStatus:
    """``cluster``: ``(location, managed ledger)`` of a real Pulsar cluster's topic
    (``--pulsar-metadata``): its watermark is keyed by the cluster, its lag counted from the
    ``ManagedLedgerInfo``."""
    name, directory, partition = _names(topic, None if cluster is None else cluster[0])
    mark = find_watermark(exports, target_spec.url, name, generation) or ExportWatermark(
        target_spec.url, name, generation
    )
    if partition is not None:  # a Kafka partition: its remote watermark is the end
        if mark.ledger_id < 0:
            mark = replace(mark, ledger_id=partition)
        remote = -1
        if kafka_meta is not None:
            rec = kafka_meta.get_partition(directory, partition)
            remote = rec.watermark if rec is not None else -1
        last_closed = (partition, remote)
        lag = max(0, remote - mark.entry_id)
        spans = [(partition, 0, mark.entry_id)] if mark.entry_id >= 0 else []
    elif cluster is not None:
        last_closed, lag, spans = cluster_lag(cluster[1], mark.position)
    else:
        last_closed, lag = pulsar_lag(meta, name, mark.position)
        spans = pulsar_spans(meta.list_ledgers(name), mark.position)
    listing = ExportTarget(target_spec).list_topic(directory)
    mine = [
        f
        for f in listing.of_generation(generation)
        if partition is None or f.ledger_id == partition
    ]
    done = tuple(f for f in mine if f.last <= mark.position)
    lag_ms = lag_time_ms(lag, mark.publish_time_ms, now_ms)
    missing = missing_below(mark, done, spans)
    return ExportStatus(
        directory if cluster is not None else name,
        target_spec.url,
        generation,
        mark.position,
        mark.publish_time_ms,
        mark.rows,
        mark.invalid_rows,
        done,
        len(mine) - len(done),
        sum(f.size for f in done),
        sum(1 for d in listing.markers if any(f.directory == d for f in done)),
        last_closed,
        lag,
        lag_ms,
        mark.updated_ms,
        missing.count,
        missing.ranges,
    )


def pulsar_lag(meta: MetadataStore, topic: str, position: Position) -> tuple[Position, int]:
    """The topic's last closed entry, and the entries after ``position`` (the export's
    watermark): every entry of the later ledgers, open ones included, none of deleted ones."""
    ledgers = meta.list_ledgers(topic)
    closed = [r for r in ledgers if r.state == "CLOSED" and r.entries > 0]
    last_closed = (closed[-1].ledger_id, closed[-1].entries - 1) if closed else (-1, -1)
    lag = 0
    for r in ledgers:
        if r.state == "DELETED" or r.ledger_id < position[0]:
            continue
        lag += r.entries if r.ledger_id > position[0] else max(0, r.entries - 1 - position[1])
    return last_closed, lag


def cluster_lag(
    ct: ClusterTopic, position: Position
) -> tuple[Position, int, list[tuple[int, int, int]]]:
    """A cluster topic's last exportable entry (the last entry of the last ledger whose
    offload is complete, before any that is not), the entries after ``position`` in every
    ledger its ``ManagedLedgerInfo`` lists, and its spans up to ``position``."""
    last = (-1, -1)
    for li in ct.info.ledgers:
        if not li.offloaded:
            break
        if (li.entries or 0) > 0:
            last = (li.ledger_id, (li.entries or 0) - 1)
    lag = 0
    spans = []
    for li in ct.info.ledgers:
        n = li.entries or 0
        if li.ledger_id > position[0]:
            lag += n
        elif li.ledger_id == position[0]:
            lag += max(0, n - 1 - position[1])
        if n > 0 and li.ledger_id <= position[0]:
            spans.append(
                (li.ledger_id, 0, min(n - 1, position[1]) if li.ledger_id == position[0] else n - 1)
            )
    return last, lag, spans


def lag_time_ms(lag: int, publish_time_ms: int | None, now_ms: int) -> int | None:
    """How far behind the export is in time: now minus the publish time of the watermark's
    message (0 when nothing is left; None before anything was exported)."""
    if publish_time_ms is None:
        return None
    return max(0, now_ms - publish_time_ms) if lag else 0


@dataclass(frozen=True)
class ResetReport:
    topic: str
    previous: Position
    watermark: Position
    removed: tuple[str, ...]


def parse_reset_point(text: str) -> Position | int:
    """``ledger:entry[:batch]`` -> a position; anything else is a time (:func:`parse_time_ms`)."""
    parts = text.strip().split(":")
    if 2 <= len(parts) <= 3 and all(p.strip().isdigit() for p in parts):
        return (int(parts[0]), int(parts[1]))
    return parse_time_ms(text)


def _names(topic: str, cluster: str | None = None) -> tuple[str, str, int | None]:
    """``(watermark key, directory topic, Kafka partition or None)`` of a topic argument:
    a Pulsar topic name, or ``kafka:<topic>:<partition>``; with ``cluster`` (a real Pulsar
    cluster's location), that cluster's topic."""
    if cluster is not None:
        from offloader.export.cluster import cluster_key

        name = str(TopicName.parse(topic))
        return cluster_key(cluster, name), name, None
    if topic.startswith("kafka:"):
        directory, partition = split_key(topic)
        return topic, directory, partition
    name = str(TopicName.parse(topic))
    return name, name, None


def straddle_free(files: list[ExportFile], mark: Position) -> Position:
    """Move ``mark`` back until no file holds entries on both sides of it."""
    changed = True
    while changed:
        changed = False
        for f in files:
            if f.first <= mark < f.last:
                mark, changed = before(f.first), True
    return mark


def reset_export(
    exports: ExportMetadataStore,
    home: Path,
    target_spec: TargetSpec,
    topic: str,
    generation: int,
    point: Position | int,
    now_ms: Callable[[], int],
    cluster: str | None = None,
) -> ResetReport:
    """``cluster``: the location of a real Pulsar cluster whose topic this is
    (``--pulsar-metadata``; its watermark is keyed by the cluster)."""
    name, directory, partition = _names(topic, cluster)
    shown = directory if cluster is not None else name
    target = ExportTarget(target_spec)
    lock_key = f"kafka:{directory}" if partition is not None else name
    with export_lock(home, target_spec.url, lock_key, generation, shared=exports):
        mark = adopt_watermark(exports, target_spec.url, name, generation)
        if mark is None:
            raise NotFound(
                f"{name} was never exported to {target_spec.url} (generation {generation})"
            )
        files = [
            f
            for f in target.list_topic(directory).of_generation(generation)
            if partition is None or f.ledger_id == partition
        ]
        if isinstance(point, tuple):
            later = [f for f in files if f.last >= point]
            new = before(point)
        else:
            later = []
            for f in files:
                span = target.publish_range(f.path)
                if span is None or span[1] >= point:
                    later.append(f)
            new = mark.position
        if later:
            new = min(new, before(min(f.first for f in later)))
        new = straddle_free(files, min(new, mark.position))
        removed = [f for f in files if f.last > new]
        rows = 0
        first_publish: int | None = None
        for f in removed:
            span = target.publish_range(f.path) if f.last <= mark.position else None
            if span is not None:
                first_publish = span[0] if first_publish is None else min(first_publish, span[0])
            rows += _rows(target, f) if f.last <= mark.position else 0
        publish = mark.publish_time_ms
        if first_publish is not None and publish is not None:
            publish = min(publish, first_publish - 1)
        if isinstance(point, int) and publish is not None:
            publish = min(publish, point - 1)
        if new <= (-1, -1):
            publish = None
        committed = [f for f in removed if f.last <= mark.position]
        lowered = replace(
            mark,
            ledger_id=new[0],
            entry_id=new[1],
            publish_time_ms=publish,
            rows=max(0, mark.rows - rows),
            files=max(0, mark.files - len(committed)),
            updated_ms=now_ms(),
        )
        write_record(target, lowered)  # the target's copy first: never ahead of the store
        exports.reset(lowered)
        crash_point("export.reset_after_watermark")
        for f in removed:
            target.delete(f.path)
        for directory in sorted({f.directory for f in removed}):
            target.delete_marker(directory)
        return ResetReport(shown, mark.position, new, tuple(f.path for f in removed))


def _rows(target: ExportTarget, f: ExportFile) -> int:
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(target.spec.path(f.path), filesystem=target.fs).num_rows)
    except OSError as exc:
        raise ConfigError(f"cannot read {f.path}: {exc}") from None
