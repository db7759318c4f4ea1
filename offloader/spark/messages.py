"""The ``pulsar-messages`` DataFrame source: offloaded ledgers read as Pulsar messages.

::

    register(spark)     # offloader.spark.register registers every source
    df = (spark.read.format("pulsar-messages")
          .option("store", "s3://bucket").option("discover", "true")   # as offloaded-ledger
          .option("value_format", "json").option("schema", "sensor STRING, value DOUBLE")
          .load())

Same source options as ``offloaded-ledger`` (``store``, ``endpoint``, ``region``,
``ledgers`` | ``discover`` | ``topics`` + ``home`` | ``pulsar_metadata`` + ``topics`` (a real
Pulsar cluster's topics by name), ``read_buffer``, ``ledger_ids``, ``entry_range``,
``pushdown``), plus ``value_format`` (binary | string | json | avro),
``schema`` (a DDL: the value becomes a struct), ``avro_schema`` (the writer schema, JSON),
``decrypt_key`` (a PEM file holding the RSA private key of encrypted topics; read on the
driver), ``batch_rows`` (8192) and ``batch_bytes`` (2 MiB of values, at most half a
block when the option is not given) per Arrow batch, and ``on_error`` (``fail`` | ``skip``:
what to do about ledgers that are not in Pulsar message format, found on the driver before the
job starts by their first entry: :mod:`offloader.spark.message_probe`; ``fail``, the default,
names the first one, ``skip`` leaves them out with one warning naming each).
Columns: :data:`offloader.spark.message_rows.BASE_COLUMNS` + value.

One partition per block. Each task decodes its block's entries (CRC32C checked, decompressed,
batches split, chunks reassembled; a chunked message is finished by the task of its first
chunk, reading on into the ledger's next blocks and the topic's next ledgers, and skipped by
the task that starts in its middle: :mod:`offloader.spark.message_chunks`) into Arrow columns
entry by entry (:mod:`offloader.spark.message_columns`). Pushdown: ``ledger_id`` and
``entry_id`` as in ``offloaded-ledger`` (blocks pruned, rows exact); ``publish_time`` and
``event_time`` comparisons (time-zone-aware literals) skip blocks whose zone maps say no
message can match, and filter the rows exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema

from formats.pulsar.crypto import Decryptor
from offloader.errors import ConfigError
from offloader.spark.message_blocks import block_records
from offloader.spark.message_chunks import ChunkFollower, continuation, following_ledgers
from offloader.spark.message_columns import MessageColumns
from offloader.spark.message_probe import check_ledgers, on_error_option, parse_message_entry
from offloader.spark.message_rows import (
    TIME_COLUMNS,
    TimeBounds,
    ValueDecoder,
    schema_ddl,
    to_micros,
)
from offloader.spark.plan import Task
from offloader.spark.source import (
    DEFAULT_BATCH_ROWS,
    OffloadedLedgerReader,
    PushdownReader,
    TaskPartition,
    _flag,
    _int_option,
)

__all__ = ["SOURCE_NAME", "PulsarMessagesSource"]

SOURCE_NAME = "pulsar-messages"
#: value bytes per Arrow batch: a worker holds its block buffer, one decompressed batch and
#: the batch being built, so the batch stays well below a block; and large enough that
#: ``batch_rows`` (8192, the in-memory floor's batch) binds for small messages: every batch
#: costs a flush in the worker and a batch read in the JVM (bench pulsar_scan, RGW 512 MiB:
#: 512 KiB, 2,700 rows of 200-byte messages per batch, cost 0.3-0.4 CPU-s more in the
#: workers and 0.2-0.3 in the JVM than 2 MiB, 8192 rows)
DEFAULT_MESSAGE_BATCH_BYTES = 2 << 20
_MIN_TASK_BATCH_BYTES = 64 << 10
_TIME_OPS = {
    "EqualTo": "=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}


class PulsarMessagesReader(OffloadedLedgerReader):
    """Plans like ``offloaded-ledger`` (one partition per block) and decodes messages."""

    def __init__(self, options: Any, schema: Any, *, first_entries: bool = False) -> None:
        super().__init__(options)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        #: the export's reader: batches end with the rows' first-chunk entry ids
        #: (:data:`~offloader.spark.message_columns.FIRST_ENTRY_COLUMN`)
        self.first_entries = first_entries
        opts = self.options
        self.value_format = str(opts.get("value_format") or "binary").lower()
        self.avro_schema = opts.get("avro_schema") or None
        ValueDecoder(self.value_format, self.avro_schema)  # options checked on the driver
        self.on_error = on_error_option(opts)
        self.message_rows = max(1, _int_option(opts, "batch_rows", DEFAULT_BATCH_ROWS))
        self.batch_bytes = max(1, _int_option(opts, "batch_bytes", DEFAULT_MESSAGE_BATCH_BYTES))
        #: without a ``batch_bytes`` option, a block task's batches hold at most half its block
        #: (see :func:`task_batch_bytes`)
        self.batch_bytes_given = opts.get("batch_bytes") not in (None, "")
        self.decrypt_pem: bytes | None = None
        if opts.get("decrypt_key"):
            try:
                self.decrypt_pem = Path(str(opts["decrypt_key"])).read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"decrypt_key: cannot read {opts['decrypt_key']}: {exc}"
                ) from None
            Decryptor(self.decrypt_pem)
        self.times = {name: TimeBounds() for name in TIME_COLUMNS}
        #: pushed time comparisons ``(column, op, microseconds)``, applied to rows exactly
        self.time_predicates: tuple[tuple[str, str, int], ...] = ()

    def partitions(self) -> Sequence[InputPartition]:
        # ledgers skipped by zone maps stay in the plan: chunked messages may read on into them
        tasks = check_ledgers(OffloadedLedgerReader.plan(self), self.on_error)
        return [
            MessagesPartition(task, following)
            for task, following in zip(tasks, following_ledgers(tasks), strict=True)
            if self._keeps_task(task)
        ]

    def plan(self) -> list[Task]:
        return [t for t in super().plan() if self._keeps_task(t)]

    def _keeps_task(self, task: Task) -> bool:
        """False only when the block's zone map proves no message can pass the time filters."""
        zone = getattr(task, "zone", None)
        if zone is None:
            return True
        for column, bounds in self.times.items():
            if bounds.unbounded:
                continue
            known, span = zone.range_of(column)
            if known and (span is None or not bounds.overlaps_ms(*span)):
                return False
        return True

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's messages as Arrow batches, built entry by entry (see
        :mod:`offloader.spark.message_columns`); chunked messages it begins are finished by
        reading on (:mod:`offloader.spark.message_chunks`)."""
        return self.messages(partition, ChunkFollower())

    def messages(
        self, partition: InputPartition, chunks: ChunkFollower
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`read` with the task's :class:`ChunkFollower` given (the export reads what it
        left waiting)."""
        task: Task | None = getattr(partition, "task", None)
        if task is None:
            return
        rows = MessageColumns(
            task.topic,
            self.arrow_schema,
            ValueDecoder(self.value_format, self.avro_schema),
            batch_rows=self.message_rows,
            batch_bytes=self.batch_bytes
            if self.batch_bytes_given
            else task_batch_bytes(task, self.batch_bytes),
            predicates=self.time_predicates,
            decryptor=Decryptor(self.decrypt_pem) if self.decrypt_pem else None,
            first_entries=self.first_entries,
        )
        for record in block_records(task, self.entry_filter, rows):
            if record is None:  # the C walk filled a batch
                yield from _batches(rows)
                continue
            ledger_id, entry_id, payload = record
            parsed = parse_message_entry(payload, ledger_id, entry_id, task)
            del payload
            first = entry_id
            if parsed.metadata.is_chunk:
                whole = chunks.own(parsed, ledger_id, entry_id)
                if whole is None:
                    continue
                parsed, first = whole, chunks.completed_from[1]
            rows.add(parsed, ledger_id, entry_id, first)
            if rows.full:
                yield from _batches(rows)
        if chunks.begun:
            following = getattr(partition, "following", ())
            yield from self._read_on(task, following, chunks, rows)
        yield from _batches(rows)

    def _read_on(
        self,
        task: Task,
        following: Sequence[Task],
        chunks: ChunkFollower,
        rows: MessageColumns,
    ) -> Iterator[pa.RecordBatch]:
        """Finish the chunked messages begun in the task from the entries after it."""
        flt = self.entry_filter
        for ledger_id, entry_id, payload in continuation(task, following):
            whole = chunks.follow(
                parse_message_entry(payload, ledger_id, entry_id, task), ledger_id, entry_id
            )
            if whole is not None and flt.ledger.matches(ledger_id) and flt.keeps_entry(entry_id):
                rows.add(whole, ledger_id, entry_id, chunks.completed_from[1])
                if rows.full:
                    yield from _batches(rows)
            if not chunks.begun:
                return
        chunks.give_up()


