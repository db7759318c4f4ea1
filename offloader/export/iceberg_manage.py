"""Upkeep and status of an export's Iceberg table: ``export status`` (the table's snapshot, its
``metadata_location``, a topic's watermark and lag, and the current snapshot's data files gone
from the warehouse), ``export reset`` (the watermark moved back and the topic's rows after it
deleted, in one commit), ``export expire-snapshots`` and ``export clean-orphans``.

A real Pulsar cluster's topic (``--pulsar-metadata``) is keyed in the table by the cluster and
the topic (:func:`~offloader.export.cluster.cluster_key`), its lag counted from its
``ManagedLedgerInfo``.

Reset deletes the topic's rows after the new watermark with Iceberg's copy-on-write delete (a
data file that holds rows on both sides is rewritten with the earlier ones only), and sets the
watermark properties in the same commit: a reader never sees the rows gone with the old
watermark, nor the new watermark with the rows still there. The older snapshots keep the
removed rows until they are expired. The new publish time is the latest of the rows kept.

Expiring keeps the current snapshot (which carries every topic's watermark) and the newest
``retain_last``. Cleaning lists the files under the table's location and removes those that no
kept snapshot and no kept metadata version refers to (a crashed run's data files, metadata a
lost commit wrote, manifests of expired snapshots) and that are older than a minimum age, so a
run that is writing right now (its files not committed yet) loses nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offloader.errors import ConfigError, NotFound, StoreError
from offloader.export.iceberg_target import IcebergTarget, TableWatermark, path_of
from offloader.export.kafka import split_key
from offloader.export.manage import cluster_lag, lag_time_ms, parse_reset_point, pulsar_lag
from offloader.export.plan import before
from offloader.logs import get_logger
from offloader.metadata.base import MetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import ClusterTopic

if TYPE_CHECKING:  # pyiceberg loads on first use, not with the facade
    import pyarrow as pa

    from offloader.export.iceberg_catalog import IcebergCatalog, IcebergTable

__all__ = [
    "ExpireReport",
    "IcebergOrphanReport",
    "IcebergResetReport",
    "IcebergStatus",
    "clean_orphans",
    "expire_snapshots",
    "iceberg_status",
    "metadata_files",
    "reset_iceberg",
]

log = get_logger(__name__)

Position = tuple[int, int]


@dataclass(frozen=True)
class IcebergStatus:
    topic: str
    table: str
    catalog: str
    snapshot_id: int | None
    metadata_location: str
    watermark: Position
    publish_time_ms: int | None
    total_records: int
    total_data_files: int
    snapshots: int
    last_closed: Position
    lag_entries: int
    lag_ms: int | None
    #: data files the current snapshot refers to that are not in the warehouse (full URIs)
    missing_data_files: tuple[str, ...] = ()


def _load(target: IcebergTarget) -> tuple[IcebergCatalog, IcebergTable]:
    from offloader.export.iceberg_catalog import open_catalog

    catalog = open_catalog(target)
    table = catalog.load()
    if table is None:
        catalog.close()
        raise NotFound(f"Iceberg table {target.url} does not exist in {target.catalog_display}")
    return catalog, table


def iceberg_status(
    meta: MetadataStore,
    target: IcebergTarget,
    topic: str,
    now_ms: int,
    kafka: KafkaMetadataStore | None = None,
    cluster: tuple[str, ClusterTopic] | None = None,
) -> IcebergStatus:
    """``topic``: a Pulsar topic, or a Kafka partition's key ``kafka:<topic>:<partition>``
    (``kafka``: the Kafka tier's metadata). ``cluster``: ``(location, managed ledger)`` of a
    real Pulsar cluster's topic (``--pulsar-metadata``): its watermark keyed by the cluster,
    its lag counted from the ``ManagedLedgerInfo``."""
    is_kafka = cluster is None and kafka is not None and topic.startswith("kafka:")
    name = topic if is_kafka else str(TopicName.parse(topic))
    if is_kafka:
        split_key(name)  # kafka:<topic>:<partition>, checked before the table is loaded
    key = name if cluster is None else _cluster_key(cluster[0], name)
    catalog, table = _load(target)
    try:
        mark = table.watermarks().get(key)
        summary = table.current_summary()
        snapshots = len(table.snapshots())
        data_files = table.data_file_paths()
        data_url = table.data_url
    finally:
        catalog.close()
    missing = _missing(target, data_url, data_files)
    position = mark.position if mark is not None else (-1, -1)
    publish = mark.publish_time_ms if mark is not None else None
    if cluster is not None:
        last_closed, lag, _spans = cluster_lag(cluster[1], position)
    elif is_kafka:
        assert kafka is not None
        last_closed, lag = _kafka_lag(kafka, name, position)
    else:
        last_closed, lag = pulsar_lag(meta, name, position)
    lag_ms = lag_time_ms(lag, publish, now_ms)
    return IcebergStatus(
        name,
        target.url,
        target.catalog_display,
        table.snapshot_id,
        table.metadata_location,
        position,
        publish,
        int(summary.get("total-records", 0)),
        int(summary.get("total-data-files", 0)),
        snapshots,
        last_closed,
        lag,
        lag_ms,
        missing,
    )


def _cluster_key(location: str, name: str) -> str:
    from offloader.export.cluster import cluster_key

    return cluster_key(location, name)


@dataclass(frozen=True)
class IcebergResetReport:
    topic: str
    table: str
    previous: Position
    watermark: Position
    removed_rows: int
    snapshot_id: int | None
    metadata_location: str


def reset_iceberg(
    target: IcebergTarget, topic: str, to: str, cluster: str | None = None
) -> IcebergResetReport:
    """Move ``topic``'s watermark in the table back to ``to`` (``ledger:entry[:batch]``: that
    entry and everything after it is exported again; or a time: every row published at or
    after it), deleting the topic's rows after it in the same commit. ``cluster``: the
    location of the real Pulsar cluster whose topic this is (``--pulsar-metadata``)."""
    if topic.startswith("kafka:"):
        raise ConfigError(
            "export reset of an Iceberg table: Pulsar topics only (a Kafka partition's "
            "watermark is moved back by exporting to a new table)"
        )
    point = parse_reset_point(to)
    name = str(TopicName.parse(topic))
    key = name if cluster is None else _cluster_key(cluster, name)
    catalog, table = _load(target)
    try:
        mark = table.watermarks().get(key)
        if mark is None:
            raise NotFound(f"{name} was never exported to {target.url}")
        rows = table.topic_positions(name)
        ledgers = rows.column("ledger_id").to_pylist()
        entries = rows.column("entry_id").to_pylist()
        times = _millis(rows.column("publish_time"))
        if isinstance(point, tuple):
            new = before(point)
        else:
            later = [
                (lid, eid)
                for lid, eid, t in zip(ledgers, entries, times, strict=True)
                if t is not None and t >= point
            ]
            new = before(min(later)) if later else mark.position
        new = min(new, mark.position)
        kept = [(lid, eid) <= new for lid, eid in zip(ledgers, entries, strict=True)]
        removed = kept.count(False)
        kept_times = [t for t, k in zip(times, kept, strict=True) if k and t is not None]
        publish = max(kept_times) if kept_times and new > (-1, -1) else None
        lowered = TableWatermark(key, new, publish)
        table.reset_topic(name, lowered)
        log.info("iceberg.reset", table=target.url, topic=name, watermark=new, rows=removed)
        return IcebergResetReport(
            name,
            target.url,
            mark.position,
            new,
            removed,
            table.snapshot_id,
            table.metadata_location,
        )
    finally:
        catalog.close()


def _millis(column: pa.ChunkedArray) -> list[int | None]:
    """A timestamp column's values as epoch milliseconds."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_timestamp(kind):
        column = column.cast(pa.timestamp("ms", tz=kind.tz), safe=False)
    return [None if v is None else int(v) for v in column.cast(pa.int64()).to_pylist()]


