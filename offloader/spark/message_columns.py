"""Arrow batches of ``pulsar-messages`` rows built column by column, entry by entry.

:class:`MessageColumns` owns a task's rows between two Arrow batches. Each whole entry (a
single message, a batch, or a reassembled chunked message) is decrypted, decompressed and split
into columns. For a batch of binary values, :func:`formats.pulsar.batch.split_into` (the C
splitter when built) appends its rows straight into the staging bytearrays: batch index,
sequence id, null flags and the value and key bytes with their int32 offsets, in the layout
Arrow takes as it is (``from_buffers``, no copy, no cast, no Python object per row); ordering
keys, properties (a map's offsets, its keys' and values' offsets and bytes) and event times
(int64 microseconds, a validity byte) likewise (:mod:`formats.pulsar.rich_columns`), each
column left empty (no work) until a row has one. Other entries (single messages, decoded value
formats, what the C split leaves aside) go through :func:`~formats.pulsar.batch.split_columns`'
lists into the same staging. Values an entry's rows
share are kept once per entry. :meth:`MessageColumns.flush` turns the staging into one Arrow
batch (``message_id`` and the timestamps are computed by Arrow, not per row in Python) once
``batch_rows`` rows or ``batch_bytes`` value bytes are held; pushed time comparisons are applied
there, exactly as Spark compares (a NULL time matches nothing).

With ``first_entries`` (the export's reader) each batch ends with one more column,
:data:`FIRST_ENTRY_COLUMN`: the entry id of the row's first chunk (the row's own entry id
when it is not a chunked message), the position the export places the row at.

A worker therefore holds its block buffer, one decompressed batch and the rows of the Arrow
batch being built. Imported by executors; pure apart from pyarrow.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from formats.pulsar.batch import split_columns, split_into
from formats.pulsar.compression import DEFAULT_LIMIT, NONE, decompress
from formats.pulsar.errors import PulsarMessageError
from formats.pulsar.rich_columns import MAX_SPARK_MS, append_rich, last_offset, rich_buffers
from formats.pulsar.speedups import C_MODULE

if TYPE_CHECKING:
    from formats.pulsar.crypto import Decryptor
    from formats.pulsar.entry import ParsedEntry
    from offloader.spark.message_rows import ValueDecoder

__all__ = ["FIRST_ENTRY_COLUMN", "MessageColumns", "TimePredicate"]

#: the column ``first_entries`` adds (not a column of the source's schema)
FIRST_ENTRY_COLUMN = "__first_entry_id"

#: a pushed comparison ``(column, op, microseconds)`` on publish_time or event_time
TimePredicate = tuple[str, str, int]

_MS = 1000
_MAX_I64 = (1 << 63) - 1
_MAX_OFFSET = (1 << 31) - 1
#: staged bytes below this plus one entry (at most ``limit``, 1 GiB) fit Arrow's int32 offsets
_MAX_BATCH_BYTES = 1 << 30
_TS = pa.timestamp("us", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())
_OPS = {
    "=": pc.equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
    "<": pc.less,
    "<=": pc.less_equal,
}


class MessageColumns:
    """The staged rows of one task; :meth:`add` an entry, :meth:`flush` when :attr:`full`."""

    def __init__(
        self,
        topic: str | None,
        schema: pa.Schema,
        values: ValueDecoder,
        *,
        batch_rows: int,
        batch_bytes: int,
        predicates: Sequence[TimePredicate] = (),
        decryptor: Decryptor | None = None,
        partition: int = -1,
        limit: int = DEFAULT_LIMIT,
        first_entries: bool = False,
    ) -> None:
        self.topic = topic
        self.first_entries = first_entries
        self.schema = (
            schema.append(pa.field(FIRST_ENTRY_COLUMN, pa.int64())) if first_entries else schema
        )
        self.values = values
        self.batch_rows = max(1, batch_rows)
        self.batch_bytes = min(max(1, batch_bytes), _MAX_BATCH_BYTES)
        self.predicates = tuple(predicates)
        self.decryptor = decryptor
        self.partition = partition
        self.limit = limit
        self._binary = values.fmt == "binary"
        # what the C walk decompresses a compressed batch with (the per-entry path's limit)
        self._inflate = functools.partial(decompress, limit=limit)
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        # fixed-width and binary columns in bytearrays (native byte order) that the C split
        # appends to (no Python object per row) and Arrow takes as they are
        self._ledger = bytearray()  # int64
        self._entry = bytearray()  # int64
        self._first = bytearray()  # int64 (first_entries only)
        self._publish = bytearray()  # int64 microseconds (0 for a NULL: see _publish_nulls)
        self._publish_nulls: list[int] = []  # rows whose publish time is past Spark's range
        self._index = bytearray()
        self._seq = bytearray()
        self._seq_nulls: list[int] = []  # rows whose sequence id is past BIGINT (rare)
        self._null = bytearray()
        self._encrypted = bytearray()
        self._offsets = bytearray(4)  # int32 value offsets, from 0
        self._data = bytearray()
        self._key_offsets = bytearray(4)
        self._key_data = bytearray()
        self._key_valid = bytearray()
        # ordering_key, properties and event_time as Arrow buffers, each column lazy (empty
        # while no row has one): formats.pulsar.rich_columns
        self._rich = rich_buffers()
        self._split = (
            self._index,
            self._seq,
            self._null,
            self._offsets,
            self._data,
            self._key_offsets,
            self._key_data,
            self._key_valid,
            *self._rich,
        )
        self._id_offsets = bytearray(4)  # message_id: int32 offsets, from 0, and the bytes
        self._id_data = bytearray()
        # what an entry's rows share, once per entry (once per run of entries in C), spread
        # over its rows by ``_run`` (int32)
        self._run = bytearray()
        self._producer: list[str] = []
        self._schema_version: list[bytes | None] = []
        # the 26 bytearrays ``decode_entries_into`` appends to (the rich ones last)
        self._block = (
            *self._split[:8],
            self._ledger,
            self._entry,
            self._publish,
            self._run,
            self._encrypted,
            self._id_offsets,
            self._id_data,
            self._first,
            *self._rich,
        )
        self._decoded: list[Any] = []

    @property
    def full(self) -> bool:
        """Whether the staged rows make a batch (``batch_rows`` rows or ``batch_bytes`` bytes)."""
        return self.rows >= self.batch_rows or len(self._data) >= self.batch_bytes

    @property
    def takes_packed(self) -> bool:
        """Whether :meth:`add_packed` stages entries (the C extension is built, binary values)."""
        return _C_BLOCK is not None and self._binary

    def add(
        self, parsed: ParsedEntry, ledger_id: int, entry_id: int, first_entry: int | None = None
    ) -> int:
        """Stage the rows of a whole entry (not a chunk, or a reassembled one); markers give
        none. Returns the number of rows staged. Bad input: the typed error, located.
        ``first_entry``: a reassembled message's first chunk's entry id (``first_entries``)."""
        md = parsed.metadata
        if md.marker_type is not None:
            return 0
        try:
            n = self._add(parsed, ledger_id, entry_id)
        except PulsarMessageError as exc:
            raise exc.located(ledger_id, entry_id) from exc.__cause__
        if self.first_entries and n:
            self._first += array("q", (entry_id if first_entry is None else first_entry,)) * n
        return n

    def add_packed(
        self,
        data: bytes | memoryview,
        offsets: bytes | memoryview,
        start: int,
        stop: int,
        first_entry_id: int,
        ledger_id: int,
    ) -> int:
        """Stage entries ``start``, ``start + 1``, ... of a packed block (entry
        ``first_entry_id + i`` is ``data[offsets[i]:offsets[i + 1]]``, int32 offsets) in one
        C call, up to ``stop`` or until :attr:`full`; returns the index of the first entry not
        staged. A compressed batch is decompressed (the per-entry path's limit) and split in
        the same call. An entry the C walk leaves aside (encrypted, a compressed single
        message, a chunk, a marker, malformed or failing to decompress, or a value format
        other than binary: every entry without the C
        extension) is not staged: the caller gives it to :meth:`add`, which judges it."""
        if not self.takes_packed or start >= stop:
            return start
        nxt, n = _C_BLOCK(  # type: ignore[misc]
            data,
            offsets,
            start,
            stop,
            first_entry_id,
            ledger_id,
            self.partition,
            self.batch_rows - self.rows,
            self.batch_bytes,
            self.first_entries,
            self._block,
            self._producer,
            self._schema_version,
            self._inflate,
        )
        self.rows += n
        return nxt  # type: ignore[no-any-return]

    def _add(self, parsed: ParsedEntry, ledger_id: int, entry_id: int) -> int:
        md = parsed.metadata
        payload = parsed.payload
        encrypted = bool(md.encryption_keys)
        if encrypted and self.decryptor is not None:
            payload = self.decryptor.decrypt(md, payload)
            encrypted = False
        if not encrypted:
            codec = md.compression or NONE
            if codec != NONE:
                payload = decompress(codec, payload, md.uncompressed_size or 0, self.limit)
        staged = None
        if md.is_batch and not encrypted and self._binary:
            staged = split_into(md, payload, self._split)
        if staged is not None:
            n = staged
            if not n:
                return 0
            self._encrypted += bytes(n)
        elif md.is_batch and not encrypted:
            index, keys, ordering, props, events, seqs, nulls, values, _b64 = split_columns(
                md, payload
            )
            n = len(index)
            if not n:
                return 0
            base = md.sequence_id
            seq = [base + i if s is None else s for i, s in zip(index, seqs, strict=True)]
            self._stage_rows(index, keys, ordering, props, events, seq, nulls)
            self._encrypted += bytes(n)
            self._add_values(values, nulls, encrypted)
        else:
            n = 1
            is_null = bool(md.null_value) and not encrypted
            self._stage_rows(
                [-1],
                [None if md.null_partition_key else md.partition_key],
                [md.ordering_key],
                [md.properties],
                [md.event_time],
                [md.sequence_id],
                [is_null],
            )
            self._encrypted.append(encrypted)
            self._add_values([b"" if is_null else payload], [is_null], encrypted)
        self._ledger += array("q", (ledger_id,)) * n
        self._entry += array("q", (entry_id,)) * n
        if md.publish_time > MAX_SPARK_MS:  # past Spark's range: NULL, as before
            self._publish_nulls.extend(range(self.rows, self.rows + n))
            self._publish += bytes(8 * n)
        else:
            self._publish += array("q", (md.publish_time * _MS,)) * n
        self._run += array("i", (len(self._producer),)) * n
        self._producer.append(md.producer_name)
        self._schema_version.append(md.schema_version)
        _message_ids(
            f"{ledger_id}:{entry_id}:{self.partition}:".encode(),
            self._index[-4 * n :],
            self._id_offsets,
            self._id_data,
        )
        self.rows += n
        return n

    def _stage_rows(
        self,
        index: Sequence[int],
        keys: Sequence[str | None],
        ordering: Sequence[bytes | None],
        props: Sequence[Any],
        events: Sequence[int | None],
        seqs: Sequence[int],
        nulls: Sequence[bool],
    ) -> None:
        """The list path (one entry, or a batch the C split leaves to it): all but the values."""
        if not append_rich(self._rich, self.rows, ordering, props, events):
            raise PulsarMessageError(
                "ordering keys or properties of more than 2 GiB in one Arrow batch"
            )
        self._index += array("i", index)
        for s in seqs:
            if s > _MAX_I64:  # a sequence id past BIGINT: NULL, as before
                self._seq_nulls.append(len(self._seq) // 8)
                s = 0
            self._seq += s.to_bytes(8, sys.byteorder, signed=True)
        self._null += bytes(nulls)
        key_bytes = [b"" if k is None else k.encode("utf-8") for k in keys]
        if len(self._key_data) + sum(map(len, key_bytes)) > _MAX_OFFSET:
            raise PulsarMessageError("keys of more than 2 GiB in one Arrow batch")
        offsets = accumulate(map(len, key_bytes), initial=last_offset(self._key_offsets))
        next(offsets)
        self._key_offsets += array("i", offsets)
        self._key_data += b"".join(key_bytes)
        self._key_valid += bytes(k is not None for k in keys)

    def _add_values(self, values: Sequence[bytes], nulls: Sequence[bool], encrypted: bool) -> None:
        if self._binary:
            joined = b"".join(values)
            if len(self._data) + len(joined) > _MAX_OFFSET:
                raise PulsarMessageError(
                    "values of more than 2 GiB in one Arrow batch; lower batch_bytes"
                )
            offsets = accumulate(map(len, values), initial=last_offset(self._offsets))
            next(offsets)
            self._offsets += array("i", offsets)
            self._data += joined
            return
        decode = self.values.decode
        self._decoded.extend(
            decode(v, null, encrypted) for v, null in zip(values, nulls, strict=True)
        )

    def flush(self) -> pa.RecordBatch | None:
        """The staged rows as one Arrow batch (None when no row is staged, or none passes the
        pushed time comparisons); the staging starts empty again."""
        if not self.rows:
            return None
        n = self.rows
        ledger = _fixed(pa.int64(), n, self._ledger)
        entry = _fixed(pa.int64(), n, self._entry)
        index = _fixed(pa.int32(), n, self._index)
        run = _fixed(pa.int32(), n, self._run)
        message_id = pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(self._id_offsets), pa.py_buffer(self._id_data)]
        )
        if self._binary:
            value = pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(self._offsets), pa.py_buffer(self._data)]
            )
        else:
            value = pa.array(self._decoded, self.schema.field("value").type)
        seq = _nulled(_fixed(pa.int64(), n, self._seq), self._seq_nulls)
        key_valid = None
        if 0 in self._key_valid:
            key_valid = _fixed(pa.int8(), n, self._key_valid).cast(pa.bool_()).buffers()[1]
        key = pa.Array.from_buffers(
            pa.string(),
            n,
            [key_valid, pa.py_buffer(self._key_offsets), pa.py_buffer(self._key_data)],
        )
        columns = [
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            ledger,
            entry,
            index,
            message_id,
            key,
            _ordering_keys(self._rich, n),
            _properties(self._rich, n),
            _nulled(_fixed(_TS, n, self._publish), self._publish_nulls),
            _event_times(self._rich, n),
            _spread(self._producer, pa.string(), run, n),
            seq,
            _spread(self._schema_version, pa.binary(), run, n),
            _bools(self._null, n),
            _bools(self._encrypted, n),
            value,
        ]
        if self.first_entries:
            columns.append(_fixed(pa.int64(), n, self._first))
        self._reset()
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if self.predicates:
            batch = self._filtered(batch)
        return batch if batch.num_rows else None

    def _filtered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        mask: Any = None
        for column, op, micros in self.predicates:
            test = _OPS[op](batch.column(column), pa.scalar(micros, _TS))
            mask = test if mask is None else pc.and_kleene(mask, test)
        return batch.filter(mask, null_selection_behavior="drop")


def _message_ids_py(prefix: bytes, index: bytearray, offsets: bytearray, data: bytearray) -> None:
    """The pure-Python twin of the C ``message_ids_into``: ``prefix + str(i)`` for each int32
    ``i`` of ``index`` appended to the message_id column's ``offsets`` and ``data``."""
    ids = [prefix + str(i).encode() for i in array("i", bytes(index))]
    ends = accumulate(map(len, ids), initial=last_offset(offsets))
    next(ends)
    offsets += array("i", ends)
    data += b"".join(ids)


#: one C call per run of a packed block's entries (None: no extension, the per-entry path)
_C_BLOCK = C_MODULE.decode_entries_into if C_MODULE is not None else None
_message_ids = C_MODULE.message_ids_into if C_MODULE is not None else _message_ids_py


def _nulled(values: pa.Array, rows: list[int]) -> pa.Array:
    """``values`` with the given rows NULL (rare: values past a column's range)."""
    if not rows:
        return values
    mask = pc.is_in(pa.array(range(len(values))), pa.array(rows))
    return pc.if_else(mask, pa.scalar(None, values.type), values)


def _spread(shared: list[Any], kind: pa.DataType, run: pa.Array, n: int) -> pa.Array:
    """The values entries share (one per run of rows) over their rows: one repeated value when
    they are all the same (the common case: one producer), else a take."""
    if shared.count(shared[0]) == len(shared):
        return pa.repeat(pa.scalar(shared[0], kind), n)
    return pc.take(pa.array(shared, kind), run)


def _bools(flags: bytearray, n: int) -> pa.Array:
    """A staged int8 flag column (0 or 1) as booleans; no kernel when none is set."""
    if 1 not in flags:
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bytes((n + 7) // 8))])
    return _fixed(pa.int8(), n, flags).cast(pa.bool_())


def _valid(flags: bytearray, n: int) -> pa.Buffer | None:
    """A staged int8 validity column as an Arrow validity bitmap (None: every row valid)."""
    if 0 not in flags:
        return None
    return _fixed(pa.int8(), n, flags).cast(pa.bool_()).buffers()[1]


def _ordering_keys(rich: tuple[bytearray, ...], n: int) -> pa.Array:
    """The ordering_key column from its staged buffers (all NULL when no row has one)."""
    if not rich[2]:
        return pa.nulls(n, pa.binary())
    buffers = [_valid(rich[2], n), pa.py_buffer(rich[0]), pa.py_buffer(rich[1])]
    return pa.Array.from_buffers(pa.binary(), n, buffers)


def _properties(rich: tuple[bytearray, ...], n: int) -> pa.Array:
    """The properties column from its staged buffers (all empty maps when no row has one)."""
    offsets = rich[3] if rich[3] else array("i", (0,)) * (n + 1)
    count = len(rich[4]) // 4 - 1
    keys = pa.Array.from_buffers(pa.string(), max(count, 0), [None, *_strings(rich[4], rich[5])])
    values = pa.Array.from_buffers(pa.string(), max(count, 0), [None, *_strings(rich[6], rich[7])])
    return pa.MapArray.from_arrays(_fixed(pa.int32(), n + 1, offsets), keys, values, type=_MAP)


def _strings(offsets: bytearray, data: bytearray) -> list[pa.Buffer]:
    """A string child's offsets and bytes (no entry yet: the one offset 0)."""
    return [pa.py_buffer(offsets if offsets else bytes(4)), pa.py_buffer(data)]


def _event_times(rich: tuple[bytearray, ...], n: int) -> pa.Array:
    """The event_time column (int64 microseconds staged; NULL: unset or past Spark's range)."""
    if not rich[9]:
        return pa.nulls(n, _TS)
    return pa.Array.from_buffers(_TS, n, [_valid(rich[9], n), pa.py_buffer(rich[8])])


def _fixed(kind: pa.DataType, n: int, values: array[Any] | bytearray) -> pa.Array:
    """A typed array's bytes as an Arrow array (no copy; the array is not touched again)."""
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(values)])