def task_batch_bytes(task: Task, default: int) -> int:
    """The value bytes per Arrow batch for ``task`` when the user set none: ``default``, but at
    most half of a block task's block (at least 64 KiB), so that a worker's block buffer, the
    rows being staged and the batch being flushed stay within two blocks plus one decompressed
    batch whatever the block size (1 MiB blocks: 512 KiB batches; 64 MiB: ``default``)."""
    ref = getattr(task, "ref", None)
    if ref is None:  # a local ledger's task: no block buffer
        return default
    half = int(ref.end - ref.start) // 2
    return min(default, max(_MIN_TASK_BATCH_BYTES, half))


def _batches(rows: MessageColumns) -> Iterator[pa.RecordBatch]:
    batch = rows.flush()
    if batch is not None:
        yield batch


class MessagesPartition(TaskPartition):
    """A task and the ledgers it may read on into for a chunked message it begins."""

    def __init__(self, task: Task, following: tuple[Task, ...] = ()) -> None:
        super().__init__(task)
        self.following = following


class PulsarMessagesPushdownReader(PulsarMessagesReader):
    """With ``pushFilters`` (Spark refuses it unless pushdown is enabled)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        rest = []
        for flt in filters:
            attribute = tuple(getattr(flt, "attribute", ()))
            op = _TIME_OPS.get(type(flt).__name__)
            micros = to_micros(getattr(flt, "value", None))
            if len(attribute) == 1 and attribute[0] in TIME_COLUMNS and op and micros is not None:
                # consumed: blocks are skipped by zone maps, rows filtered exactly in read()
                # (a filter handed back to Spark would not be part of the pushed plan, whose
                # reader Spark may then reuse for the same query without it)
                column = attribute[0]
                self.times = {**self.times, column: self.times[column].and_(op, micros)}
                self.time_predicates = (*self.time_predicates, (column, op, micros))
            else:
                rest.append(flt)
        yield from PushdownReader.pushFilters(self, rest)  # type: ignore[arg-type]


class PulsarMessagesSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("pulsar-messages")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return schema_ddl(dict(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        if _flag(self.options, "pushdown", default=True):
            return PulsarMessagesPushdownReader(self.options, schema)
        return PulsarMessagesReader(self.options, schema)
