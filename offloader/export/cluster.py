"""Exporting a real Pulsar cluster's topics (``export run`` with ``--pulsar-metadata``), with
the exactly-once protocol of :mod:`offloader.export.run`.

The ledgers come from each topic's ``ManagedLedgerInfo`` in the cluster's metadata store
(:mod:`offloader.pulsar_cluster`): a run exports ``(watermark, last entry of the last ledger
whose offload is complete]``, stopping before the first ledger (after the watermark) that is not
offloaded yet, so the watermark never passes messages that are only in BookKeeper. The
watermark is keyed by the cluster and the topic (:func:`cluster_key`: the same topic name in
two clusters are two streams); the files are under the topic's own directory
(``topic=<name>``), as for our own topics. Cleanup, the write, the compare-and-set and the
``_SUCCESS`` markers are those of :mod:`offloader.export.run`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from offloader.errors import ExportError
from offloader.export.lock import export_lock
from offloader.export.plan import ExportRunner, TopicPlan, before, hold_back
from offloader.export.run import (
    TopicExportReport,
    check_settings,
    commit,
    prepare_topic,
    remove_past,
    target_spec,
)
from offloader.export.settings import ExportSpec
from offloader.export.target import ExportTarget, TargetListing
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import ClusterTopic, PulsarClusterSource

__all__ = ["PREFIX", "cluster_key", "cluster_topic_plan", "run_cluster_export", "split_key"]

PREFIX = "pulsar-cluster:"


def cluster_key(location: str, topic: str) -> str:
    """The watermark key of ``topic`` of the cluster at ``location``."""
    return f"{PREFIX}{location}|{topic}"


def split_key(key: str) -> tuple[str, str]:
    """``(cluster location, topic)`` of a :func:`cluster_key`."""
    location, _, topic = key[len(PREFIX) :].rpartition("|")
    return location, topic


def cluster_topic_plan(key: str, ct: ClusterTopic, start: tuple[int, int]) -> TopicPlan:
    """``(start, last entry of the last offloaded ledger]``, stopping before the first ledger
    after ``start`` whose offload is not complete."""
    chosen = []
    for li in ct.info.ledgers:
        entries = li.entries or 0
        if entries <= 0 or (li.ledger_id, entries - 1) <= start:
            continue
        if not li.offloaded:
            break
        chosen.append((li.ledger_id, entries))
    if not chosen:
        return TopicPlan(key, start, start, ())
    last_id, last_entries = chosen[-1]
    return TopicPlan(key, start, (last_id, last_entries - 1), tuple(i for i, _ in chosen))


def run_cluster_export(
    source: PulsarClusterSource,
    exports: ExportMetadataStore,
    home: Path,
    spec: ExportSpec,
    topics: Sequence[str],
    runner: ExportRunner,
    now_ms: Callable[[], int],
) -> list[TopicExportReport]:
    """Export the cluster's ``topics`` (managed ledgers: partitions, not a partitioned
    topic's base name) to ``spec.target``, exactly once."""
    names = sorted({str(TopicName.parse(t)) for t in topics})
    if not names:
        raise ExportError("export run: name at least one topic")
    keys = {name: cluster_key(source.location, name) for name in names}
    target = ExportTarget(target_spec(spec))
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(
                export_lock(home, spec.target, keys[name], spec.generation, shared=exports)
            )
        found = {ct.topic: ct for ct in source.managed_ledgers(names)}
        missing = [n for n in names if n not in found]
        if missing:
            raise ExportError(
                f"export run: {missing[0]} has no managed ledger in {source.location}"
            )
        marks: dict[str, ExportWatermark | None] = {}
        listings: dict[str, TargetListing] = {}
        removed: dict[str, int] = {}
        plans: list[TopicPlan] = []
        for name in names:
            key = keys[name]
            mark = exports.get_watermark(spec.target, key, spec.generation)
            check_settings(mark, spec, name)
            start = mark.position if mark is not None else (-1, -1)
            marks[key] = mark
            listings[key], removed[key] = prepare_topic(target, name, spec.generation, start)
            plans.append(cluster_topic_plan(key, found[name], start))
        todo = [p for p in plans if not p.empty]
        if todo and spec.until_ms is not None:
            cuts = runner.first_at_or_after(todo, spec.until_ms)
            plans = [p.clipped(before(cuts[p.topic])) if p.topic in cuts else p for p in plans]
            todo = [p for p in plans if not p.empty]
        plans, written, past = hold_back(plans, runner.write(todo) if todo else [])
        remove_past(target, past)
        reports = []
        for plan in plans:
            report = commit(
                exports,
                target,
                spec,
                spec.fingerprint(),
                plan,
                marks[plan.topic],
                listings[plan.topic],
                removed[plan.topic],
                [w for w in written if w.topic == plan.topic],
                now_ms(),
            )
            reports.append(replace(report, topic=split_key(report.topic)[1]))
        return reports