def _missing(target: IcebergTarget, data_url: str, uris: list[str]) -> tuple[str, ...]:
    """The ``uris`` (data files of the current snapshot) that one listing of the table's
    ``data/`` directory does not show."""
    if not uris:
        return ()
    import pyarrow.fs as pafs

    from offloader.export.target import TargetSpec, open_filesystem

    spec = TargetSpec(data_url, target.endpoint_url, target.region)
    selector = pafs.FileSelector(spec.root, recursive=True, allow_not_found=True)
    try:
        there = {i.path for i in open_filesystem(spec).get_file_info(selector)}
    except OSError as exc:
        raise StoreError(f"{target.url}: cannot list {data_url}: {exc}") from None
    return tuple(sorted(u for u in uris if path_of(u) not in there))


def _kafka_lag(kafka: KafkaMetadataStore, key: str, position: Position) -> tuple[Position, int]:
    """The partition's remote watermark as a position, and the offsets after ``position``."""
    name, partition = split_key(key)
    found = [p for p in kafka.list_partitions(name) if p.partition == partition]
    if not found:
        raise NotFound(f"Kafka partition {name}-{partition} is not in the metadata")
    last = found[0].watermark
    done = position[1] if position[0] == partition else -1
    return (partition, last), max(0, last - done)


@dataclass(frozen=True)
class ExpireReport:
    table: str
    expired: tuple[int, ...]
    kept: int
    snapshot_id: int | None
    metadata_location: str


