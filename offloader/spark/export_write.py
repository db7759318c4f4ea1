"""The executor side of an export: one source task's messages into Parquet files.

:func:`write_range_task` reads a block (or a chunk of a local ledger) through the
``pulsar-messages`` reader (reading on into the topic's next closed ledgers to finish a chunked
message the task begins), keeps the rows whose position is inside the run's range (a chunked
message's position is its FIRST chunk's: spec/export.md §5; one that cannot complete until a
later ledger closes is reported :class:`~offloader.export.plan.Held`, and the task writes
nothing at or after it), decodes the value when the
export asks (JSON / Avro: a ``value_decoded`` struct, or ``value_<field>`` columns with
``flatten``), computes each row's time partition (publish time, event time, or a field of the
decoded value: epoch millis or ISO-8601; missing or unparsable: the ``__invalid__``
partition), and writes one zstd Parquet file per partition value (split at entry boundaries
past ``max_file_size`` bytes of Arrow data), named by :mod:`offloader.export.naming`. A local
file is written under a temporary name, fsynced and renamed; an S3 object is written by
pyarrow's S3 writer under a temporary name, then copied to its name (spec/export.md, "S3
writes"). Every file is complete when the task returns its
:class:`~offloader.export.plan.WrittenFile`, which carries the file's size and its Parquet
footer as pyarrow wrote it (what an Iceberg commit needs to describe the file: no read back).
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from offloader.crashpoints import crash_point
from offloader.errors import StoreError
from offloader.export.naming import TOPIC_KEY, Partitioning, file_name, is_shortened, topic_dir
from offloader.export.plan import Held, Present, RangeTask, WrittenFile
from offloader.export.target import TargetSpec
from offloader.spark.message_chunks import ChunkFollower
from offloader.spark.message_columns import FIRST_ENTRY_COLUMN
from offloader.spark.message_rows import ValueDecoder
from offloader.spark.messages import MessagesPartition

__all__ = ["WriteConfig", "first_at_or_after", "write_range_task"]

_ROW_OVERHEAD = 96  # bytes of Arrow data per row besides the value, for --max-file-size


@dataclass(frozen=True)
class WriteConfig:
    """How tasks write (picklable)."""

    target: TargetSpec
    generation: int
    partition_by: str
    time_field: str
    field_path: tuple[str, ...] | None
    max_file_size: int
    flatten: bool
    value_format: str
    avro_schema: str | None
    #: the Arrow type of the decoded value (json / avro), None for binary / string
    decoded_type: pa.DataType | None = None
    #: the source's columns of a position and of the publish time (Kafka: partition, offset,
    #: timestamp)
    ledger_column: str = "ledger_id"
    entry_column: str = "entry_id"
    publish_column: str = "publish_time"


def _in_range(table: pa.Table, ledger_id: int, rt: RangeTask, column: str) -> pa.Table:
    if (ledger_id, 1 << 62) <= rt.start or (ledger_id, -1) > rt.end:
        return table.slice(0, 0)
    entries = table.column(column)
    mask = None
    if ledger_id == rt.start[0]:
        mask = pc.greater(entries, rt.start[1])
    if ledger_id == rt.end[0]:
        upper = pc.less_equal(entries, rt.end[1])
        mask = upper if mask is None else pc.and_(mask, upper)
    return table if mask is None else table.filter(mask)


def _position_column(table: pa.Table, conf: WriteConfig) -> str:
    """The column of the rows' positions in their ledger: a Pulsar row's first chunk's entry
    (its own entry unless it is a chunked message), a Kafka record's offset."""
    return FIRST_ENTRY_COLUMN if FIRST_ENTRY_COLUMN in table.column_names else conf.entry_column


def _inside(rt: RangeTask, position: tuple[int, int]) -> bool:
    return rt.start < position <= rt.end


