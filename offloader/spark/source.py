"""The ``offloaded-ledger`` DataFrame source (PySpark's Python Data Source API, PySpark >= 4.1).

::

    from offloader.spark import register
    register(spark)        # also enables spark.sql.python.filterPushdown.enabled
    df = (spark.read.format("offloaded-ledger")
          .option("store", "s3://bucket/prefix").option("endpoint", "http://127.0.0.1:9000")
          .option("ledgers", "12:6f1c...,13:0a9e...")     # or .option("discover", "true")
          .load())                                        # or .option("topics", "t1,t2")
                                                          #    .option("home", "/var/offloader")
                                                          #    .option("metadata", "postgresql://...")

Option ``topics`` takes the one selection form (:mod:`offloader.selection`): comma-separated
names, a namespace ``tenant/ns``, or a regular expression matched in full against topic names.
A real Pulsar cluster's topics by name: ``.option("pulsar_metadata", "zk:zk1:2181/pulsar")``
with ``.option("topics", ...)``: the ledgers whose offload is complete, in ledger order per
topic, ``topic`` the real topic name, each read from the bucket its offload context names
(``store`` overrides it); a topic's ledgers not offloaded are reported once as a warning.

Schema ``topic STRING, ledger_id LONG, entry_id LONG, payload BINARY``; one partition per data
block (local ledgers of a topic, its open ledger included: one per ``max_block_size`` bytes
of entries; the open ledger up to the entries its metadata counts at planning). A task fetches
its block with one streamed ranged GET (read ``read_buffer`` bytes at a time, CRC32C summed as
it arrives), packs every payload into one Arrow binary column in a single C pass, and yields
``pyarrow.RecordBatch`` slices of it (no per-entry Python objects).

Pruning: filters ``=``, ``>``, ``>=``, ``<``, ``<=`` and ``IN`` on ``ledger_id`` and
``entry_id`` (ANDed) are pushed down with ``DataSourceReader.pushFilters``: blocks whose ledger
or entry range cannot match are never planned nor fetched, and the rest are filtered exactly
(so Spark does not evaluate them again). Pushdown needs ``spark.sql.python.filterPushdown.enabled``
(:func:`register` sets it); with it off, use ``.option("pushdown", "false")`` and prune with
``.option("ledger_ids", "1,2")`` / ``.option("entry_range", "100:199")``, which work in both modes.

Other options: ``region``; ``read_buffer`` (bytes per read of the block's body, default 1 MiB);
``batch_rows`` and ``batch_bytes`` (most rows and payload bytes per Arrow batch, default 8192
and 4 MiB). Credentials come from the ``AWS_*``
environment of the Python workers (:func:`register` copies the driver's into it).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate
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

from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.selection import TopicSelection
from offloader.spark.entry_filter import COLUMNS, EntryFilter
from offloader.spark.plan import (
    BlockTask,
    LocalLedgerTask,
    StoreSpec,
    Task,
    parse_ledger_pairs,
    plan_cluster,
    plan_discover,
    plan_pairs,
    plan_topics,
)
from offloader.spark.tasks import read_local_task, read_packed_block

__all__ = ["PUSHDOWN_CONF", "SCHEMA", "SOURCE_NAME", "OffloadedLedgerSource"]

SOURCE_NAME = "offloaded-ledger"
SCHEMA = "topic STRING, ledger_id LONG, entry_id LONG, payload BINARY"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
DEFAULT_BATCH_ROWS = 8192
#: payload bytes per Arrow batch: the JVM reads each batch into one off-heap buffer, and glibc
#: maps one over 32 MiB fresh every time (a page fault per 4 KiB) where it reuses smaller ones
DEFAULT_BATCH_BYTES = 4 << 20

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("payload", pa.binary()),
    ]
)

_PUSHABLE: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
}


def _flag(options: Any, name: str, default: bool = False) -> bool:
    value = str(options.get(name, "")).strip().lower()
    if not value:
        return default
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}={value!r}: expected true or false")


def _int_option(options: Any, name: str, default: int) -> int:
    value = options.get(name)
    try:
        return default if value in (None, "") else int(value)
    except ValueError:
        raise ConfigError(f"option {name}={value!r}: expected an integer") from None


def options_filter(options: Any) -> EntryFilter:
    """The pruning of the ``ledger_ids`` ("1,2,3") and ``entry_range`` ("first:last") options."""
    ledger_ids = None
    entry_range = None
    try:
        if options.get("ledger_ids"):
            ledger_ids = [int(x) for x in str(options["ledger_ids"]).split(",") if x.strip()]
        if options.get("entry_range"):
            first, _, last = str(options["entry_range"]).partition(":")
            entry_range = (int(first), int(last))
    except ValueError:
        raise ConfigError(
            "options ledger_ids ('1,2,3') and entry_range ('first:last') take integers"
        ) from None
    return EntryFilter.from_options(ledger_ids, entry_range)


class TaskPartition(InputPartition):  # type: ignore[misc]
    """One partition: one block (or one chunk of a local ledger)."""

    def __init__(self, task: Task) -> None:
        super().__init__(task)
        self.task = task

    def __repr__(self) -> str:
        return f"TaskPartition({self.task!r})"


class OffloadedLedgerReader(DataSourceReader):  # type: ignore[misc]
    """Plans one partition per block and reads blocks into Arrow batches."""

    def __init__(self, options: Any) -> None:
        self.options = dict(options)
        self.entry_filter = options_filter(options)
        self.batch_rows = max(1, _int_option(options, "batch_rows", DEFAULT_BATCH_ROWS))
        self.batch_bytes = max(1, _int_option(options, "batch_bytes", DEFAULT_BATCH_BYTES))
        settings = OffloadSettings()
        buffer = _int_option(options, "read_buffer", settings.read_buffer_size)
        self.settings = settings.replace(read_buffer_size=buffer)
        #: with ``topics``: read each topic's open ledger too (the export reads closed ones)
        self.open_ledgers = True

    # --- planning (driver side, in Spark's planner Python worker) ---------------------------
    def partitions(self) -> Sequence[InputPartition]:
        return [TaskPartition(t) for t in self.plan()]

    def plan(self) -> list[Task]:
        opts = self.options
        store = opts.get("store") or None
        endpoint = opts.get("endpoint") or None
        region = opts.get("region") or None
        flt = self.entry_filter
        if opts.get("pulsar_metadata"):
            if not opts.get("topics") or opts.get("ledgers") or opts.get("discover"):
                raise ConfigError(
                    f"{SOURCE_NAME}: option pulsar_metadata takes option topics (names, a "
                    "namespace tenant/ns, or a regex), and neither ledgers nor discover"
                )
            return list(
                plan_cluster(
                    str(opts["pulsar_metadata"]),
                    str(opts["topics"]),
                    self.settings,
                    store_url=store,
                    endpoint_url=endpoint,
                    region=region,
                    entry_filter=flt,
                )
            )
        chosen = [k for k in ("ledgers", "discover", "topics") if opts.get(k)]
        if len(chosen) != 1 or (chosen == ["discover"] and not _flag(opts, "discover")):
            raise ConfigError(
                f"{SOURCE_NAME}: give exactly one of the options ledgers, discover=true, topics"
            )
        if chosen[0] == "topics":
            return plan_topics(
                str(opts.get("home") or ".offloader"),
                TopicSelection.parse(str(opts["topics"])),
                self.settings,
                store_url=store,
                endpoint_url=endpoint,
                region=region,
                entry_filter=flt,
                metadata=opts.get("metadata") or None,
                open_ledgers=self.open_ledgers,
            )
        if not store:
            raise ConfigError(f"{SOURCE_NAME}: option store (s3://bucket[/prefix]) is required")
        spec = StoreSpec(store, endpoint, region, self.settings)
        if chosen[0] == "discover":
            return list(plan_discover(spec, entry_filter=flt))
        return list(plan_pairs(spec, parse_ledger_pairs(str(opts["ledgers"])), entry_filter=flt))

    # --- reading (executors) ----------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task: Task | None = getattr(partition, "task", None)
        if task is None:  # no partitions planned: Spark reads one empty InputPartition(None)
            return
        if isinstance(task, LocalLedgerTask):
            yield from self._read_local(task)
            return
        yield from read_block_batches(task, self.entry_filter, self.batch_rows, self.batch_bytes)

    def _read_local(self, task: LocalLedgerTask) -> Iterator[pa.RecordBatch]:
        ids: list[int] = []
        payloads: list[bytes] = []
        size = 0
        for _topic, _ledger, entry_id, payload in read_local_task(task, self.entry_filter):
            if ids and (len(ids) >= self.batch_rows or size + len(payload) > self.batch_bytes):
                yield _batch(task.topic, task.ledger_id, ids, payloads)
                ids, payloads, size = [], [], 0
            ids.append(entry_id)
            payloads.append(payload)
            size += len(payload)
        if ids:
            yield _batch(task.topic, task.ledger_id, ids, payloads)


class PushdownReader(OffloadedLedgerReader):
    """The reader with ``pushFilters`` (Spark refuses it unless pushdown is enabled)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for flt in filters:
            op = _PUSHABLE.get(type(flt))
            attribute = tuple(getattr(flt, "attribute", ()))
            column = attribute[0] if len(attribute) == 1 else None
            value = getattr(flt, "value", None)
            if op is None or column not in COLUMNS or not _pushable_value(value):
                yield flt
                continue
            self.entry_filter = self.entry_filter.and_(column, op, value)


