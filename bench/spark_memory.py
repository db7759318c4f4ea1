"""An in-memory Python data source shaped like ``offloaded-ledger``: Spark's own floor.

``spark.read.format("bench-memory-ledger")`` yields, per partition, one block's worth of rows
(``rows`` entries of ``entry`` random bytes, the same schema as the offloaded-ledger source) as
``pyarrow.RecordBatch`` slices of at most ``batch_rows`` rows and ``batch_bytes`` bytes, exactly as
:func:`offloader.spark.source.read_block_batches` hands a fetched block to Spark, but with no
object store, no CRC32C and no packing: the bytes are built once per Python worker. Scanning it
measures what Spark alone costs to take those bytes from a Python source (Arrow over the
worker socket, rows in the JVM), the floor under any Python source's scan.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from offloader.spark.source import (
    ARROW_SCHEMA,
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_ROWS,
    SCHEMA,
    batch_bounds,
)

NAME = "bench-memory-ledger"
_BLOCKS: dict[tuple[int, int], pa.RecordBatch] = {}  # per worker: (rows, entry) -> block


def _block(rows: int, entry: int) -> pa.RecordBatch:
    key = (rows, entry)
    if key not in _BLOCKS:
        payload = pa.Array.from_buffers(
            pa.binary(),
            rows,
            [
                None,
                pa.array(range(0, rows * entry + 1, entry), pa.int32()).buffers()[1],
                pa.py_buffer(os.urandom(rows * entry)),
            ],
        )
        _BLOCKS[key] = pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar("persistent://public/default/bench", pa.string()), rows),
                pa.repeat(pa.scalar(1, pa.int64()), rows),
                pa.array(range(rows), pa.int64()),
                payload,
            ],
            schema=ARROW_SCHEMA,
        )
    return _BLOCKS[key]


class _Reader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any) -> None:
        self.blocks = int(options.get("blocks", 1))
        self.rows = int(options.get("rows", 1))
        self.entry = int(options.get("entry", 1))
        self.batch_rows = int(options.get("batch_rows", DEFAULT_BATCH_ROWS))
        self.batch_bytes = int(options.get("batch_bytes", DEFAULT_BATCH_BYTES))

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.blocks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        block = _block(self.rows, self.entry)
        ends = range(0, (block.num_rows + 1) * self.entry, self.entry)
        for at, stop in batch_bounds(ends, self.batch_rows, self.batch_bytes):
            yield block.slice(at, stop - at)


class MemoryLedgerSource(DataSource):  # type: ignore[misc]
    """Options: ``blocks`` (partitions), ``rows`` per block, ``entry`` bytes, ``batch_rows``,
    ``batch_bytes``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(self.options)