def _read(reader: Any, rt: RangeTask, conf: WriteConfig) -> tuple[pa.Table | None, list[Held]]:
    """The task's rows in its range, ordered by position (a chunked message sits at its first
    chunk), and the chunked messages it began in its range that cannot complete yet (the rows
    at and after the first of them are left out: the run's watermark stops before it)."""
    held: list[Held] = []
    if isinstance(rt.task, InputPartition):  # a Kafka segment's partition
        batches = list(reader.read(rt.task))
    else:
        chunks = ChunkFollower(wait_at_end=rt.chunks_wait)
        batches = list(reader.messages(MessagesPartition(rt.task, rt.following), chunks))
        held = [Held(rt.topic, *p) for p in sorted(chunks.waiting) if _inside(rt, p)]
    if not batches:
        return None, held
    table = pa.Table.from_batches(batches)
    column = _position_column(table, conf)
    table = _in_range(table, _ledger_of(rt), rt, column)
    if held:
        table = table.filter(pc.less(table.column(column), held[0].entry_id))
    if column == FIRST_ENTRY_COLUMN and table.num_rows > 1:
        positions = table.column(column)
        if not pc.all(pc.greater_equal(positions[1:], positions[:-1])).as_py():
            table = table.take(pc.sort_indices(positions))  # stable: an entry's rows in order
    return (table if table.num_rows else None), held


def _ledger_of(rt: RangeTask) -> int:
    return rt.ledger_id if rt.ledger_id >= 0 else int(rt.task.ledger_id)


def first_at_or_after(
    reader: Any, rt: RangeTask, until_ms: int, conf: WriteConfig
) -> list[tuple[str, int, int]]:
    """``[(topic, ledger, entry)]`` of the task's first in-range message published at or
    after ``until_ms`` (empty when none)."""
    table, _held = _read(reader, rt, conf)
    if table is None:
        return []
    micros = pc.cast(table.column(conf.publish_column), pa.int64())
    late = table.filter(pc.greater_equal(micros, until_ms * 1000))
    if not late.num_rows:
        return []
    first = pc.min(late.column(_position_column(late, conf))).as_py()
    return [(rt.topic, _ledger_of(rt), int(first))]


