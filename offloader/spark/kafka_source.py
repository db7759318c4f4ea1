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
    # no home: the bucket alone (its completion markers, spec/kafka-manifests.md)
    df = (spark.read.format("kafka-segments")
          .option("store", "s3://bucket/prefix").option("discover", "true")
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

With ``discover`` (``true``; instead of ``home``/``metadata``) the segments are found from the
bucket alone, as ``offloaded-ledger``'s ``discover`` finds ledgers: one listing, the completion
markers read (:mod:`offloader.kafka.discover`, spec/kafka-manifests.md), one Spark partition
per finished segment range (or per ``split_bytes``); unfinished attempts are never read, and of
two copies of the same offsets one is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
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

from formats.kafka.batch import BatchHeader
from formats.kafka.columns import RecordColumns
from offloader.errors import ConfigError
from offloader.kafka.context import KafkaContext
from offloader.kafka.discover import discover_segments
from offloader.kafka.scan import (
    FILTER_COLUMNS,
    ScanFilter,
    ScanTask,
    plan_scan,
    plan_segments,
    task_columns,
)
from offloader.kafka.segments import IndexCache
from offloader.kafka.settings import KafkaSettings
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


class _Columns:
    """Columns of records gathered batch by batch (no object per record) until they make
    an Arrow record batch."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.kinds: list[int] = []
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, header: BatchHeader, cols: RecordColumns) -> None:
        self.keys += cols.keys
        self.values += cols.values
        self.offsets += cols.offsets
        self.timestamps += cols.timestamps
        self.kinds += [header.timestamp_type] * len(cols)
        self.headers += cols.headers

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(pa.array(self.timestamps, pa.int64()), 1000).cast(
                pa.timestamp("us", tz="UTC")
            ),
            pa.array(self.kinds, pa.int32()),
            pa.array(self.headers, ARROW_SCHEMA.field("headers").type),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class KafkaSegmentsReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any) -> None:
        self.options = dict(options)
        flag = str(self.options.get("discover") or "false").strip().lower()
        if flag not in ("true", "false"):
            raise ConfigError(
                f"{KAFKA_SOURCE_NAME}: option discover is true or false, not {flag!r}"
            )
        #: find the segments from the bucket's manifests, not a metadata store
        self.discover = flag == "true"
        home = self.options.get("home")
        if self.discover and not self.options.get("store"):
            raise ConfigError(f"{KAFKA_SOURCE_NAME}: option discover needs option store")
        if self.discover and (home or self.options.get("metadata")):
            raise ConfigError(
                f"{KAFKA_SOURCE_NAME}: give either discover=true (the bucket alone) "
                "or home/metadata"
            )
        if not home and not self.discover:
            raise ConfigError(
                f"{KAFKA_SOURCE_NAME}: option home (the offloader home) is required, or "
                "discover=true with store (the bucket alone)"
            )
        self.home = Path(str(home)).expanduser().resolve() if home else None
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
        default_ring = key_ring_path(self.home or Path(".offloader"))
        self.key_ring = str(ring) if ring else str(default_ring)
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
        if self.discover:  # one listing of the bucket, its markers read (no metadata store)
            try:
                cache = IndexCache(store, key_ring=self.key_ring, cache_bytes=self.cache_bytes)
                found = discover_segments(store, self.topics)
                tasks = plan_segments(found, cache, self.topics, self.scan_filter, self.split_bytes)
            finally:
                store.close()
            return [SegmentPartition(self.spec, t) for t in tasks]
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
        gathered = _Columns(task.topic, task.partition)
        for header, cols in task_columns(store, task):
            gathered.add(header, cols)
            if len(gathered) >= BATCH_ROWS:
                yield gathered.batch()
                gathered = _Columns(task.topic, task.partition)
        if len(gathered):
            yield gathered.batch()


class KafkaSegmentsSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("kafka-segments")``."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return KafkaSegmentsReader(self.options)