def expire_snapshots(
    target: IcebergTarget, older_than_s: int, retain_last: int = 1, now_ms: int | None = None
) -> ExpireReport:
    """Expire the snapshots committed more than ``older_than_s`` ago (wall clock: Iceberg's
    snapshot times), keeping the newest ``retain_last`` and the current one."""
    if older_than_s < 0:
        raise ConfigError(f"--older-than {older_than_s}s: must not be negative")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    catalog, table = _load(target)
    try:
        ids = table.expire_snapshots(now - older_than_s * 1000, retain_last)
        log.info("iceberg.snapshots_expired", table=target.url, count=len(ids))
        return ExpireReport(
            target.url,
            tuple(ids),
            len(table.snapshots()),
            table.snapshot_id,
            table.metadata_location,
        )
    finally:
        catalog.close()


@dataclass(frozen=True)
class IcebergOrphanReport:
    table: str
    removed: tuple[str, ...]  # full URIs (or, with dry_run, what would be removed)
    kept_young: int  # unreferenced, but younger than the minimum age
    referenced: int
    dry_run: bool


def clean_orphans(
    target: IcebergTarget,
    min_age_s: int,
    *,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> IcebergOrphanReport:
    """Remove the files under the table's location that nothing refers to, older than
    ``min_age_s`` (a run in progress has not committed its files yet: keep the age above the
    longest run)."""
    if min_age_s < 0:
        raise ConfigError(f"--older-than {min_age_s}s: must not be negative")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    catalog, table = _load(target)
    try:
        referenced = {path_of(u) for u in table.referenced_files()}
        location = table.location
    finally:
        catalog.close()
    import pyarrow.fs as pafs

    from offloader.export.target import TargetSpec, open_filesystem

    url = location[len("file://") :] if location.startswith("file://") else location
    spec = TargetSpec(url, target.endpoint_url, target.region)
    fs = open_filesystem(spec)
    selector = pafs.FileSelector(spec.root, recursive=True, allow_not_found=True)
    try:
        infos = fs.get_file_info(selector)
    except OSError as exc:
        raise StoreError(f"{target.url}: cannot list {location}: {exc}") from None
    removed: list[str] = []
    young = 0
    for info in infos:
        if info.type != pafs.FileType.File or info.path in referenced:
            continue
        mtime = info.mtime
        age_ms = now - int(mtime.timestamp() * 1000) if mtime is not None else now
        if age_ms < min_age_s * 1000:
            young += 1
            continue
        uri = (f"{spec.scheme}://" if spec.is_remote else "file://") + info.path
        if not dry_run:
            try:
                fs.delete_file(info.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"{target.url}: cannot delete {uri}: {exc}") from None
        removed.append(uri)
    log.info("iceberg.orphans", table=target.url, removed=len(removed), dry_run=dry_run)
    return IcebergOrphanReport(target.url, tuple(sorted(removed)), young, len(referenced), dry_run)


def metadata_files(target: IcebergTarget) -> list[str]:
    """The URLs of the files in the ``metadata/`` directory of the table's default location
    in its warehouse (``<warehouse>/<namespace>/<table>/metadata``): where a catalog that
    lost the table finds it again (``metadata rebuild``). Empty when there is none."""
    import pyarrow.fs as pafs

    from offloader.export.target import TargetSpec, open_filesystem

    location = f"{target.default_location}/metadata"
    url = location[len("file://") :] if location.startswith("file://") else location
    spec = TargetSpec(url, target.endpoint_url, target.region)
    fs = open_filesystem(spec)
    selector = pafs.FileSelector(spec.root, recursive=False, allow_not_found=True)
    try:
        infos = fs.get_file_info(selector)
    except OSError as exc:
        raise StoreError(f"{target.url}: cannot list {location}: {exc}") from None
    prefix = f"{spec.scheme}://" if spec.is_remote else "file://"
    return sorted(prefix + i.path for i in infos if i.type == pafs.FileType.File)