def _pushable_value(value: Any) -> bool:
    values = value if isinstance(value, list | tuple) else [value]
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


class OffloadedLedgerSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("offloaded-ledger")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        if _flag(self.options, "pushdown", default=True):
            return PushdownReader(self.options)
        return OffloadedLedgerReader(self.options)


# --- Arrow ------------------------------------------------------------------------------------
def _batch(
    topic: str | None, ledger_id: int, ids: Sequence[int], payloads: Sequence[Any]
) -> pa.RecordBatch:
    """One batch; ``payloads`` are bytes or memoryviews, copied once into one buffer."""
    n = len(ids)
    offsets = array("i", [0])
    offsets.extend(accumulate(len(p) for p in payloads))
    if offsets[-1] > 0x7FFFFFFF:  # pragma: no cover - blocks are far smaller
        raise ConfigError("an Arrow batch over 2 GiB of payload")
    data = b"".join(payloads)
    payload_array = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    if ids and ids[-1] - ids[0] == n - 1:
        id_array = pa.array(range(ids[0], ids[0] + n), pa.int64())
    else:
        id_array = pa.array(ids, pa.int64())
    columns = [
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(ledger_id, pa.int64()), n),
        id_array,
        payload_array,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def read_block_batches(
    task: BlockTask,
    entry_filter: EntryFilter | None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> Iterator[pa.RecordBatch]:
    """A block's (filtered) entries as Arrow batches of at most ``batch_rows`` rows and
    ``batch_bytes`` payload bytes (or one row, if larger).

    The block is fetched whole (one streamed GET read on this thread, CRC32C summed as it
    arrives; no read-ahead thread, whose hand-overs cost CPU a task cannot use) and its payloads
    are packed into one Arrow binary column as the chunks arrive (C when built, no copy of the
    whole block); nothing is yielded before the block passed every check. The batches are
    zero-copy slices of that column, which lives in a buffer reused by this worker's next
    block once Spark has dropped them all (:data:`~offloader.spark.buffers.BLOCK_BUFFERS`:
    a fresh 64 MiB buffer would cost the task ~16,000 page faults)."""
    packed = read_packed_block(task)
    n = packed.count
    first = packed.first_entry_id
    batch = pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(task.topic, pa.string()), n),
            pa.repeat(pa.scalar(task.ref.ledger_id, pa.int64()), n),
            pa.array(range(first, first + n), pa.int64()),
            pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(packed.offsets), pa.py_buffer(packed.data)]
            ),
        ],
        schema=ARROW_SCHEMA,
    )
    flt = entry_filter if entry_filter is not None and entry_filter.filters_entries else None
    if flt is not None:
        keep = [flt.keeps_entry(i) for i in range(first, first + n)]
        if not all(keep):
            batch = batch.filter(pa.array(keep, pa.bool_()))
    payloads = batch.column(3)  # its n + 1 int32 offsets, from the array's own offset on
    ends = memoryview(payloads.buffers()[1]).cast("B").cast("i")
    ends = ends[payloads.offset : payloads.offset + len(payloads) + 1]
    for at, stop in batch_bounds(ends, batch_rows, batch_bytes):
        yield batch.slice(at, stop - at)


def batch_bounds(ends: Sequence[int], max_rows: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """Row ranges ``[at, stop)`` of a binary column whose row ``i`` spans
    ``ends[i]..ends[i + 1]``: at most ``max_rows`` rows and ``max_bytes`` payload bytes each
    (one row at least, however large)."""
    rows = len(ends) - 1
    at = 0
    while at < rows:
        hi = min(rows, at + max(1, max_rows))
        stop = bisect_right(ends, ends[at] + max_bytes, at + 1, hi + 1) - 1
        stop = max(stop, at + 1)
        yield at, stop
        at = stop
