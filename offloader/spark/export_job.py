"""The Spark engine of ``offloader export run``: plans source tasks, writes in executors.

:class:`SparkRunner` implements :class:`~offloader.export.plan.ExportRunner`. On the driver it
builds a ``pulsar-messages`` reader for the topics (values read as bytes; the decoded value's
Arrow type taken from the source's own schema for the export's ``value_format``), plans its
tasks (one per offloaded block, or per chunk of a ledger still on local disk), keeps those that
overlap each topic's range, and runs one Spark job with one partition per task: each task writes
its files (:mod:`offloader.spark.export_write`) and returns their descriptions, which the driver
collects. Spark retries a failed task; its rewrite has the same names and bytes.

Each task carries the topic's following ledgers the source would give it
(:func:`~offloader.spark.message_chunks.following_ledgers`, within the run's closed ledgers),
so the task holding a chunked message's first chunk finishes it across a ledger rollover; one
whose last chunk is not in a closed ledger yet comes back as
:class:`~offloader.export.plan.Held` (spec/export.md §5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema

from offloader.errors import ConfigError
from offloader.export.plan import Held, RangeTask, TopicPlan, WrittenFile
from offloader.export.run import target_spec
from offloader.export.settings import ExportSpec
from offloader.selection import TopicSelection
from offloader.spark.export_write import WriteConfig, first_at_or_after, write_range_task
from offloader.spark.message_chunks import MAX_FOLLOWING_LEDGERS, following_ledgers
from offloader.spark.message_rows import messages_arrow_schema
from offloader.spark.messages import PulsarMessagesReader
from offloader.spark.sources import register

__all__ = ["LocalRunner", "SparkRunner", "binary_schema", "decoded_value_type"]


def binary_schema() -> Any:
    """The ``pulsar-messages`` schema with ``value`` as bytes, built without a JVM (the Spark
    side of :func:`~offloader.spark.message_rows.messages_arrow_schema`)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(messages_arrow_schema())


def decoded_value_type(spark: Any, spec: ExportSpec) -> Any:
    """The Arrow type of the decoded value for ``spec``'s ``value_format`` (json / avro: the
    type the ``pulsar-messages`` source gives ``value`` for the same options, Spark parsing the
    DDL); None for binary / string (values written as bytes)."""
    if spec.value_format not in ("json", "avro"):
        return None
    register(spark)
    reader = spark.read.format("pulsar-messages").option("value_format", spec.value_format)
    if spec.schema:
        reader = reader.option("schema", spec.schema)
    if spec.avro_schema:
        reader = reader.option("avro_schema", spec.avro_schema)
    schema = reader.option("topics", "x").load().schema
    return to_arrow_schema(schema, timezone="UTC").field("value").type


def _source_options(*pairs: tuple[str, str | None]) -> dict[str, str]:
    """The ``pulsar-messages`` options that are set (``metadata``: a shared store's URL, whose
    topics list every broker's offloaded ledgers)."""
    return {k: v for k, v in pairs if v}


class SparkRunner:
    """Reads through ``pulsar-messages`` and writes Parquet from the executors."""

    def __init__(
        self,
        spark: Any,
        home: str,
        spec: ExportSpec,
        *,
        store_url: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        metadata_url: str | None = None,
    ) -> None:
        self.spark = spark
        self.home = str(home)
        self.spec = spec
        self.source_options = _source_options(
            ("store", store_url),
            ("endpoint", endpoint_url),
            ("region", region),
            ("metadata", metadata_url),
        )
        register(spark)

    def _schema(self, **options: str) -> Any:
        if options == {"value_format": "binary"}:  # known without asking Spark (a round trip)
            return binary_schema()
        reader = self.spark.read.format("pulsar-messages")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.option("topics", "x").load().schema

    def config(self) -> WriteConfig:
        spec = self.spec
        decoded = decoded_value_type(self.spark, spec)
        return WriteConfig(
            target_spec(spec),
            spec.generation,
            spec.partition_by,
            spec.time_field,
            spec.field_path,
            spec.max_file_size,
            spec.flatten,
            spec.value_format,
            spec.avro_schema,
            decoded,
        )

    def _reader(self, plans: Sequence[TopicPlan]) -> PulsarMessagesReader:
        ids = sorted({i for p in plans for i in p.ledger_ids})
        options = {
            **self.source_options,
            "topics": TopicSelection.text_of(p.topic for p in plans),
            "home": self.home,
            "ledger_ids": ",".join(map(str, ids)),
            "value_format": "binary",
            "pushdown": "false",
        }
        reader = PulsarMessagesReader(
            options, self._schema(value_format="binary"), first_entries=True
        )
        reader.open_ledgers = False  # closed ledgers only: the export's ranges end in them
        return reader

    def _tasks(self, reader: PulsarMessagesReader, plans: Sequence[TopicPlan]) -> list[RangeTask]:
        """The source tasks in the plans' ranges, each with the ledgers after it (the plans'
        closed ledgers only: the reader lists no other)."""
        by_topic = {p.topic: p for p in plans}
        tasks = reader.plan()
        ledgers: dict[str, set[int]] = {}
        for task in tasks:
            ledgers.setdefault(task.topic or "", set()).add(task.ledger_id)
        out = []
        for task, following in zip(tasks, following_ledgers(tasks), strict=True):
            plan = by_topic.get(task.topic or "")
            if plan is not None and plan.contains(
                task.ledger_id, task.first_entry_id, task.last_entry_id
            ):
                later = sum(1 for i in ledgers[plan.topic] if i > task.ledger_id)
                out.append(
                    RangeTask(
                        task,
                        plan.topic,
                        plan.start,
                        plan.end,
                        following=following,
                        chunks_wait=later <= MAX_FOLLOWING_LEDGERS,
                        present=plan.present_of(task.ledger_id),
                    )
                )
        return out

    def first_at_or_after(
        self, plans: Sequence[TopicPlan], until_ms: int
    ) -> dict[str, tuple[int, int]]:
        reader = self._reader(plans)
        tasks = self._tasks(reader, plans)
        if not tasks:
            return {}
        conf = self.config()
        rdd = self.spark.sparkContext.parallelize(tasks, len(tasks))
        found = rdd.flatMap(lambda rt: first_at_or_after(reader, rt, until_ms, conf)).collect()
        out: dict[str, tuple[int, int]] = {}
        for topic, ledger, entry in found:
            out[topic] = min(out.get(topic, (ledger, entry)), (ledger, entry))
        return out

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile | Held]:
        reader = self._reader(plans)
        tasks = self._tasks(reader, plans)
        if not tasks:
            return []
        conf = self.config()

        def run(items: Any) -> Any:
            fs = conf.target.open() if conf.target.is_remote else None
            for rt in items:
                yield from write_range_task(reader, rt, conf, fs)

        rdd = self.spark.sparkContext.parallelize(tasks, len(tasks))
        return list(rdd.mapPartitions(run).collect())


