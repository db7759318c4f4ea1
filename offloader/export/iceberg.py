"""One export run into an Apache Iceberg table: the exactly-once protocol on the driver.

1. load the table (or create it: the export's columns, ``identity(topic)`` + ``day``/``hour`` of
   the time column, sorted by ``ledger_id, entry_id, batch_index``, zstd Parquet); refuse a run
   whose layout settings differ from the table's;
2. read every topic's watermark from the table itself, and plan ``(watermark, last closed
   entry]`` per topic (cut before ``--until``);
3. the engine writes the rows as Parquet files with deterministic names
   (:mod:`offloader.export.naming`) under the table's ``data/`` directory; a topic's plan stops
   before a chunked message whose last chunk is not in a closed ledger yet
   (:func:`~offloader.export.plan.hold_back`), and the files past it are removed;
4. commit all files of the run in ONE Iceberg transaction on the snapshot read in step 2: the
   new columns (schema union by name), the files, and the new watermarks in the snapshot's
   summary (``ledger-offloader.watermark.<topic>``) and the table's properties.

A crash before step 4 leaves files no snapshot references (``export clean-orphans`` removes
them past a minimum age; the next run writes the same names again). When another exporter
commits first, the commit fails (pyiceberg's own retry is off) and the run reloads the table:
a topic whose watermark did not move is committed again on the new snapshot; a topic whose
watermark moved was exported by the other run, so this run commits none of its rows (reported
as ``conflict``). No row is ever committed twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from offloader.crashpoints import crash_point
from offloader.errors import ConfigError, ExportError, IcebergConflict, NotFound
from offloader.export.iceberg_target import (
    RUN_KEY,
    SETTINGS_KEY,
    SORT_COLUMNS,
    IcebergTarget,
    TableWatermark,
    resolve_target,
    settings_fingerprint,
    time_column,
    watermark_properties,
)
from offloader.export.plan import (
    ExportRunner,
    TopicPlan,
    WrittenFile,
    before,
    hold_back,
    topic_plan,
)
from offloader.export.run import remove_past, target_spec
from offloader.export.settings import ExportSpec
from offloader.export.target import ExportTarget
from offloader.logs import get_logger
from offloader.metadata.base import MetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import PulsarClusterSource

if TYPE_CHECKING:  # pyiceberg and pyarrow load on first use, not with the facade
    import pyarrow as pa

    from offloader.export.iceberg_catalog import CatalogPool, IcebergCatalog, IcebergTable
    from offloader.export.iceberg_files import NewFile

__all__ = [
    "IcebergRunner",
    "IcebergTopicReport",
    "iceberg_target",
    "open_table",
    "run_iceberg_export",
]

log = get_logger(__name__)

Position = tuple[int, int]
#: commit attempts before a run gives up on a table other writers keep changing
MAX_ATTEMPTS = 8


class IcebergRunner(ExportRunner, Protocol):
    """The engine of an Iceberg export: an :class:`ExportRunner` that also says the columns
    its files have, and writes under a directory given once the table is known."""

    def arrow_schema(self) -> pa.Schema: ...

    def retarget(self, data_url: str) -> None: ...


@dataclass(frozen=True)
class IcebergTopicReport:
    """What one run did for one topic of an Iceberg table."""

    topic: str
    table: str
    previous: Position
    watermark: Position
    files: int
    rows: int
    invalid_rows: int
    bytes: int
    snapshot_id: int | None
    metadata_location: str
    attempts: int
    #: set when another exporter committed this topic's range first (none of this run's rows
    #: of it were committed; the table holds the other run's)
    conflict: str | None = None
    publish_time_ms: int | None = None

    @property
    def target(self) -> str:
        return self.table


def iceberg_target(spec: ExportSpec, home: Path | str) -> IcebergTarget:
    return resolve_target(
        spec.target,
        home,
        catalog=spec.catalog,
        warehouse=spec.warehouse,
        endpoint_url=spec.endpoint_url,
        region=spec.region,
    )


def _fingerprint(spec: ExportSpec) -> str:
    return settings_fingerprint(spec.partition_by, spec.time_field, spec.value_format, spec.flatten)


def open_table(
    catalog: IcebergCatalog,
    spec: ExportSpec,
    schema: Callable[[], pa.Schema],
    *,
    kafka: bool = False,
) -> IcebergTable:
    """The export's table, created on first use; its layout settings checked. A Kafka table
    is partitioned by the record ``timestamp`` and sorted by ``partition, offset``."""
    table = catalog.load()
    fingerprint = _fingerprint(spec) + (" kafka" if kafka else "")
    if table is None:
        transform = "hour" if spec.partition_by == "dt,hr" else "day"
        if kafka:
            time_path: tuple[str, ...] = ("timestamp",)
            sort: tuple[str, ...] = ("partition", "offset")
        else:
            time_path, sort = time_column(spec.time_field, spec.flatten), SORT_COLUMNS
        table = catalog.create(schema(), time_path, transform, fingerprint, sort)
    stored = table.properties.get(SETTINGS_KEY)
    if stored is not None and stored != fingerprint:
        raise ExportError(
            f"{catalog.target.url} was created with other export settings ({stored}); "
            "export to a new table to change them"
        )
    # the run decides what a conflict means (pyiceberg's retry would re-append blindly)
    table.ensure_properties({"commit.retry.num-retries": "0"})
    return table


def run_iceberg_export(
    meta: MetadataStore,
    home: Path | str,
    spec: ExportSpec,
    topics: Sequence[str],
    runner: IcebergRunner,
    *,
    kafka: KafkaMetadataStore | None = None,
    foreign: Collection[str] = (),
    catalogs: CatalogPool | None = None,
    cluster: PulsarClusterSource | None = None,
) -> list[IcebergTopicReport]:
    """One run. ``kafka``: the topics are Kafka topics (their remote segments), each partition
    a stream of its own keyed ``kafka:<topic>:<partition>`` (positions ``(partition, offset)``).
    ``foreign``: topics another broker owns (a shared store), exported only as far as their
    ledgers are offloaded (:func:`~offloader.export.plan.topic_plan`). ``catalogs``: the
    catalogs the caller keeps open across runs (default: the run opens and closes its own).
    ``cluster``: the topics are a real Pulsar cluster's (managed ledgers), exported up to the
    last ledger whose offload is complete, each watermark keyed by the cluster and the topic
    (:func:`~offloader.export.cluster.cluster_key`)."""
    if kafka is None:
        names = sorted({str(TopicName.parse(t)) for t in topics})
    else:
        names = sorted(set(topics))
        if spec.time_field != "publish_time":
            raise ConfigError(
                "Kafka exports to Iceberg partition by the record timestamp "
                "(--time-field publish_time)"
            )
    if not names:
        raise ExportError("export run: name at least one topic")
    from offloader.export.iceberg_catalog import open_catalog

    target = iceberg_target(spec, home)
    catalog = catalogs.get(target) if catalogs is not None else open_catalog(target)
    done = False
    try:
        table = open_table(catalog, spec, runner.arrow_schema, kafka=kafka is not None)
        base = table.watermarks()
        if cluster is not None:
            plans = _cluster_plans(cluster, names, base)
        elif kafka is None:
            plans = [
                topic_plan(
                    n, meta.list_ledgers(n), _position(base.get(n)), offloaded_only=n in foreign
                )
                for n in names
            ]
        else:
            plans = _kafka_plans(kafka, names, base)
        todo = [p for p in plans if not p.empty]
        if todo and spec.until_ms is not None:
            cuts = runner.first_at_or_after(todo, spec.until_ms)
            plans = [p.clipped(before(cuts[p.topic])) if p.topic in cuts else p for p in plans]
            todo = [p for p in plans if not p.empty]
        runner.retarget(table.data_url)
        plans, written, past = hold_back(plans, runner.write(todo) if todo else [])
        if past:  # files written past a held chunked message: not committed, removed
            remove_past(ExportTarget(target_spec(with_target(spec, table.data_url))), past)
        reports = _commit(table, runner.arrow_schema(), plans, base, written)
        done = True
        if cluster is not None:
            from offloader.export.cluster import split_key

            reports = [replace(r, topic=split_key(r.topic)[1]) for r in reports]
        return reports
    finally:
        if catalogs is None:
            catalog.close()
        elif not done:  # the next run opens the catalog anew
            catalogs.discard(target)


def _cluster_plans(
    source: PulsarClusterSource, names: Sequence[str], base: dict[str, TableWatermark]
) -> list[TopicPlan]:
    """Per managed ledger: ``(watermark, last entry of the last offloaded ledger]``."""
    from offloader.export.cluster import cluster_key, cluster_topic_plan

    found = {ct.topic: ct for ct in source.managed_ledgers(list(names))}
    missing = [n for n in names if n not in found]
    if missing:
        raise NotFound(f"export run: {missing[0]} has no managed ledger in {source.location}")
    plans = []
    for name in names:
        key = cluster_key(source.location, name)
        plans.append(cluster_topic_plan(key, found[name], _position(base.get(key))))
    return plans


def _kafka_plans(
    kmeta: KafkaMetadataStore, names: Sequence[str], base: dict[str, TableWatermark]
) -> list[TopicPlan]:
    """Per partition: ``(watermark, the partition's remote watermark]``."""
    from offloader.export.kafka import kafka_key

    plans = []
    for name in names:
        partitions = kmeta.list_partitions(name)
        if not partitions:
            raise NotFound(f"Kafka topic {name} has no partition in the metadata")
        for p in partitions:
            key = kafka_key(name, p.partition)
            mark = base.get(key)
            start = mark.position if mark is not None else (p.partition, -1)
            end = max(start, (p.partition, p.watermark))
            plans.append(TopicPlan(key, start, end, (p.partition,)))
    return plans


def _position(mark: TableWatermark | None) -> Position:
    return mark.position if mark is not None else (-1, -1)


def _advanced(
    plan: TopicPlan, mark: TableWatermark | None, files: Sequence[WrittenFile]
) -> TableWatermark:
    publish = [f.max_publish_ms for f in files if f.max_publish_ms is not None]
    if mark is not None and mark.publish_time_ms is not None:
        publish.append(mark.publish_time_ms)
    return TableWatermark(plan.topic, max(plan.end, plan.start), max(publish) if publish else None)


def _commit(
    table: IcebergTable,
    schema: pa.Schema,
    plans: Sequence[TopicPlan],
    base: dict[str, TableWatermark],
    written: Sequence[WrittenFile],
) -> list[IcebergTopicReport]:
    run_id = uuid.uuid4().hex
    by_topic = {p.topic: [w for w in written if w.topic == p.topic] for p in plans}
    pending = [p for p in plans if not p.empty]
    conflicts: dict[str, str] = {}
    attempts = 0
    while pending:
        attempts += 1
        marks = dict(base)
        for plan in pending:
            marks[plan.topic] = _advanced(plan, base.get(plan.topic), by_topic[plan.topic])
        props = watermark_properties(marks)
        files = [_new_file(table, f) for p in pending for f in by_topic[p.topic]]
        try:
            crash_point("iceberg.before_commit")
            table.commit_files(files, schema, {RUN_KEY: run_id, **props}, props)
            crash_point("iceberg.after_commit")
            log.info(
                "iceberg.committed",
                table=table.target.url,
                snapshot=table.snapshot_id,
                files=len(files),
                attempt=attempts,
            )
            break
        except IcebergConflict as exc:
            if attempts >= MAX_ATTEMPTS:
                raise IcebergConflict(
                    f"{table.target.url}: gave up after {attempts} commit attempts, other "
                    f"writers kept committing first ({exc}); nothing of this run was "
                    "committed, run it again"
                ) from None
            table.refresh()
            now = table.watermarks()
            still = []
            for plan in pending:
                if _position(now.get(plan.topic)) == plan.start:
                    still.append(plan)
                else:
                    moved = _position(now.get(plan.topic))
                    conflicts[plan.topic] = (
                        f"another exporter committed {plan.topic} up to {moved[0]}:{moved[1]} "
                        "first; none of this run's rows of it were committed"
                    )
                    log.warning("iceberg.conflict", table=table.target.url, topic=plan.topic)
            pending, base = still, now
            log.info("iceberg.commit_retry", table=table.target.url, attempt=attempts)
    return [
        _report(table, plan, by_topic[plan.topic], conflicts.get(plan.topic), attempts)
        for plan in plans
    ]


def _new_file(table: IcebergTable, f: WrittenFile) -> NewFile:
    """The file as the commit takes it: its URI under the table's ``data/``, its size and the
    footer its task reported (the commit reads no file back)."""
    from offloader.export.iceberg_files import NewFile

    return NewFile(f"{table.location}/data/{f.path}", f.size, f.footer)


def _report(
    table: IcebergTable,
    plan: TopicPlan,
    files: Sequence[WrittenFile],
    conflict: str | None,
    attempts: int,
) -> IcebergTopicReport:
    if conflict is not None or plan.empty:
        files = []
    mark = table.watermarks().get(plan.topic)
    return IcebergTopicReport(
        plan.topic,
        table.target.url,
        plan.start,
        _position(mark),
        len(files),
        sum(f.rows for f in files),
        sum(f.invalid_rows for f in files),
        sum(f.size for f in files),
        table.snapshot_id,
        table.metadata_location,
        attempts,
        conflict,
        None if mark is None else mark.publish_time_ms,
    )


def with_target(spec: ExportSpec, data_url: str) -> ExportSpec:
    """The spec whose files go to ``data_url`` (what the engine writes to)."""
    return replace(spec, target=data_url, catalog=None, warehouse=None)
