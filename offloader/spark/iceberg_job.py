"""The Spark engine of an export to an Iceberg table: the Parquet export's engine, told where
the table's data files go and which columns they have.

:class:`IcebergSparkRunner` is :class:`~offloader.spark.export_job.SparkRunner` (the same
tasks, the same deterministic file names and bytes) plus what
:class:`~offloader.export.iceberg.IcebergRunner` asks: :meth:`arrow_schema`, the columns of the
files it writes (the ``pulsar-messages`` columns with the value as bytes, then the decoded
value as ``value_decoded`` or, flattened, ``value_<field>`` columns), and :meth:`retarget`, the
table's ``data/`` directory once the table is loaded. :class:`IcebergLocalRunner` is the same
on :class:`~offloader.spark.export_job.LocalRunner` (the tasks in-process, no JVM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from offloader.export.iceberg import with_target
from offloader.export.settings import ExportSpec
from offloader.spark.export_job import (
    ClusterLocalRunner,
    ClusterSparkRunner,
    LocalRunner,
    SparkRunner,
)
from offloader.spark.export_kafka import KafkaRunner
from offloader.spark.kafka_source import ARROW_SCHEMA

__all__ = [
    "IcebergKafkaRunner",
    "IcebergLocalRunner",
    "IcebergSparkRunner",
    "with_value_columns",
]


def with_value_columns(base: pa.Schema, decoded: pa.DataType | None, flatten: bool) -> pa.Schema:
    """``base`` (the source's columns, ``value`` as bytes) then the decoded value's columns as
    the tasks write them: ``value_decoded``, or flattened one ``value_<field>`` per field."""
    if decoded is None:
        return base
    if not flatten or not pa.types.is_struct(decoded):
        return base.append(pa.field("value_decoded", decoded))
    for i in range(decoded.num_fields):
        child = decoded.field(i)
        base = base.append(pa.field(f"value_{child.name}", child.type))
    return base


class _Iceberg:
    spec: ExportSpec
    if TYPE_CHECKING:  # SparkRunner's, which the runners below inherit after this mixin

        def _schema(self, **options: str) -> Any: ...

        def config(self) -> Any: ...

    def arrow_schema(self) -> pa.Schema:
        base = to_arrow_schema(self._schema(value_format="binary"), timezone="UTC")
        return with_value_columns(base, self.config().decoded_type, self.spec.flatten)

    def retarget(self, data_url: str) -> None:
        self.spec = with_target(self.spec, data_url)


class IcebergSparkRunner(_Iceberg, SparkRunner):
    """Spark's tasks, writing under the table's ``data/``."""


class IcebergLocalRunner(_Iceberg, LocalRunner):
    """The same tasks in this process, without Spark (values as bytes)."""


class IcebergClusterSparkRunner(_Iceberg, ClusterSparkRunner):
    """A real Pulsar cluster's topics, Spark's tasks writing under the table's ``data/``."""


class IcebergClusterLocalRunner(_Iceberg, ClusterLocalRunner):
    """A real Pulsar cluster's topics, the same tasks in this process."""


class IcebergKafkaRunner(KafkaRunner):
    """Kafka topics' remote segments (``kafka-segments``), in Spark or in this process."""

    def arrow_schema(self) -> pa.Schema:
        return with_value_columns(ARROW_SCHEMA, self.decoded_type(), self.spec.flatten)

    def retarget(self, data_url: str) -> None:
        self.spec = with_target(self.spec, data_url)
