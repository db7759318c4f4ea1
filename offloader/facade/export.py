"""The facade's exports (spec/export.md): Parquet exports and Iceberg tables, run by hand or by
the service loop after each pass (continuous mode), their status, reset and table upkeep."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from offloader.api_types import (
    TickReport,
)
from offloader.errors import (
    ConfigError,
    ExportError,
    OffloaderError,
)
from offloader.facade.service import ServiceFacade
from offloader.logs import get_logger
from offloader.selection import TopicSelection

if TYPE_CHECKING:
    from offloader.export.iceberg import IcebergTopicReport
    from offloader.export.iceberg_catalog import CatalogPool
    from offloader.export.iceberg_manage import (
        ExpireReport,
        IcebergOrphanReport,
        IcebergResetReport,
        IcebergStatus,
    )
    from offloader.export.iceberg_target import IcebergTarget
    from offloader.export.manage import (
        ExportStatus,
        ResetReport,
    )
    from offloader.export.run import TopicExportReport
    from offloader.export.settings import ExportJob, ExportSpec
    from offloader.facade.cluster import PulsarCluster
    from offloader.spark.export_kafka import KafkaRunner

log = get_logger(__name__)
#: a Kafka export runner class (Parquet's KafkaRunner or Iceberg's IcebergKafkaRunner)
R = TypeVar("R", bound="KafkaRunner")


class ExportFacade(ServiceFacade):
    """Exports, and the service loop that runs them (part of :class:`offloader.api.Offloader`)."""

    def run_service(
        self,
        *,
        interval_seconds: float = 30.0,
        once: bool = False,
        should_stop: Callable[[], bool] | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
        exports: Iterable[ExportJob] = (),
        on_export: Callable[[Sequence[TopicExportReport | IcebergTopicReport]], None] | None = None,
    ) -> None:
        """The service loop; after each pass, the ``exports`` run (continuous mode: a failed
        export is logged and retried next pass, the loop carries on)."""
        from offloader.service import run as run_service_loop

        stop = should_stop or (lambda: False)
        jobs = list(exports)

        def one() -> None:
            report = self.service_tick(should_stop=stop)
            if on_tick is not None:
                on_tick(report)
            for job in jobs:
                if stop():
                    return
                try:
                    done: Sequence[TopicExportReport | IcebergTopicReport]
                    if job.spec.is_iceberg:
                        done = self.export_iceberg_run(job.topics, job.spec, engine=job.engine)
                    else:
                        done = self.export_run(job.topics, job.spec, engine=job.engine)
                except OffloaderError as exc:
                    log.warning("export.failed", target=job.spec.target, error=str(exc))
                    continue
                self._record_export_lag(job, done)
                if on_export is not None:
                    on_export(done)

        run_service_loop(one, interval_seconds=interval_seconds, once=once, should_stop=stop)

    def _record_export_lag(
        self, job: ExportJob, done: Sequence[TopicExportReport | IcebergTopicReport]
    ) -> None:
        """Publish each topic's export lag (``offloader_export_lag_*``, spec/metrics.md) from
        the watermark the run committed, computed as ``export status`` computes it."""
        from offloader.export.manage import lag_time_ms, pulsar_lag

        metrics = self._rt.metrics
        if not metrics.enabled:
            return
        now = self._rt.now_ms()
        for report in done:
            _, lag = pulsar_lag(self._rt.meta, report.topic, report.watermark)
            ms = lag_time_ms(lag, report.publish_time_ms, now)
            seconds = None if ms is None else ms / 1000
            metrics.set_export_lag(report.topic, job.spec.target, lag, seconds)

    def _spark_session(self, spark: object | None) -> object:
        """``spark`` when the caller gave one, else this facade's own loopback session
        (made on first use and kept for later exports)."""
        if spark is not None:
            return spark
        if self._spark is None:
            from offloader.spark import local_session

            self._spark = local_session("ledger-offloader-export")
        return self._spark

    # --- exports to Parquet (spec/export.md) ----------------------------------------------
    def export_run(
        self,
        topics: Iterable[str],
        spec: ExportSpec,
        *,
        spark: object | None = None,
        engine: str = "spark",
        kafka: bool = False,
        cluster: PulsarCluster | None = None,
    ) -> list[TopicExportReport]:
        """Export each topic's messages after its watermark, up to its last closed ledger (or
        ``spec.until_ms``), to Parquet under ``spec.target``, exactly once (spec/export.md).
        ``spark``: a SparkSession (default: a ``local[2]`` session made on first use);
        ``engine="local"`` runs the same tasks in this process, without Spark. ``kafka``: the
        topics are Kafka topics (their remote segments; a watermark per partition).
        ``cluster``: the topics are a real Pulsar cluster's (:mod:`offloader.export.cluster`:
        its offloaded ledgers, the watermark keyed by the cluster and the topic; the
        watermarks are kept in this home's export metadata)."""
        from offloader.export.run import run_export
        from offloader.spark.export_job import LocalRunner, SparkRunner

        _not_iceberg(spec.target, "export_iceberg_run")
        if engine not in ("spark", "local"):
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        if cluster is not None:
            if kafka:
                raise ConfigError("export run: --kafka and --pulsar-metadata exclude each other")
            return self._export_cluster(cluster, list(topics), spec, spark, engine)
        if kafka:
            return self._export_kafka(self._kafka_topics(topics), spec, spark, engine)
        runner: SparkRunner
        if engine == "local":
            runner = LocalRunner(str(self._rt.home), spec, metadata_url=self._rt.metadata_url)
        elif engine == "spark":
            spark = self._spark_session(spark)
            runner = SparkRunner(
                spark, str(self._rt.home), spec, metadata_url=self._rt.metadata_url
            )
        else:
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        return run_export(
            self._rt.meta,
            self._export_meta(),
            self._rt.home,
            spec,
            self._pulsar_topics(topics),
            runner,
            self._rt.now_ms,
            foreign=self._foreign_topics(),
        )

    def _export_cluster(
        self,
        cluster: PulsarCluster,
        topics: list[str],
        spec: ExportSpec,
        spark: object | None,
        engine: str,
    ) -> list[TopicExportReport]:
        from offloader.export.cluster import run_cluster_export
        from offloader.spark.export_job import ClusterLocalRunner, ClusterSparkRunner

        selection = TopicSelection.parse_all(topics) if topics else None
        names: list[str] = []
        if selection is not None and selection.names_only:
            names = [n for t in selection.names for n in cluster.partitions(t)]
        elif selection is not None:
            names = cluster.select(selection)
        runner: ClusterSparkRunner | ClusterLocalRunner
        if engine == "local":
            runner = ClusterLocalRunner(
                str(self._rt.home), spec, cluster.location, **cluster.store_overrides()
            )
        else:
            runner = ClusterSparkRunner(
                self._spark_session(spark),
                str(self._rt.home),
                spec,
                cluster.location,
                **cluster.store_overrides(),
            )
        return run_cluster_export(
            cluster.source, self._export_meta(), self._rt.home, spec, names, runner, self._rt.now_ms
        )

    def _pulsar_topics(self, topics: Iterable[str]) -> list[str]:
        """What ``export run TOPICS...`` names (each argument in the one selection form of
        :mod:`offloader.selection`): the names as given, then the topics of this home's
        metadata a namespace or a regex selects."""
        texts = list(topics)
        if not texts:
            return []
        selection = TopicSelection.parse_all(texts)
        if selection.names_only:
            return list(selection.names)
        return _some(selection, selection.expand(t.name for t in self._rt.meta.list_topics()))

    def _kafka_topics(self, topics: Iterable[str]) -> list[str]:
        """Like :meth:`_pulsar_topics`, for Kafka topics (the tier's topics; no namespaces)."""
        texts = list(topics)
        if not texts:
            return []
        selection = TopicSelection.parse_all(texts).require_flat()
        if selection.names_only:
            return list(selection.names)
        listed = sorted({p.topic for p in self.kafka().ctx.meta.list_partitions()})
        return _some(selection, selection.expand(listed), "Kafka topic")

    def _foreign_topics(self) -> set[str]:
        """On a shared store, the topics another broker owns (their ledgers that are not
        offloaded are on that broker's disk: an export stops before them)."""
        owners = self._rt.cluster.list_topic_owners() if self._rt.cluster.shared else {}
        return {t for t, o in owners.items() if o.broker_id != self._rt.me}

    def _kafka_runner(self, cls: type[R], spec: ExportSpec, spark: object | None, engine: str) -> R:
        """A Kafka export runner (Parquet or Iceberg) on this home's store and metadata, with
        the Spark session when ``engine`` is spark (else the local engine)."""
        if engine == "spark":
            spark = self._spark_session(spark)
        props = self._rt.driver.properties
        return cls(
            spark if engine == "spark" else None,
            str(self._rt.home),
            spec,
            store_url=self._rt.store.url,
            endpoint_url=props.get("endpoint") or None,
            region=props.get("region") or None,
            metadata_url=self._rt.metadata_url,
        )

    def _export_kafka(
        self, topics: list[str], spec: ExportSpec, spark: object | None, engine: str
    ) -> list[TopicExportReport]:
        from offloader.export.kafka import run_kafka_export
        from offloader.spark.export_kafka import KafkaRunner

        runner = self._kafka_runner(KafkaRunner, spec, spark, engine)
        return run_kafka_export(
            self.kafka().ctx.meta,
            self._export_meta(),
            self._rt.home,
            spec,
            topics,
            runner,
            self._rt.now_ms,
        )

    def export_status(
        self,
        topic: str,
        target: str,
        *,
        generation: int = 1,
        endpoint_url: str | None = None,
        region: str | None = None,
        cluster: PulsarCluster | None = None,
    ) -> ExportStatus:
        """The export's watermark, its committed files and its lag (entries and time); with
        ``cluster``, of that real Pulsar cluster's topic (one managed ledger)."""
        from offloader.export.manage import export_status
        from offloader.export.settings import normalize_target
        from offloader.export.target import TargetSpec

        _not_iceberg(target, "export_iceberg_status")
        of_cluster = (
            None if cluster is None else (cluster.location, cluster.source.managed_ledger(topic))
        )
        spec = TargetSpec(normalize_target(target), endpoint_url, region)
        kafka_meta = self.kafka().ctx.meta if topic.startswith("kafka:") else None
        return export_status(
            self._rt.meta,
            self._export_meta(),
            spec,
            topic,
            generation,
            self._rt.now_ms(),
            kafka_meta,
            of_cluster,
        )

    def export_reset(
        self,
        topic: str,
        target: str,
        to: str,
        *,
        generation: int = 1,
        endpoint_url: str | None = None,
        region: str | None = None,
        cluster: str | None = None,
    ) -> ResetReport:
        """Move the watermark back to ``to`` (``ledger:entry[:batch]`` or a time) and remove
        exactly the files after it, so that the next run writes them again. ``cluster``: the
        metadata-store URL of the real Pulsar cluster whose topic this is
        (``--pulsar-metadata``; not connected to: the watermark is keyed by its location)."""
        from offloader.export.manage import parse_reset_point, reset_export
        from offloader.export.settings import normalize_target
        from offloader.export.target import TargetSpec
        from offloader.pulsar_cluster import parse_metadata_url

        _not_iceberg(target, "export_iceberg_reset")
        spec = TargetSpec(normalize_target(target), endpoint_url, region)
        return reset_export(
            self._export_meta(),
            self._rt.home,
            spec,
            topic,
            generation,
            parse_reset_point(to),
            self._rt.now_ms,
            None if cluster is None else parse_metadata_url(cluster).canonical,
        )

    # --- exports to Iceberg tables (spec/export.md, "Iceberg tables") --------------------------
    def export_iceberg_run(
        self,
        topics: Iterable[str],
        spec: ExportSpec,
        *,
        spark: object | None = None,
        engine: str = "spark",
        kafka: bool = False,
        cluster: PulsarCluster | None = None,
    ) -> list[IcebergTopicReport]:
        """Export each topic's messages after the watermark the table carries into the Iceberg
        table ``spec.target`` (``iceberg://NAMESPACE.TABLE``), all files of the run in one
        Iceberg commit that also carries the new watermarks. ``engine="local"``: the same
        tasks in this process, without Spark. ``kafka``: Kafka topics (their remote segments;
        a watermark per partition, ``kafka:<topic>:<partition>``)."""
        from offloader.export.iceberg import run_iceberg_export
        from offloader.spark.iceberg_job import (
            IcebergKafkaRunner,
            IcebergLocalRunner,
            IcebergSparkRunner,
        )

        if not spec.is_iceberg:
            raise ConfigError(f"--to {spec.target}: not an iceberg://NAMESPACE.TABLE target")
        runner: IcebergLocalRunner | IcebergSparkRunner | IcebergKafkaRunner
        if cluster is not None:
            return self._export_cluster_iceberg(cluster, list(topics), spec, spark, engine)
        if kafka:
            runner = self._kafka_runner(IcebergKafkaRunner, spec, spark, engine)
            return run_iceberg_export(
                self._rt.meta,
                self._rt.home,
                spec,
                self._kafka_topics(topics),
                runner,
                kafka=self.kafka().ctx.meta,
                catalogs=self._catalog_pool(),
            )
        # a shared PostgreSQL store: the tasks read every broker's ledgers through its URL
        url = self._rt.metadata_url
        if engine == "local":
            runner = IcebergLocalRunner(str(self._rt.home), spec, metadata_url=url)
        elif engine == "spark":
            spark = self._spark_session(spark)
            runner = IcebergSparkRunner(spark, str(self._rt.home), spec, metadata_url=url)
        else:
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        return run_iceberg_export(
            self._rt.meta,
            self._rt.home,
            spec,
            self._pulsar_topics(topics),
            runner,
            foreign=self._foreign_topics(),
            catalogs=self._catalog_pool(),
        )

    def _export_cluster_iceberg(
        self,
        cluster: PulsarCluster,
        topics: list[str],
        spec: ExportSpec,
        spark: object | None,
        engine: str,
    ) -> list[IcebergTopicReport]:
        from offloader.export.iceberg import run_iceberg_export
        from offloader.spark.iceberg_job import (
            IcebergClusterLocalRunner,
            IcebergClusterSparkRunner,
        )

        names = [n for t in topics for n in cluster.partitions(t)]
        runner: IcebergClusterLocalRunner | IcebergClusterSparkRunner
        if engine == "local":
            runner = IcebergClusterLocalRunner(
                str(self._rt.home), spec, cluster.location, **cluster.store_overrides()
            )
        elif engine == "spark":
            runner = IcebergClusterSparkRunner(
                self._spark_session(spark),
                str(self._rt.home),
                spec,
                cluster.location,
                **cluster.store_overrides(),
            )
        else:
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        return run_iceberg_export(
            self._rt.meta,
            self._rt.home,
            spec,
            names,
            runner,
            catalogs=self._catalog_pool(),
            cluster=cluster.source,
        )

    def _catalog_pool(self) -> CatalogPool:
        """The Iceberg catalogs this facade's exports keep open across runs."""
        if self._iceberg_catalogs is None:
            from offloader.export.iceberg_catalog import CatalogPool

            self._iceberg_catalogs = CatalogPool()
        return self._iceberg_catalogs

    def iceberg_target(
        self,
        table: str,
        *,
        catalog: str | None = None,
        warehouse: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> IcebergTarget:
        """The Iceberg table ``table`` (``iceberg://NS.TABLE`` or ``NS.TABLE``) with this
        home's defaults for the catalog and the warehouse."""
        from offloader.export.iceberg_target import resolve_target

        return resolve_target(
            table,
            self._rt.home,
            catalog=catalog,
            warehouse=warehouse,
            endpoint_url=endpoint_url,
            region=region,
        )

    def export_iceberg_status(
        self, topic: str, target: IcebergTarget, *, cluster: PulsarCluster | None = None
    ) -> IcebergStatus:
        """The table's current snapshot, its ``metadata_location``, the topic's watermark (as
        the table carries it) and its lag. ``topic``: a Pulsar topic, or a Kafka partition's
        key ``kafka:<topic>:<partition>``; with ``cluster``, that real Pulsar cluster's topic
        (one managed ledger: its watermark keyed by the cluster, its lag from its
        ``ManagedLedgerInfo``)."""
        from offloader.export.iceberg_manage import iceberg_status

        if cluster is not None:
            of = (cluster.location, cluster.source.managed_ledger(topic))
            return iceberg_status(self._rt.meta, target, topic, self._rt.now_ms(), cluster=of)
        kafka = self.kafka().ctx.meta if topic.startswith("kafka:") else None
        return iceberg_status(self._rt.meta, target, topic, self._rt.now_ms(), kafka)

    def export_iceberg_reset(
        self, topic: str, target: IcebergTarget, to: str, *, cluster: str | None = None
    ) -> IcebergResetReport:
        """Move the topic's watermark in the table back to ``to`` (``ledger:entry[:batch]`` or
        a time) and delete its rows after it, in one Iceberg commit: the next run exports
        them again. ``cluster``: the metadata-store URL of the real Pulsar cluster whose topic
        this is (``--pulsar-metadata``; not connected to: the watermark is keyed by its
        location)."""
        from offloader.export.iceberg_manage import reset_iceberg
        from offloader.pulsar_cluster import parse_metadata_url

        location = None if cluster is None else parse_metadata_url(cluster).canonical
        return reset_iceberg(target, topic, to, location)

    def export_expire_snapshots(
        self, target: IcebergTarget, older_than_seconds: int, *, retain_last: int = 1
    ) -> ExpireReport:
        """Expire the table's snapshots older than the age given, keeping the newest
        ``retain_last`` and the current one (which carries the watermarks)."""
        from offloader.export.iceberg_manage import expire_snapshots

        return expire_snapshots(target, older_than_seconds, retain_last)

    def export_clean_orphans(
        self, target: IcebergTarget, min_age_seconds: int, *, dry_run: bool = False
    ) -> IcebergOrphanReport:
        """Remove the files under the table's location that no kept snapshot or metadata
        version refers to, older than ``min_age_seconds``."""
        from offloader.export.iceberg_manage import clean_orphans

        return clean_orphans(target, min_age_seconds, dry_run=dry_run)


def _not_iceberg(target: str, instead: str) -> None:
    """Refuse an ``iceberg://`` target where a Parquet directory is meant."""
    from offloader.export.settings import normalize_target

    if normalize_target(target).startswith("iceberg://"):
        raise ConfigError(f"{target} is an Iceberg table: use Offloader.{instead}")


def _some(selection: TopicSelection, topics: list[str], kind: str = "topic") -> list[str]:
    """``topics``, or an :class:`~offloader.errors.ExportError` when the selection's namespaces
    and regexes matched none."""
    if not topics:
        raise ExportError(f"export run: no {kind} matches {str(selection)!r}")
    return topics
