"""MessageColumns (rows staged column by column, entry by entry) gives exactly the Arrow batches
the per-message path (``iter_messages`` -> ``messages_batch``) gives: every column, type and
value, for batches, single messages, nulls, encryption, chunks, markers, odd values; batches cut
at ``batch_rows`` / ``batch_bytes``; pushed time comparisons applied as Spark would."""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pytest

from formats.pulsar import (
    ChunkAssembler,
    Decryptor,
    Encryptor,
    OutgoingMessage,
    encode_chunks,
    encode_entry,
    generate_rsa_pem,
    iter_messages,
    parse_entry,
)
from formats.pulsar.compression import LZ4, ZLIB, ZSTD
from formats.pulsar.errors import MalformedMessageError, PulsarMessageError
from offloader.spark.message_columns import MessageColumns
from offloader.spark.message_rows import ValueDecoder, messages_arrow_schema, messages_batch

T0 = 1_750_000_000_000
TOPIC = "persistent://public/default/cols"


def _schema(fmt: str = "binary") -> pa.Schema:
    """The source's Arrow schema (as Spark hands it to the reader) for ``fmt``."""
    value = {"binary": pa.binary(), "string": pa.string()}.get(fmt)
    return messages_arrow_schema(value or pa.struct([("n", pa.int64())]))


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    return generate_rsa_pem(1024)


def _entries(public: bytes) -> list[bytes]:
    out = []
    for i in range(12):
        msgs = [
            OutgoingMessage(
                json.dumps({"n": i * 10 + j}).encode(),
                key=None if j == 1 else f"k{j}",
                ordering_key=b"ok" if j == 2 else None,
                properties=(("a", str(j)), ("b", "x")) if j % 2 else (),
                event_time=T0 + j if j % 3 else None,
            )
            for j in range(1 + i % 5)
        ]
        if i == 4:
            msgs[0] = OutgoingMessage(None, key="tomb")
        out.append(
            encode_entry(
                msgs,
                producer_name=f"p{i % 2}",
                sequence_id=(1 << 63) + 5 if i == 9 else i * 10,
                publish_time=(1 << 62) if i == 10 else T0 + i,
                compression=(0, LZ4, ZLIB, ZSTD)[i % 4],
                batch=len(msgs) > 1 or i % 3 != 0,
                schema_version=b"\x00\x01" if i == 5 else None,
                encryptor=Encryptor(public, "k") if i == 7 else None,
            )
        )
        if i == 2:  # a marker: not a user message
            out.append(
                encode_entry(
                    [OutgoingMessage(b"m")],
                    producer_name="p0",
                    sequence_id=0,
                    publish_time=T0,
                    batch=False,
                    marker_type=1,
                )
            )
        if i == 6:
            out.extend(
                encode_chunks(
                    OutgoingMessage(os.urandom(2500), key="big", properties=(("c", "1"),)),
                    chunk_size=600,
                    producer_name="p9",
                    sequence_id=99,
                    publish_time=T0 + 60,
                    compression=LZ4,
                )
            )
    return out


def _columns(
    entries: list[bytes], schema: pa.Schema, values: ValueDecoder, **kw: Any
) -> list[pa.RecordBatch]:
    rows = MessageColumns(TOPIC, schema, values, **kw)
    chunks = ChunkAssembler()
    out = []
    for entry_id, data in enumerate(entries):
        parsed = parse_entry(data, ledger_id=7, entry_id=entry_id)
        if parsed.metadata.is_chunk:
            whole = chunks.add(parsed, 7, entry_id)
            if whole is None:
                continue
            parsed = whole
        rows.add(parsed, 7, entry_id)
        if rows.full:
            out.append(rows.flush())
    out.append(rows.flush())
    return [b for b in out if b is not None]


def _reference(entries: list[bytes], schema: pa.Schema, values: ValueDecoder, **kw: Any) -> Any:
    msgs = list(iter_messages([(7, i, e) for i, e in enumerate(entries)], **kw))
    return pa.Table.from_batches([messages_batch(TOPIC, msgs, schema, values)])


