"""The engine of Kafka exports: ``kafka-segments`` tasks written as Parquet.

:class:`KafkaRunner` plans with the ``kafka-segments`` reader (one task per remote segment, or
per split of a large one), keeps the tasks of the planned partitions and writes each with
:func:`offloader.spark.export_write.write_range_task` (positions ``(partition, offset)``, time
``timestamp``): in Spark tasks, or in this process without a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offloader.errors import ConfigError
from offloader.export.kafka import split_key
from offloader.export.plan import Held, RangeTask, TopicPlan, WrittenFile
from offloader.export.run import target_spec
from offloader.export.settings import ExportSpec
from offloader.selection import TopicSelection
from offloader.spark.export_job import decoded_value_type
from offloader.spark.export_write import WriteConfig, first_at_or_after, write_range_task
from offloader.spark.kafka_source import KafkaSegmentsReader

__all__ = ["KafkaRunner"]


class KafkaRunner:
    """Reads remote Kafka segments and writes Parquet (``spark`` None: in this process)."""

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
        self.options = {
            k: v
            for k, v in (
                ("home", str(home)),
                ("metadata", metadata_url),  # a shared store: every broker's segments
                ("store", store_url),
                ("endpoint", endpoint_url),
                ("region", region),
            )
            if v
        }
        self.spec = spec
        if spark is None and spec.value_format in ("json", "avro"):
            raise ConfigError(
                "the local export engine writes values as bytes: use the Spark "
                "engine for --value-format json/avro"
            )
        self._decoded: tuple[Any] | None = None

    def decoded_type(self) -> Any:
        """The decoded value's Arrow type (json / avro; None: values as bytes), asked once."""
        if self._decoded is None:
            found = decoded_value_type(self.spark, self.spec) if self.spark is not None else None
            self._decoded = (found,)
        return self._decoded[0]

    def config(self) -> WriteConfig:
        s = self.spec
        return WriteConfig(
            target_spec(s),
            s.generation,
            s.partition_by,
            s.time_field,
            s.field_path,
            s.max_file_size,
            s.flatten,
            s.value_format,
            s.avro_schema,
            self.decoded_type(),
            ledger_column="partition",
            entry_column="offset",
            publish_column="timestamp",
        )

    def _tasks(self, plans: Sequence[TopicPlan]) -> tuple[KafkaSegmentsReader, list[RangeTask]]:
        by_key = {split_key(p.topic): p for p in plans}
        topics = sorted({t for t, _ in by_key})
        reader = KafkaSegmentsReader({**self.options, "topics": TopicSelection.text_of(topics)})
        out = []
        for part in reader.partitions():
            task = part.task  # type: ignore[attr-defined]
            plan = by_key.get((task.topic, task.partition))
            if plan is not None and plan.contains(task.partition, task.base_offset, 1 << 62):
                out.append(
                    RangeTask(
                        part,
                        plan.topic,
                        plan.start,
                        plan.end,
                        task.partition,
                        task.topic,
                        present=plan.present_of(task.partition),
                    )
                )
        return reader, out

    def _run(self, fn: Any, tasks: list[RangeTask]) -> list[Any]:
        if not tasks:
            return []
        if self.spark is None:
            return [x for rt in tasks for x in fn(rt)]
        from offloader.spark.session import propagate_aws_env

        propagate_aws_env(self.spark.sparkContext)
        return list(self.spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(fn).collect())

    def first_at_or_after(
        self, plans: Sequence[TopicPlan], until_ms: int
    ) -> dict[str, tuple[int, int]]:
        reader, tasks = self._tasks(plans)
        conf = self.config()
        out: dict[str, tuple[int, int]] = {}
        for key, ledger, entry in self._run(
            lambda rt: first_at_or_after(reader, rt, until_ms, conf), tasks
        ):
            out[key] = min(out.get(key, (ledger, entry)), (ledger, entry))
        return out

    def write(self, plans: Sequence[TopicPlan]) -> list[WrittenFile | Held]:
        reader, tasks = self._tasks(plans)
        conf = self.config()

        def one(rt: RangeTask) -> list[WrittenFile | Held]:
            return write_range_task(
                reader, rt, conf, conf.target.open() if conf.target.is_remote else None
            )

        return self._run(one, tasks)
