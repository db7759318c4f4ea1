"""The C twins in formats/_pulsar_speedups.c against their pure-Python twins: the
MessageMetadata decoder (hypothesis: every field, repeated fields, flipped and cut bytes) and
the batch splitter's corner cases (compacted messages, repeated strings, many properties)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.protowire import field_bytes, field_varint
from formats.pulsar import OutgoingMessage, PulsarMessageError, encode_entry, parse_entry
from formats.pulsar.batch import split_columns
from formats.pulsar.metadata import (
    MESSAGE_METADATA_FIELDS,
    EncryptionKey,
    MessageMetadata,
    decode_message_metadata,
    encode_message_metadata,
    field_names,
)
from formats.pulsar.speedups import C_MODULE

text = st.text(max_size=10)
u64 = st.integers(0, 2**64 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
props = st.lists(st.tuples(text, text), max_size=3).map(tuple)

metadata = st.builds(
    MessageMetadata,
    producer_name=text,
    sequence_id=u64,
    publish_time=u64,
    properties=props,
    replicated_from=st.none() | text,
    partition_key=st.none() | text,
    replicate_to=st.lists(text, max_size=2).map(tuple),
    compression=st.none() | st.integers(0, 4),
    uncompressed_size=st.none() | u64,
    num_messages_in_batch=st.none() | i32,
    event_time=st.none() | st.integers(1, 2**64 - 1),
    encryption_algo=st.none() | text,
    encryption_param=st.none() | st.binary(max_size=6),
    schema_version=st.none() | st.binary(max_size=6),
    partition_key_b64_encoded=st.none() | st.booleans(),
    ordering_key=st.none() | st.binary(max_size=6),
    deliver_at_time=st.none() | st.integers(-(2**63), 2**63 - 1),
    marker_type=st.none() | i32,
    txnid_least_bits=st.none() | u64,
    txnid_most_bits=st.none() | u64,
    highest_sequence_id=st.none() | u64,
    null_value=st.none() | st.booleans(),
    uuid=st.none() | text,
    num_chunks_from_msg=st.none() | i32,
    total_chunk_msg_size=st.none() | i32,
    chunk_id=st.none() | i32,
    null_partition_key=st.none() | st.booleans(),
)


def _both(data: bytes) -> tuple[object, object]:
    """(C result, Python result); a typed error stands for itself by its type."""
    out: list[object] = []
    for use_c in (True, False):
        try:
            out.append(decode_message_metadata(data, use_c=use_c))
        except PulsarMessageError as exc:
            out.append(type(exc))
    return out[0], out[1]


PURE = os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0")
needs_c = pytest.mark.skipif(PURE, reason="LEDGER_OFFLOADER_PURE_PYTHON set: no C to compare")


def test_the_pulsar_c_loops_are_built() -> None:
    """`make install` compiles formats/_pulsar_speedups.c; the suite fails on a silent
    fallback to Python unless pure Python was asked for."""
    from formats.pulsar import batch, metadata

    if PURE:
        assert C_MODULE is None and batch._C_SPLIT is None and metadata._C_METADATA is None
        return
    assert C_MODULE is not None, "formats._pulsar_speedups is not built: run `make install`"
    assert batch._C_SPLIT is C_MODULE.split_batch_columns
    assert metadata._C_METADATA is C_MODULE.message_metadata_values


def test_a_stale_extension_falls_back_to_python_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An extension built from an older source (lacking a function the decoder calls) must
    not break every import: the loader warns and the pure-Python twins run."""
    import sys
    import types

    import formats
    from formats.pulsar import speedups

    stale = types.ModuleType("formats._pulsar_speedups")
    stale.split_batch_columns = lambda *a: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "formats._pulsar_speedups", stale)
    monkeypatch.setattr(formats, "_pulsar_speedups", stale, raising=False)
    monkeypatch.delenv("LEDGER_OFFLOADER_PURE_PYTHON", raising=False)
    with pytest.warns(RuntimeWarning, match="message_metadata_values"):
        assert speedups._load() is None


def test_c_slots_follow_the_dataclass_order() -> None:
    # the C table maps field numbers to positions in MessageMetadata's field order
    names = field_names(MessageMetadata)
    assert [names.index(name) for name, _ in MESSAGE_METADATA_FIELDS.values()] == list(
        range(len(names))
    )
    if C_MODULE is not None:  # a field added to the dataclass must be added to the C table
        raw = encode_message_metadata(MessageMetadata("p", 1, 2))
        assert len(C_MODULE.message_metadata_values(raw)) == len(names)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(md=metadata, data=st.data())
def test_c_and_python_metadata_decoders_agree(md: MessageMetadata, data: st.DataObject) -> None:
    raw = bytearray(encode_message_metadata(md))
    c_md, py_md = _both(bytes(raw))
    assert c_md == py_md == md
    if raw:  # one flipped byte, or the message cut short
        at = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[at] ^= data.draw(st.integers(1, 255))
        else:
            del raw[at:]
        c_md, py_md = _both(bytes(raw))
        assert c_md == py_md


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_c_and_python_metadata_decoders_agree_on_any_bytes(raw: bytes) -> None:
    required = field_bytes(1, b"p") + field_varint(2, 1) + field_varint(3, 2)
    for data in (raw, required + raw):
        c_md, py_md = _both(data)
        assert c_md == py_md


