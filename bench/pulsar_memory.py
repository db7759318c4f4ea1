"""An in-memory Python data source shaped like ``pulsar-messages``: Spark's own floor for it.

``spark.read.format("bench-memory-messages")`` yields, per partition, one block's worth of
message rows (``messages`` rows whose ``value`` is ``message`` random bytes, every column of the
``pulsar-messages`` source) as the Arrow batches that source builds with
:func:`offloader.spark.message_rows.messages_batch`, ``batch_rows`` rows each, but with no object
store, no checksum and no decoding: the batches are built once per Python worker. Scanning it
measures what Spark alone costs to take those rows from a Python source, the floor under the
``pulsar-messages`` scan (``bench/pulsar_scan.py``).

``spark.read.format("bench-replay-messages")`` (the same options as ``pulsar-messages``, plus
``blocks``) is the control beside that floor: the ``pulsar-messages`` reader's own Arrow batches
of the topic's largest block, decoded once per Python worker (one read of the block) and then
replayed for each of ``blocks`` partitions with no object store and no decoding. Against the
floor it shows what the source's batches themselves cost Spark; against the scan, what the
read and the decoding add (in the workers, and in the JVM while it waits for them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema

from formats.pulsar import Message
from offloader.spark.message_chunks import ChunkFollower
from offloader.spark.message_rows import ValueDecoder, messages_batch, schema_ddl
from offloader.spark.messages import MessagesPartition, PulsarMessagesReader, PulsarMessagesSource
from offloader.spark.plan import BlockTask
from offloader.spark.source import DEFAULT_BATCH_ROWS

NAME = "bench-memory-messages"
REPLAY_NAME = "bench-replay-messages"
T0 = 1_700_000_000_000
_BLOCKS: dict[tuple[int, int, int], list[pa.RecordBatch]] = {}  # per worker
_REPLAYED: dict[tuple[str, str], list[pa.RecordBatch]] = {}  # per worker


def _block(schema: pa.Schema, rows: int, size: int, batch_rows: int) -> list[pa.RecordBatch]:
    key = (rows, size, batch_rows)
    if key not in _BLOCKS:
        pool = os.urandom(rows * size)
        messages = [
            Message(
                1,
                i // 100,
                -1,
                i % 100,
                "bench",
                i,
                T0 + i // 100,
                None,
                f"k{i % 8}",
                None,
                (),
                None,
                False,
                False,
                pool[i * size : (i + 1) * size],
            )
            for i in range(rows)
        ]
        values = ValueDecoder("binary")
        _BLOCKS[key] = [
            messages_batch(
                "persistent://public/default/bench", messages[at : at + batch_rows], schema, values
            )
            for at in range(0, rows, batch_rows)
        ]
    return _BLOCKS[key]


class _Reader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any, schema: Any) -> None:
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.blocks = int(options.get("blocks", 1))
        self.rows = int(options.get("messages", 1))
        self.size = int(options.get("message", 1))
        self.batch_rows = max(1, int(options.get("batch_rows", DEFAULT_BATCH_ROWS)))

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.blocks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _block(self.arrow_schema, self.rows, self.size, self.batch_rows)


class MemoryMessagesSource(DataSource):  # type: ignore[misc]
    """Options: ``blocks`` (partitions), ``messages`` per block, ``message`` value bytes,
    ``batch_rows``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return schema_ddl({})

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(self.options, schema)


class _ReplayReader(PulsarMessagesReader):
    """``pulsar-messages``' batches of the largest block, decoded once per worker, replayed."""

    def __init__(self, options: Any, schema: Any) -> None:
        super().__init__(options, schema)
        self.blocks = int(options.get("blocks", 1))

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.blocks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        key = (str(self.options.get("store")), str(self.options.get("ledgers")))
        if key not in _REPLAYED:
            blocks = [t for t in self.plan() if isinstance(t, BlockTask)]
            task = max(blocks, key=lambda t: t.ref.end - t.ref.start)
            _REPLAYED[key] = list(self.messages(MessagesPartition(task), ChunkFollower()))
        yield from _REPLAYED[key]


class ReplayMessagesSource(PulsarMessagesSource):
    """Options: ``pulsar-messages``' (``store``, ``endpoint``, ``ledgers``, ...) and
    ``blocks`` (partitions)."""

    @classmethod
    def name(cls) -> str:
        return REPLAY_NAME

    def reader(self, schema: Any) -> DataSourceReader:
        return _ReplayReader(self.options, schema)