class LocalRunner(SparkRunner):
    """The same tasks run one after another in this process, without Spark (no JVM): for
    small exports, the service's continuous mode and the kill -9 harness. Values are written
    as bytes (``--value-format`` json/avro needs the Spark engine for the decoded type)."""

    def __init__(self, home: str, spec: ExportSpec, *, metadata_url: str | None = None) -> None:
        if spec.value_format in ("json", "avro"):
            raise ConfigError(
                "the local export engine writes values as bytes: use the Spark "
                "engine for --value-format json/avro"
            )
        self.spark = None
        self.home = str(home)
        self.spec = spec
        self.source_options = _source_options(("metadata", metadata_url))

    def _schema(self, **options: str) -> Any:
        return binary_schema()

    def first_at_or_after(
        self, plans: Sequence[TopicPlan], until_ms: int
    ) -> dict[str, tuple[int, int]]:
        reader = self._reader(plans)
        conf = self.config()
        out: dict[str, tuple[int, int]] = {}
        for rt in self._tasks(reader, plans):
            for topic, ledger, entry in first_at_or_after(reader, rt, until_ms, conf):
                out[topic] = min(out.get(topic, (ledger, entry)), (ledger, entry))
        return out

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile | Held]:
        reader = self._reader(plans)
        tasks = self._tasks(reader, plans)
        conf = self.config()
        fs = conf.target.open() if conf.target.is_remote else None
        return [w for rt in tasks for w in write_range_task(reader, rt, conf, fs)]


class _ClusterTasks:
    """What a runner of a real Pulsar cluster's topics changes: the source reads the cluster's
    topics (``pulsar_metadata`` + ``topics``, the real names), and each source task is matched
    to its plan by the topic's watermark key (:func:`offloader.export.cluster.cluster_key`),
    its files under the real topic's directory."""

    cluster_url: str
    cluster_location: str
    source_options: dict[str, str]

    _schema: Callable[..., Any]  # the runner's (declared here, not defined: the MRO finds it)

    def _reader(self, plans: Sequence[TopicPlan]) -> PulsarMessagesReader:
        from offloader.export.cluster import split_key

        ids = sorted({i for p in plans for i in p.ledger_ids})
        options = {
            **self.source_options,
            "pulsar_metadata": self.cluster_url,
            "topics": TopicSelection.text_of(split_key(p.topic)[1] for p in plans),
            "ledger_ids": ",".join(map(str, ids)),
            "value_format": "binary",
            "pushdown": "false",
        }
        return PulsarMessagesReader(
            options, self._schema(value_format="binary"), first_entries=True
        )

    def _tasks(self, reader: PulsarMessagesReader, plans: Sequence[TopicPlan]) -> list[RangeTask]:
        from offloader.export.cluster import split_key

        by_topic = {split_key(p.topic)[1]: p for p in plans}
        tasks = reader.plan()
        ledgers: dict[str, set[int]] = {}
        for task in tasks:
            ledgers.setdefault(task.topic or "", set()).add(task.ledger_id)
        out = []
        for task, following in zip(tasks, following_ledgers(tasks), strict=True):
            name = task.topic or ""
            plan = by_topic.get(name)
            if plan is not None and plan.contains(
                task.ledger_id, task.first_entry_id, task.last_entry_id
            ):
                later = sum(1 for i in ledgers[name] if i > task.ledger_id)
                out.append(
                    RangeTask(
                        task,
                        plan.topic,
                        plan.start,
                        plan.end,
                        directory_topic=name,
                        following=following,
                        chunks_wait=later <= MAX_FOLLOWING_LEDGERS,
                    )
                )
        return out


class ClusterSparkRunner(_ClusterTasks, SparkRunner):
    """:class:`SparkRunner` over a real Pulsar cluster's topics."""

    def __init__(
        self,
        spark: Any,
        home: str,
        spec: ExportSpec,
        cluster_url: str,
        *,
        store_url: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> None:
        super().__init__(
            spark, home, spec, store_url=store_url, endpoint_url=endpoint_url, region=region
        )
        self.cluster_url = cluster_url


class ClusterLocalRunner(_ClusterTasks, LocalRunner):
    """:class:`LocalRunner` over a real Pulsar cluster's topics."""

    def __init__(
        self,
        home: str,
        spec: ExportSpec,
        cluster_url: str,
        *,
        store_url: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> None:
        super().__init__(home, spec)
        self.cluster_url = cluster_url
        self.source_options = _source_options(
            ("store", store_url), ("endpoint", endpoint_url), ("region", region)
        )