@pytest.mark.parametrize("fmt", ["binary", "string", "json"])
def test_same_batches_as_the_per_message_path(keys: tuple[bytes, bytes], fmt: str) -> None:
    private, public = keys
    entries = _entries(public)
    schema = _schema(fmt)
    values = ValueDecoder(fmt)
    got = pa.Table.from_batches(
        _columns(entries, schema, values, batch_rows=5, batch_bytes=1 << 20), schema=schema
    )
    want = _reference(entries, schema, values)
    assert got.num_rows == want.num_rows > 30
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()
    # the odd values: a sequence id past BIGINT and a publish time past Spark's range are NULL
    rows = got.to_pylist()
    assert any(r["sequence_id"] is None for r in rows)
    assert any(r["publish_time"] is None for r in rows)
    assert sum(r["key"] == "big" for r in rows) == 1
    # with the key, the encrypted entry decodes as the reference does
    dec = Decryptor(private)
    got_dec = pa.Table.from_batches(
        _columns(entries, schema, values, batch_rows=8192, batch_bytes=1, decryptor=dec),
        schema=schema,
    )
    assert got_dec.to_pylist() == _reference(entries, schema, values, decryptor=dec).to_pylist()


def test_batches_cut_at_rows_and_bytes(keys: tuple[bytes, bytes]) -> None:
    entries = _entries(keys[1])
    schema = _schema()
    values = ValueDecoder("binary")
    by_rows = _columns(entries, schema, values, batch_rows=4, batch_bytes=1 << 30)
    # a batch is flushed after the entry that fills it: at most one entry's rows (<= 5) over
    assert all(b.num_rows < 4 + 5 for b in by_rows) and len(by_rows) > 5
    by_bytes = _columns(entries, schema, values, batch_rows=1 << 20, batch_bytes=40)
    assert len(by_bytes) > 2
    for batches in (by_rows, by_bytes):
        assert pa.Table.from_batches(batches).equals(
            pa.Table.from_batches(
                _columns(entries, schema, values, batch_rows=8192, batch_bytes=1 << 22)
            )
        )


def test_time_predicates_as_spark_compares(keys: tuple[bytes, bytes]) -> None:
    entries = _entries(keys[1])
    schema = _schema()
    values = ValueDecoder("binary")
    lo, hi = (T0 + 3) * 1000, (T0 + 8) * 1000
    preds = [("publish_time", ">=", lo), ("publish_time", "<", hi), ("event_time", ">", 0)]
    got = pa.Table.from_batches(
        _columns(entries, schema, values, batch_rows=3, batch_bytes=1 << 20, predicates=preds),
        schema=schema,
    ).to_pylist()
    every = _reference(entries, schema, values).to_pylist()

    def us(ts: Any) -> int | None:
        return None if ts is None else int(ts.timestamp() * 1_000_000)

    want = [
        r
        for r in every
        if us(r["publish_time"]) is not None
        and lo <= us(r["publish_time"]) < hi  # type: ignore[operator]
        and r["event_time"] is not None  # NULL matches nothing
    ]
    assert got == want and 0 < len(got) < len(every)


def test_a_bad_batch_is_a_located_typed_error() -> None:
    good = encode_entry(
        [OutgoingMessage(b"x" * 10), OutgoingMessage(b"y")],
        producer_name="p",
        sequence_id=0,
        publish_time=T0,
    )
    parsed = parse_entry(good)
    parsed.payload = parsed.payload[:-3]  # the batch's last payload cut short
    rows = MessageColumns(TOPIC, _schema(), ValueDecoder("binary"), batch_rows=10, batch_bytes=10)
    with pytest.raises(PulsarMessageError) as err:
        rows.add(parsed, 3, 4)
    assert (err.value.ledger_id, err.value.entry_id) == (3, 4)
    assert not isinstance(err.value, MalformedMessageError) or "batch" in str(err.value)
    assert rows.flush() is None  # nothing staged from the bad entry