# --- time partitions --------------------------------------------------------------------------
def _to_ms(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 1e17 else None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return _to_ms(parsed)
    return None


def _field(value: Any, path: Sequence[str]) -> Any:
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _decoded(table: pa.Table, conf: WriteConfig) -> list[Any] | None:
    """The decoded values as Python objects (dicts), or None when not decoded."""
    if conf.value_format not in ("json", "avro"):
        return None
    decoder = ValueDecoder(conf.value_format, conf.avro_schema)
    values = table.column("value").to_pylist()
    if "is_null" not in table.column_names:  # Kafka records: a null value is a tombstone
        return [None if v is None else decoder.decode(v, False, False) for v in values]
    return [
        decoder.decode(v, n, e)
        for v, n, e in zip(
            values,
            table.column("is_null").to_pylist(),
            table.column("encrypted").to_pylist(),
            strict=True,
        )
    ]


def _buckets(table: pa.Table, conf: WriteConfig, decoded: list[Any] | None) -> pa.Array:
    """Per row, its time partition's bucket (null: ``__invalid__``)."""
    size = Partitioning(conf.partition_by).size_ms * 1000
    if conf.field_path is None:
        column = conf.publish_column if conf.time_field == "publish_time" else conf.time_field
        micros = pc.cast(table.column(column), pa.int64())
        return (
            pc.divide(micros, size).combine_chunks()
            if micros.num_chunks
            else pa.array([], pa.int64())
        )
    if decoded is None:  # binary / string values: read the field from JSON
        decoded = []
        for raw in table.column("value").to_pylist():
            try:
                decoded.append(json.loads(raw) if raw is not None else None)
            except ValueError:
                decoded.append(None)
    out = []
    for value in decoded:
        ms = _to_ms(_field(value, conf.field_path))
        out.append(None if ms is None or ms < 0 else (ms * 1000) // size)
    return pa.array(out, pa.int64())


def _with_decoded(table: pa.Table, conf: WriteConfig, decoded: list[Any] | None) -> pa.Table:
    if decoded is None or conf.decoded_type is None:
        return table
    column = _struct_array(decoded, conf.decoded_type)
    if not conf.flatten or not pa.types.is_struct(conf.decoded_type):
        return table.append_column("value_decoded", column)
    for i in range(conf.decoded_type.num_fields):
        child = conf.decoded_type.field(i)
        table = table.append_column(f"value_{child.name}", pc.struct_field(column, [i]))
    return table


def _struct_array(values: list[Any], kind: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    out = []
    for v in values:  # the rows the type does not describe become NULL, as in the source
        try:
            pa.array([v], kind)
            out.append(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            out.append(None)
    return pa.array(out, kind)


# --- files --------------------------------------------------------------------------------------
def _splits(table: pa.Table, max_bytes: int, entry_column: str) -> Iterator[pa.Table]:
    """Slices of at most ``max_bytes`` (estimated Arrow bytes), cut only between positions
    (``entry_column``, in order)."""
    if table.nbytes <= max_bytes:
        yield table
        return
    lengths = pc.binary_length(table.column("value")).to_pylist()
    entries = table.column(entry_column).to_pylist()
    at, size = 0, 0
    for i, length in enumerate(lengths):
        row = (length or 0) + _ROW_OVERHEAD
        if i > at and size + row > max_bytes and entries[i] != entries[i - 1]:
            yield table.slice(at, i - at)
            at, size = i, 0
        size += row
    yield table.slice(at)


def _footer(collected: list[Any]) -> bytes:
    """The footer pyarrow just wrote (its ``FileMetaData``) as a Parquet ``_metadata`` file's
    bytes: what the driver builds the file's Iceberg ``DataFile`` from without reading it."""
    out = pa.BufferOutputStream()
    collected[-1].write_metadata_file(out)
    return bytes(out.getvalue().to_pybytes())


def _write_s3(fs: Any, path: str, table: pa.Table) -> tuple[int, bytes]:
    """pyarrow's S3 writer: the file under a temporary name (a small one in one PUT, a large
    one in parts), then copied to its name (CopyObject: the name appears complete or not at
    all) and the temporary object deleted. A kill leaves the temporary object or an unfinished
    upload, both removed by the next run's cleanup; an error here deletes it."""
    directory, _, name = path.rpartition("/")
    tmp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
    collected: list[Any] = []
    try:
        with fs.open_output_stream(tmp) as out:
            pq.write_table(table, out, compression="zstd", metadata_collector=collected)
            size = int(out.tell())
        crash_point("export.before_put")
        fs.move(tmp, path)  # CopyObject, then DeleteObject of the temporary name
    except OSError as exc:
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise StoreError(f"export target: cannot write s3://{path}: {exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise
    crash_point("export.after_file")
    return size, _footer(collected)


def _write_whole(conf: WriteConfig, relative: str, table: pa.Table) -> tuple[int, bytes]:
    """GCS and Azure: the file built in memory and put whole through :mod:`offloader.store`
    (one PUT: the name appears complete or not at all; no rename, which Azure's flat namespace
    does not have)."""
    out = pa.BufferOutputStream()
    collected: list[Any] = []
    pq.write_table(table, out, compression="zstd", metadata_collector=collected)
    data = out.getvalue()
    crash_point("export.before_put")
    store = conf.target.open_store()
    try:
        store.put(relative, memoryview(data), {})
    finally:
        store.close()
    crash_point("export.after_file")
    return data.size, _footer(collected)


def _write(conf: WriteConfig, fs: Any, relative: str, table: pa.Table) -> tuple[int, bytes]:
    """Write ``table`` as the file ``relative``; its size and its footer (:func:`_footer`)."""
    path = conf.target.path(relative)
    if conf.target.is_s3:
        return _write_s3(fs, path, table)
    if conf.target.is_remote:
        return _write_whole(conf, relative, table)
    directory, _, name = path.rpartition("/")
    os.makedirs(directory, exist_ok=True)
    tmp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex}"
    collected: list[Any] = []
    try:
        with open(tmp, "wb") as f:
            pq.write_table(table, f, compression="zstd", metadata_collector=collected)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        crash_point("export.before_rename")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    crash_point("export.after_file")
    return size, _footer(collected)


def write_range_task(
    reader: Any, rt: RangeTask, conf: WriteConfig, fs: Any = None
) -> list[WrittenFile | Held]:
    """Write the task's rows; the files written (complete), and the chunked messages held
    back."""
    table, held = _read(reader, rt, conf)
    if table is None:
        return [*held]
    decoded = _decoded(table, conf)
    buckets = _buckets(table, conf, decoded)
    table = _with_decoded(table, conf, decoded)
    runs: list[int] | None = None
    if rt.present is not None:  # a repair: only the rows no file that is there holds
        table, buckets, runs = _not_present(table, buckets, rt.present, conf)
        if not table.num_rows:
            return [*held]
    if fs is None and conf.target.is_remote:
        fs = conf.target.open()
    return [*_write_groups(rt, conf, table, buckets, fs, runs), *held]


def _not_present(
    table: pa.Table, buckets: pa.Array, present: Sequence[Present], conf: WriteConfig
) -> tuple[pa.Table, pa.Array, list[int]]:
    """The rows no present file holds (a file holds every row of its partition value whose
    position is in its range), and per row kept its run: how many present files of its value
    begin at or before it (a run is cut into files from its first row, as the run that wrote
    the missing files cut them after the file before)."""
    parts = Partitioning(conf.partition_by)
    spans: dict[str, list[tuple[int, int]]] = {}
    for value, first, last in present:
        spans.setdefault(value, []).append((first, last))
    for found in spans.values():
        found.sort()
    positions = table.column(_position_column(table, conf)).to_pylist()
    keep: list[int] = []
    runs: list[int] = []
    for i, (position, bucket) in enumerate(zip(positions, buckets.to_pylist(), strict=True)):
        found = spans.get(parts.value(bucket), [])
        k = bisect.bisect_right(found, (position, 1 << 62))
        if k and found[k - 1][1] >= position:
            continue
        keep.append(i)
        runs.append(k)
    rows = pa.array(keep, pa.int64())
    return table.take(rows), buckets.take(rows), runs


def _file_rows(piece: pa.Table, ledger_id: int) -> pa.Table:
    """A file's rows as written: without the position column the export added, in the
    source's order (ledger, entry, batch index: a chunked message that finished after later
    entries began goes back to its last chunk's place)."""
    if FIRST_ENTRY_COLUMN not in piece.column_names:
        return piece
    positions = piece.column(FIRST_ENTRY_COLUMN)
    piece = piece.drop_columns([FIRST_ENTRY_COLUMN])
    moved = pc.or_(
        pc.not_equal(positions, piece.column("entry_id")),
        pc.not_equal(piece.column("ledger_id"), ledger_id),
    )
    if piece.num_rows > 1 and pc.any(moved).as_py():
        keys = [("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")]
        piece = piece.sort_by(keys)
    return piece


def _by_run(rows: pa.Table, runs: list[int] | None) -> list[pa.Table]:
    """A group's rows as runs (:func:`_not_present`; all of them when not a repair)."""
    if runs is None:
        return [rows]
    run = pa.array(runs, pa.int64())
    return [rows.filter(pc.equal(run, r)) for r in sorted(set(runs))]


def _write_groups(
    rt: RangeTask,
    conf: WriteConfig,
    table: pa.Table,
    buckets: pa.Array,
    fs: Any,
    runs: list[int] | None = None,
) -> list[WrittenFile]:
    parts = Partitioning(conf.partition_by)
    ledger_id = _ledger_of(rt)
    out: list[WrittenFile] = []
    values = [v for v in pc.unique(buckets).to_pylist() if v is not None]
    masks: list[tuple[int | None, Any]] = [(int(v), pc.equal(buckets, v)) for v in sorted(values)]
    if buckets.null_count:
        masks.append((None, pc.is_null(buckets)))
    groups: list[tuple[int | None, pa.Table]] = []
    for bucket, mask in masks:
        group_runs = None
        if runs is not None:
            group_runs = [r for r, m in zip(runs, mask.to_pylist(), strict=True) if m]
        groups += [(bucket, t) for t in _by_run(table.filter(mask), group_runs)]
    directory_of_topic = topic_dir(rt.dir_topic)
    for bucket, rows in groups:
        directory = f"{directory_of_topic}/{parts.directory(bucket)}"
        column = _position_column(rows, conf)
        for piece in _splits(rows, conf.max_file_size, column):
            entries = piece.column(column)
            first, last = int(entries[0].as_py()), int(entries[-1].as_py())
            name = file_name(conf.generation, ledger_id, first, last, parts.value(bucket))
            relative = f"{directory}/{name}"
            piece = _file_rows(piece, ledger_id)
            if is_shortened(directory_of_topic):  # the full name, beside the rows' column
                meta = {**(piece.schema.metadata or {}), TOPIC_KEY.encode(): rt.dir_topic.encode()}
                piece = piece.replace_schema_metadata(meta)
            size, footer = _write(conf, fs, relative, piece)
            top = pc.max(piece.column(conf.publish_column)).value
            out.append(
                WrittenFile(
                    rt.topic,
                    relative,
                    ledger_id,
                    first,
                    last,
                    piece.num_rows,
                    piece.num_rows if bucket is None else 0,
                    size,
                    None if top is None else int(top) // 1000,
                    footer,
                )
            )
    return out
