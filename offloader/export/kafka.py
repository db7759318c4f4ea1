"""Exporting Kafka topics (remote segments, through ``kafka-segments``) with the same protocol.

Each partition is its own stream: its watermark is keyed ``kafka:<topic>:<partition>`` and its
positions are ``(partition, offset)``; a run exports ``(watermark, the partition's remote
watermark]`` (only segments already copied to the store: the Kafka tier's upload decides
what is closed). Files are under ``topic=<topic>/`` named ``g<gen>-<partition>-<first
offset>-<last offset>-<value>.parquet``; time partitions use the record timestamp (or a field
of the JSON value). ``_SUCCESS`` is written once every partition of the topic has passed the
partition's end. Cleanup, the repair of files gone below a watermark, the write and the
compare-and-set are those of :mod:`offloader.export.run`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace

from formats.kafka.names import check_topic
from offloader.errors import ConfigError, NotFound
from offloader.export.lock import export_lock
from offloader.export.plan import ExportRunner, TopicPlan, before, hold_back
from offloader.export.run import (
    TopicExportReport,
    _cleanup,
    adopt_watermark,
    check_settings,
    commit,
    prepare_topic,
    repair,
    repair_plan,
    target_spec,
    write_markers,
)
from offloader.export.settings import ExportSpec
from offloader.export.target import ExportTarget, TargetListing
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.metadata.kafka_base import KafkaMetadataStore

__all__ = ["kafka_key", "run_kafka_export", "split_key"]

PREFIX = "kafka:"


def kafka_key(topic: str, partition: int) -> str:
    return f"{PREFIX}{topic}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    """``(topic, partition)`` of ``kafka:<topic>:<partition>``; ConfigError for anything else."""
    topic, _, partition = key[len(PREFIX) :].rpartition(":")
    if (
        not key.startswith(PREFIX)
        or not topic
        or not partition.isascii()
        or not partition.isdigit()
    ):
        raise ConfigError(f"{key!r}: a Kafka export is named kafka:<topic>:<partition>")
    return check_topic(topic), int(partition)


def _repair_plan(
    key: str, mark: ExportWatermark | None, listing: TargetListing, generation: int
) -> TopicPlan | None:
    """A partition's :func:`~offloader.export.run.repair_plan` (its offsets from 0 up to the
    watermark: the ranges no file covers include those retention removed from the log)."""
    if mark is None:
        return None
    partition = split_key(key)[1]
    committed = [
        f
        for f in listing.of_generation(generation)
        if f.ledger_id == partition and f.last <= mark.position
    ]
    spans = [(partition, 0, mark.entry_id)] if mark.entry_id >= 0 else []
    return repair_plan(key, mark, committed, spans, (partition,))


def run_kafka_export(
    kmeta: KafkaMetadataStore,
    exports: ExportMetadataStore,
    home: object,
    spec: ExportSpec,
    topics: Sequence[str],
    runner: ExportRunner,
    now_ms: Callable[[], int],
) -> list[TopicExportReport]:
    from pathlib import Path

    if spec.time_field == "event_time":
        raise ConfigError("Kafka records have no event time: use publish_time (the timestamp)")
    names = sorted({check_topic(t) for t in topics})
    if not names:
        raise ConfigError("export run: name at least one topic")
    target = ExportTarget(target_spec(spec))
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(
                export_lock(
                    Path(str(home)), spec.target, PREFIX + name, spec.generation, shared=exports
                )
            )
        plans: list[TopicPlan] = []
        marks: dict[str, ExportWatermark | None] = {}
        listings: dict[str, TargetListing] = {}
        removed: dict[str, int] = {}
        repairs: list[TopicPlan] = []
        for name in names:
            partitions = kmeta.list_partitions(name)
            if not partitions:
                raise NotFound(f"Kafka topic {name} has no partition in the metadata")
            got = {
                p.partition: adopt_watermark(
                    exports, spec.target, kafka_key(name, p.partition), spec.generation
                )
                for p in partitions
            }
            for p in partitions:
                check_settings(got[p.partition], spec, kafka_key(name, p.partition))
            listing, gone = prepare_topic(target, name, spec.generation, (1 << 62, 0))
            # no file position is past (2**62, 0): this removed the temporary files and the
            # open uploads only; now each partition's files past its watermark
            for p in partitions:
                key = kafka_key(name, p.partition)
                mark = got[p.partition]
                start = mark.position if mark is not None else (p.partition, -1)
                listing, more = _cleanup(target, listing, spec.generation, start, p.partition)
                gone += more
                end = max(start, (p.partition, p.watermark))
                plans.append(TopicPlan(key, start, end, (p.partition,)))
                fix = _repair_plan(key, mark, listing, spec.generation)
                if fix is not None:
                    repairs.append(fix)
                marks[key] = mark
                removed[key] = 0
            listings[name] = listing
            removed[kafka_key(name, partitions[0].partition)] = gone
        repaired = repair(
            exports, target, runner, repairs, listings, marks, lambda key: split_key(key)[0]
        )
        todo = [p for p in plans if not p.empty]
        if todo and spec.until_ms is not None:
            cuts = runner.first_at_or_after(todo, spec.until_ms)
            plans = [p.clipped(before(cuts[p.topic])) if p.topic in cuts else p for p in plans]
            todo = [p for p in plans if not p.empty]
        plans, written, _past = hold_back(plans, runner.write(todo) if todo else [])  # none held
        reports = []
        for plan in plans:
            name, _ = split_key(plan.topic)
            files = [w for w in written if w.topic == plan.topic]
            reports.append(
                commit(exports, target, spec, spec.fingerprint(), plan, marks[plan.topic],
                       listings[name], removed[plan.topic], files, now_ms(), markers=False)
            )  # fmt: skip
        reports = [replace(r, repaired=repaired.get(r.topic, (0, 0))[0],
                           missing=repaired.get(r.topic, (0, 0))[1]) for r in reports]  # fmt: skip
        for name in names:  # a partition directory is final once every partition passed it
            times = [r.publish_time_ms for r in reports if split_key(r.topic)[0] == name]
            if times and all(t is not None for t in times):
                dirs = [f.directory for f in listings[name].files]
                dirs += [
                    w.path.rpartition("/")[0] for w in written if split_key(w.topic)[0] == name
                ]
                write_markers(target, listings[name], spec.generation, spec.partitioning,
                              min(t for t in times if t is not None), dirs)  # fmt: skip
        return reports