@pytest.mark.parametrize("path", ["c", "python", "lists"])
def test_each_split_path_gives_the_reference_batches(
    keys: tuple[bytes, bytes], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C split into the column bytearrays, its pure-Python twin, and the list path (what
    both leave aside: a sequence id past BIGINT, offsets past 2**31 - 1) give the same rows."""
    from formats.pulsar import batch as batch_module
    from offloader.spark import message_columns

    calls: list[bool] = []

    def split(md: Any, data: bytes, cols: Any) -> Any:
        calls.append(True)
        if path == "lists":
            return None
        return batch_module.split_into(md, data, cols, use_c=path == "c")

    monkeypatch.setattr(message_columns, "split_into", split)
    entries = _entries(keys[1])
    schema = _schema("binary")
    values = ValueDecoder("binary")
    got = pa.Table.from_batches(
        _columns(entries, schema, values, batch_rows=7, batch_bytes=1 << 20), schema=schema
    )
    assert calls
    assert got.to_pylist() == _reference(entries, schema, values).to_pylist()
    # a key with no row set (all NULL) and with every row set, in one Arrow batch each
    no_keys = [
        encode_entry(
            [OutgoingMessage(b"v%d" % j, key=None if i else f"é{j}") for j in range(4)],
            producer_name="p",
            sequence_id=i,
            publish_time=T0,
        )
        for i in range(2)
    ]
    for cut in (4, 8):
        got = pa.Table.from_batches(
            _columns(no_keys, schema, values, batch_rows=cut, batch_bytes=1 << 20), schema=schema
        )
        assert got.to_pylist() == _reference(no_keys, schema, values).to_pylist()


def _rich_entries() -> list[bytes]:
    """Batches and single messages whose rows mix every kind of property, event time and
    ordering key, with whole entries (and Arrow batches) where no row has any."""
    props = [(), (("k", "v"),), (("", ""), ("ключ", "значение"), ("k", "1"), ("k", "2"))]
    events = [None, 0, 1, T0, (1 << 63) // 1000 - 1, (1 << 63) // 1000, 2**63, 2**64 - 1]
    out = []
    for i in range(14):
        plain = i in (0, 1, 7, 8)
        msgs = [
            OutgoingMessage(
                b"v%d" % j,
                key=f"k{j}",
                ordering_key=None if plain or j % 3 == 0 else b"o" * (j % 3 - 1),
                properties=() if plain else props[(i + j) % 3],
                event_time=None if plain else events[(i * 3 + j) % len(events)],
            )
            for j in range(1 + i % 4)
        ]
        single = i % 5 == 2  # a single (not batched) message: the list path
        out.append(
            encode_entry(
                msgs[:1] if single else msgs,
                producer_name="p",
                sequence_id=i,
                publish_time=T0,
                batch=not single,
            )
        )
    return out


@pytest.mark.parametrize("path", ["c", "python"])
@pytest.mark.parametrize("cut", [1, 3, 100])
def test_properties_event_times_and_ordering_keys_as_the_reference(
    path: str, cut: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rich columns staged as buffers, through the C split or its Python twin (single
    messages through the list path), cut into Arrow batches anywhere: the reference rows
    (properties in order, duplicate keys kept; event time 0 unset, past Spark's range NULL)."""
    from formats.pulsar import batch as batch_module
    from offloader.spark import message_columns

    def split(md: Any, data: bytes, cols: Any) -> Any:
        return batch_module.split_into(md, data, cols, use_c=path == "c")

    monkeypatch.setattr(message_columns, "split_into", split)
    entries = _rich_entries()
    schema, values = _schema("binary"), ValueDecoder("binary")
    batches = _columns(entries, schema, values, batch_rows=cut, batch_bytes=1 << 20)
    got = _micros(pa.Table.from_batches(batches, schema=schema))
    assert got == _micros(_reference(entries, schema, values))
    rows = got
    assert ("ключ", "значение") in rows[-1]["properties"] or any(
        ("k", "2") in r["properties"] for r in rows
    )
    assert any(r["event_time"] is None for r in rows[4:])
    assert any(r["ordering_key"] == b"" for r in rows)
    assert (len(batches) == 1) == (cut == 100)  # cut across the rich rows, or not


def test_plain_rows_start_no_rich_column() -> None:
    rows = MessageColumns(
        TOPIC, _schema(), ValueDecoder("binary"), batch_rows=100, batch_bytes=1 << 20
    )
    for entry_id, data in enumerate(_rich_entries()[:2]):
        rows.add(parse_entry(data), 7, entry_id)
    assert rows.rows == 3 and not any(rows._rich)
    rows.add(parse_entry(_rich_entries()[3]), 7, 2)
    assert all(rows._rich[i] for i in (0, 2, 3, 4, 6, 8, 9))
    assert len(rows._rich[9]) == rows.rows  # the rows before it filled in
    batch = rows.flush()
    assert batch is not None and batch.column("properties").to_pylist()[:3] == [[], [], []]
    assert not any(rows._rich)  # a new Arrow batch starts without them


def test_rich_offsets_past_int32_on_the_list_path_are_the_typed_error() -> None:
    rows = MessageColumns(
        TOPIC, _schema(), ValueDecoder("binary"), batch_rows=100, batch_bytes=1 << 20
    )
    rows._rich[0].extend((0).to_bytes(4, "little") + (2**31 - 1).to_bytes(4, "little"))
    single = encode_entry(
        [OutgoingMessage(b"x", ordering_key=b"o")],
        producer_name="p",
        sequence_id=0,
        publish_time=T0,
        batch=False,
    )
    with pytest.raises(PulsarMessageError, match="2 GiB"):
        rows.add(parse_entry(single), 7, 0)


def _micros(table: pa.Table) -> list[dict[str, Any]]:
    """The rows, timestamps as their int64 microseconds (some are past Python's datetime)."""
    columns = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(columns, names=table.column_names).to_pylist()
