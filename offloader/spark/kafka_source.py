"""The ``kafka-segments`` DataFrame source: remote Kafka segments, as Spark's Kafka source.

::

    from offloader.spark import register
    register(spark)
    df = (spark.read.format("kafka-segments")
          .option("home", "/var/offloader")             # the metadata (remote segments)
          .option("metadata", "postgresql://...")       # optional: a shared metadata store
          .option("store", "s3://bucket/prefix")        # default file://<home>/objects
          .option("endpoint", "http://127.0.0.1:9000")  # optional; also region
          .option("topics", "orders,clicks")            # optional: all topics; names or a
                                                        # regex (offloader.selection)
          .option("key_ring", "/etc/offloader/keys")    # optional: <home>/keys
          .load())

Columns and types are those of Spark's own Kafka source (``key BINARY, value BINARY, topic
STRING, partition INT, offset LONG, timestamp TIMESTAMP, timestampType INT`` and ``headers
ARRAY<STRUCT<key STRING, value BINARY>>``). One Spark partition per segment, or per
``split_bytes`` (default 64 MiB) of a bigger one, cut at ``.index`` positions; each task reads
its bytes with one ranged GET. Filters on ``partition``, ``offset`` and ``timestamp``
(``=``, ``<``, ``<=``, ``>``, ``>=``, and ``IN`` on partition) are pushed down: segments outside
them are never planned, a task starts at the index position of its first wanted offset (and,
with a lower time bound, at the batch the ``.timeindex`` locates), and rows are filtered
exactly. Control records (transaction markers) are not returned. Transformed segments
(spec/transforms.md §8) are read through their chunk table, loaded on the driver and carried by
the tasks; executors unwrap the data key with the key ring (option ``key_ring``, default
``$OFFLOADER_KEY_RING`` or ``<home>/keys``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from offloader.errors import ConfigError
from offloader.kafka.context import KafkaContext
from offloader.kafka.scan import FILTER_COLUMNS, ScanFilter, ScanTask, plan_scan, read_task
from offloader.kafka.segments import IndexCache
from offloader.kafka.settings import KafkaSettings
from offloader.kafka.types import KafkaRecordRow
from offloader.keyring import key_ring_path
from offloader.metadata import open_kafka_metadata_store
from offloader.selection import TopicSelection
from offloader.spark.plan import StoreSpec
from offloader.spark.tasks import executor_store

__all__ = ["KAFKA_SCHEMA", "KAFKA_SOURCE_NAME", "KafkaSegmentsSource"]

KAFKA_SOURCE_NAME = "kafka-segments"
KAFKA_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset LONG, timestamp TIMESTAMP, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)
BATCH_ROWS = 8192
_OPS: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
}


class SegmentPartition(InputPartition):  # type: ignore[misc]
    def __init__(self, store: StoreSpec, task: ScanTask) -> None:
        super().__init__(task)
        self.store = store
        self.task = task


def _ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.timestamp() * 1000
    return value


def _batch(rows: Sequence[KafkaRecordRow]) -> pa.RecordBatch:
    columns = [
        pa.array([r.key for r in rows], pa.binary()),
        pa.array([r.value for r in rows], pa.binary()),
        pa.array([r.topic for r in rows], pa.string()),
        pa.array([r.partition for r in rows], pa.int32()),
        pa.array([r.offset for r in rows], pa.int64()),
        pa.array([r.timestamp * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in rows], pa.int32()),
        pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] for r in rows],
            ARROW_SCHEMA.field("headers").type,
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class KafkaSegmentsReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any) -> None:
        self.options = dict(options)
        home = self.options.get("home")
        if not home:
            raise ConfigError(f"{KAFKA_SOURCE_NAME}: option home (the offloader home) is required")
        self.home = Path(str(home)).expanduser().resolve()
        #: the shared metadata store (every broker's remote segments), else the home's
        self.metadata = str(self.options.get("metadata") or self.home)
        store = self.options.get("store") or f"file://{self.home}/objects"
        self.spec = StoreSpec(
            str(store), self.options.get("endpoint") or None, self.options.get("region") or None
        )
        topics = self.options.get("topics")
        #: the one selection form (offloader.selection): names, or a regex over names
        self.topics = None if not topics else TopicSelection.parse(str(topics)).require_flat()
        self.split_bytes = int(self.options.get("split_bytes") or 64 * 1024 * 1024)
        ring = self.options.get("key_ring")
        self.key_ring = str(ring) if ring else str(key_ring_path(self.home))
        self.cache_bytes = int(self.options.get("chunk_cache_bytes") or 0)
        self.scan_filter = ScanFilter()

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for flt in filters:
            op = _OPS.get(type(flt))
            attribute = tuple(getattr(flt, "attribute", ()))
            column = attribute[0] if len(attribute) == 1 else None
            value = getattr(flt, "value", None)
            values = value if isinstance(value, list | tuple) else [value]
            numeric = all(
                isinstance(_ms(v), int | float) and not isinstance(v, bool) for v in values
            )
            if op is None or column not in FILTER_COLUMNS or not numeric:
                yield flt
                continue
            try:
                if op == "in":
                    self.scan_filter = self.scan_filter.and_(column, op, values)
                else:
                    self.scan_filter = self.scan_filter.and_(column, op, _ms(value))
            except ConfigError:
                yield flt

    def partitions(self) -> Sequence[InputPartition]:
        store = self.spec.open()
        ctx = KafkaContext(
            store, open_kafka_metadata_store(self.metadata), KafkaSettings(), lambda: 0
        )
        try:
            tasks = plan_scan(
                ctx,
                IndexCache(store, key_ring=self.key_ring, cache_bytes=self.cache_bytes),
                self.topics,
                self.scan_filter,
                self.split_bytes,
            )
        finally:
            ctx.meta.close()
            store.close()
        return [SegmentPartition(self.spec, t) for t in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentPartition):
            return  # no partitions planned: Spark reads one empty InputPartition(None)
        task = partition.task
        store = executor_store(partition.store)
        rows: list[KafkaRecordRow] = []
        for row in read_task(store, task):
            rows.append(row)
            if len(rows) >= BATCH_ROWS:
                yield _batch(rows)
                rows = []
        if rows:
            yield _batch(rows)


class KafkaSegmentsSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("kafka-segments")``."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return KafkaSegmentsReader(self.options)