@pytest.mark.parametrize(
    "raw",
    [
        # repeated singular fields: the last one wins; repeated ones accumulate
        field_bytes(1, b"a") + field_bytes(1, b"b") + field_varint(2, 1) + field_varint(3, 2),
        field_bytes(1, b"p") + field_varint(2, 1) + field_varint(3, 2) + field_varint(12, 0),
        field_bytes(1, b"p") + field_varint(2, 1) + field_varint(3, 2) + field_varint(99, 5),
        # a KeyValue with a repeated key, or an unknown field inside it
        field_bytes(1, b"p")
        + field_varint(2, 1)
        + field_varint(3, 2)
        + field_bytes(4, field_bytes(1, b"k") + field_bytes(1, b"j") + field_bytes(2, b"v")),
        field_bytes(1, b"p")
        + field_varint(2, 1)
        + field_varint(3, 2)
        + field_bytes(4, field_bytes(1, b"k") + field_varint(5, 1) + field_bytes(2, b"v")),
        # wrong wire types, an int32 out of range, bad UTF-8, a missing required field
        field_bytes(1, b"p") + field_varint(2, 1) + field_varint(3, 2) + field_bytes(8, b"x"),
        field_bytes(1, b"p") + field_varint(2, 1) + field_varint(3, 2) + field_varint(8, 2**40),
        field_bytes(1, b"\xff") + field_varint(2, 1) + field_varint(3, 2),
        field_bytes(1, b"p") + field_varint(3, 2),
        field_bytes(1, b"p")
        + field_varint(2, 1)
        + field_varint(3, 2)
        + field_bytes(4, field_varint(1, 3) + field_bytes(2, b"v")),
    ],
)
def test_c_and_python_metadata_decoders_agree_on_edge_cases(raw: bytes) -> None:
    c_md, py_md = _both(raw)
    assert c_md == py_md


@needs_c
def test_encryption_keys_are_left_to_the_python_decoder() -> None:
    md = MessageMetadata("p", 1, 2, encryption_keys=(EncryptionKey("k", b"v", (("a", "b"),)),))
    raw = encode_message_metadata(md)
    assert C_MODULE.message_metadata_values(raw) is None
    assert decode_message_metadata(raw) == md


def _split_both(batch: list[OutgoingMessage]) -> tuple[object, object]:
    parsed = parse_entry(encode_entry(batch, producer_name="p", sequence_id=0, publish_time=1))
    payload = bytes(parsed.payload)
    return (
        split_columns(parsed.metadata, payload, use_c=True),
        split_columns(parsed.metadata, payload, use_c=False),
    )


@needs_c
def test_splitter_shares_repeated_strings() -> None:
    batch = [
        OutgoingMessage(b"v", key=f"key-{i % 3}", properties=(("name", f"val-{i % 2}"),))
        for i in range(40)
    ]
    c_cols, py_cols = _split_both(batch)
    assert c_cols == py_cols
    keys = c_cols[1]  # type: ignore[index]
    assert keys[0] is keys[3] and keys[0] == "key-0"
    assert [m.key for m in batch] == keys


def test_splitter_with_many_properties() -> None:
    many = tuple((f"k{i}", f"v{i}") for i in range(40))  # more than the C fast path keeps
    c_cols, py_cols = _split_both([OutgoingMessage(b"x", properties=many)] * 3)
    assert c_cols == py_cols
    assert c_cols[3] == [many] * 3  # type: ignore[index]


def test_splitter_skips_compacted_messages_and_null_keys() -> None:
    from formats.pulsar.metadata import SingleMessageMetadata, encode_single_message_metadata

    parts = []
    for i in range(6):
        meta = encode_single_message_metadata(
            SingleMessageMetadata(
                properties=(("n", str(i)),),
                partition_key=f"key-{i % 2}",
                payload_size=1,
                compacted_out=True if i % 3 == 1 else None,
                null_partition_key=True if i == 3 else None,
                sequence_id=100 + i,
            )
        )
        parts += [len(meta).to_bytes(4, "big"), meta, bytes([i])]
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=6)
    payload = b"".join(parts)
    c_cols = split_columns(md, payload, use_c=True)
    assert c_cols == split_columns(md, payload, use_c=False)
    assert c_cols[0] == [0, 2, 3, 5]  # batch indexes: 1 and 4 compacted out
    assert c_cols[1] == ["key-0", "key-0", None, "key-1"]  # 3: null_partition_key
    assert c_cols[5] == [100, 102, 103, 105]
    assert c_cols[7] == [b"\x00", b"\x02", b"\x03", b"\x05"]
