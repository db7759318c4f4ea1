"""The Pulsar message codec: round trips (hypothesis), every codec, chunks, encryption,
markers, broker entry metadata, and typed errors for every kind of bad input."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.errors import FormatError
from formats.pulsar import (
    BrokerEntryMetadata,
    ChunkAssembler,
    ChunkError,
    DecompressionError,
    DecryptionError,
    Decryptor,
    Encryptor,
    MalformedMessageError,
    MessageChecksumError,
    MessageEncodeError,
    MessageTruncatedError,
    OutgoingMessage,
    PulsarMessageError,
    UnsupportedCompressionError,
    decode_entry,
    encode_chunks,
    encode_entry,
    frame_entry,
    generate_rsa_pem,
    iter_messages,
    parse_entry,
)
from formats.pulsar.compression import LZ4, NONE, SNAPPY, ZLIB, ZSTD, compress, decompress
from formats.pulsar.metadata import MessageMetadata

text = st.text(max_size=12)
messages = st.builds(
    OutgoingMessage,
    value=st.one_of(st.none(), st.binary(max_size=200)),
    key=st.one_of(st.none(), text),
    ordering_key=st.one_of(st.none(), st.binary(min_size=1, max_size=8)),
    properties=st.lists(st.tuples(text, text), max_size=3).map(tuple),
    event_time=st.one_of(st.none(), st.integers(1, 2**63)),
)


def sent(msg: OutgoingMessage) -> tuple[object, ...]:
    return (
        msg.value or b"",
        msg.value is None,
        msg.key,
        msg.ordering_key,
        msg.properties,
        msg.event_time,
    )


def got(msg: object) -> tuple[object, ...]:
    return (
        msg.value,
        msg.is_null,
        msg.key,
        msg.ordering_key,
        msg.properties,  # type: ignore[attr-defined]
        msg.event_time,
    )  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(messages, min_size=1, max_size=8),
    codec=st.sampled_from([NONE, LZ4, ZLIB, ZSTD, SNAPPY]),
    seq=st.integers(0, 2**40),
    publish=st.integers(0, 2**45),
)
def test_batch_round_trip(batch: list[OutgoingMessage], codec: int, seq: int, publish: int) -> None:
    entry = encode_entry(
        batch, producer_name="p", sequence_id=seq, publish_time=publish, compression=codec
    )
    out = decode_entry(entry, ledger_id=4, entry_id=9, partition=1)
    assert [got(m) for m in out] == [sent(m) for m in batch]
    assert [m.batch_index for m in out] == list(range(len(batch)))
    assert [m.sequence_id for m in out] == [seq + i for i in range(len(batch))]
    assert all(m.publish_time == publish and m.message_id.startswith("4:9:1:") for m in out)


@settings(max_examples=80, deadline=None)
@given(msg=messages, codec=st.sampled_from([NONE, LZ4, ZLIB, ZSTD, SNAPPY]))
def test_single_round_trip(msg: OutgoingMessage, codec: int) -> None:
    entry = encode_entry(
        [msg], producer_name="p", sequence_id=1, publish_time=2, batch=False, compression=codec
    )
    [out] = decode_entry(entry)
    assert got(out) == sent(msg) and out.batch_index == -1


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(2, 5000), chunk=st.integers(1, 900), codec=st.sampled_from([NONE, LZ4, ZSTD])
)
def test_chunks_round_trip(size: int, chunk: int, codec: int) -> None:
    value = os.urandom(size)
    whole = len(compress(codec, value)) if codec else size
    if whole <= chunk:
        chunk = max(1, whole // 2)
    entries = encode_chunks(
        OutgoingMessage(value, key="k"),
        chunk_size=chunk,
        producer_name="p",
        sequence_id=5,
        publish_time=6,
        compression=codec,
    )
    out = list(iter_messages([(1, i, e) for i, e in enumerate(entries)]))
    assert len(out) == 1 and out[0].value == value and out[0].key == "k"


def test_chunks_interleave_across_ledgers_and_with_other_messages() -> None:
    a = encode_chunks(
        OutgoingMessage(b"a" * 100),
        chunk_size=40,
        producer_name="pa",
        sequence_id=1,
        publish_time=1,
    )
    b = encode_chunks(
        OutgoingMessage(b"b" * 90), chunk_size=40, producer_name="pb", sequence_id=1, publish_time=1
    )
    plain = encode_entry([OutgoingMessage(b"x")], producer_name="pc", sequence_id=0, publish_time=1)
    stream = [
        (1, 0, a[0]),
        (1, 1, b[0]),
        (1, 2, plain),
        (1, 3, a[1]),
        (2, 0, b[1]),
        (2, 1, a[2]),
        (2, 2, b[2]),
    ]
    out = list(iter_messages(stream))
    assert [m.value for m in out] == [b"x", b"a" * 100, b"b" * 90]
    assert [m.message_id for m in out] == ["1:2:-1:0", "2:1:-1:-1", "2:2:-1:-1"]


def test_chunk_errors_are_typed() -> None:
    parts = encode_chunks(
        OutgoingMessage(b"z" * 100), chunk_size=30, producer_name="p", sequence_id=1, publish_time=1
    )
    with pytest.raises(ChunkError, match="ledger 1 entry 1"):
        list(iter_messages([(1, 0, parts[0]), (1, 1, parts[2])]))
    with pytest.raises(ChunkError, match="never seen"):
        list(iter_messages([(1, 0, parts[1])]))
    skipping = ChunkAssembler(skip_orphans=True)
    assert list(iter_messages([(1, 0, parts[1]), (1, 1, parts[2])], assembler=skipping)) == []
    assert skipping.skipped == 2
    with pytest.raises(ChunkError):
        decode_entry(parts[0])
    incomplete = ChunkAssembler()
    assert list(iter_messages([(1, 0, parts[0])], assembler=incomplete)) == []
    assert incomplete.incomplete == 1


def test_encryption_round_trip_and_wrong_key() -> None:
    private, public = generate_rsa_pem()
    batch = [OutgoingMessage(b"secret %d" % i, key=str(i)) for i in range(3)]
    entry = encode_entry(
        batch,
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        compression=LZ4,
        encryptor=Encryptor(public, "k"),
    )
    [flagged] = decode_entry(entry)
    assert flagged.encrypted and b"secret" not in flagged.value
    assert [m.value for m in decode_entry(entry, decryptor=Decryptor(private))] == [
        m.value for m in batch
    ]
    other, _ = generate_rsa_pem()
    with pytest.raises(DecryptionError, match="no data key"):
        decode_entry(entry, decryptor=Decryptor(other))
    with pytest.raises(DecryptionError):
        Decryptor(b"not a pem")


def test_markers_broker_metadata_and_old_format() -> None:
    marker = encode_entry(
        [OutgoingMessage(b"m")], producer_name="p", sequence_id=0, publish_time=1, marker_type=10
    )
    assert decode_entry(marker) == []
    entry = encode_entry(
        [OutgoingMessage(b"v")],
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        broker_metadata=BrokerEntryMetadata(123, 45),
    )
    parsed = parse_entry(entry)
    assert parsed.broker_metadata == BrokerEntryMetadata(123, 45) and parsed.has_checksum
    old = encode_entry(
        [OutgoingMessage(b"old")], producer_name="p", sequence_id=0, publish_time=1, checksum=False
    )
    assert not parse_entry(old).has_checksum
    assert decode_entry(old)[0].value == b"old"


def test_checksum_mismatch_names_ledger_and_entry() -> None:
    entry = bytearray(
        encode_entry([OutgoingMessage(b"abc")], producer_name="p", sequence_id=0, publish_time=1)
    )
    entry[-1] ^= 1
    with pytest.raises(MessageChecksumError, match="ledger 12 entry 34"):
        decode_entry(bytes(entry), ledger_id=12, entry_id=34)
    assert decode_entry(bytes(entry), verify_checksum=False)[0].value == b"abb"


def _with(md: MessageMetadata, payload: bytes) -> bytes:
    return frame_entry(md, payload)


def test_decompression_bomb_and_bad_sizes() -> None:
    bomb = zlib.compress(b"\0" * 100_000)
    md = MessageMetadata("p", 0, 1, compression=ZLIB, uncompressed_size=1000)
    with pytest.raises(DecompressionError, match="more than uncompressed_size"):
        decode_entry(_with(md, bomb))
    for codec in (LZ4, ZSTD, SNAPPY, ZLIB):
        big = compress(codec, b"\0" * 50_000)
        md = MessageMetadata("p", 0, 1, compression=codec, uncompressed_size=100)
        with pytest.raises(DecompressionError):
            decode_entry(_with(md, big), ledger_id=1, entry_id=2)
        md = MessageMetadata("p", 0, 1, compression=codec, uncompressed_size=60_000)
        with pytest.raises(DecompressionError):  # shorter than announced
            decode_entry(_with(md, big))
    md = MessageMetadata("p", 0, 1, compression=LZ4, uncompressed_size=2**31)
    with pytest.raises(DecompressionError, match="outside"):
        decode_entry(_with(md, b"xx"))
    assert decompress(NONE, b"abc", 0) == b"abc"


def test_unknown_codec_and_malformed_batches() -> None:
    md = MessageMetadata("p", 0, 1, compression=9, uncompressed_size=1)
    with pytest.raises(UnsupportedCompressionError):
        decode_entry(_with(md, b"x"))
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=3)
    one = encode_entry([OutgoingMessage(b"v")], producer_name="p", sequence_id=0, publish_time=1)
    payload = parse_entry(one).payload
    with pytest.raises(MessageTruncatedError, match="ends after 1"):
        decode_entry(_with(md, payload))  # sizes do not add up: 3 announced, 1 there
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=1)
    with pytest.raises(MalformedMessageError, match="left after"):
        decode_entry(_with(md, payload + b"extra"))
    md = MessageMetadata("p", 0, 1, num_messages_in_batch=-1)
    with pytest.raises(MalformedMessageError):
        decode_entry(_with(md, payload))


def test_encoder_refuses_what_it_cannot_write() -> None:
    with pytest.raises(MessageEncodeError):
        encode_entry([], producer_name="p", sequence_id=0, publish_time=1)
    with pytest.raises(MessageEncodeError):
        encode_entry(
            [OutgoingMessage(b"a")] * 2,
            producer_name="p",
            sequence_id=0,
            publish_time=1,
            batch=False,
        )
    with pytest.raises(MessageEncodeError):
        encode_entry([OutgoingMessage(b"a")], producer_name="p", sequence_id=-1, publish_time=1)


def _samples() -> list[bytes]:
    _private, public = generate_rsa_pem(1024)
    batch = [
        OutgoingMessage(
            b"v%d" % i, key="k", properties=(("a", "b"),), event_time=i + 1, ordering_key=b"o"
        )
        for i in range(3)
    ] + [OutgoingMessage(None)]
    out = [
        encode_entry(
            batch,
            producer_name="p",
            sequence_id=3,
            publish_time=9,
            compression=c,
            broker_metadata=BrokerEntryMetadata(1, 2) if c == 2 else None,
        )
        for c in (NONE, LZ4, ZLIB, ZSTD, SNAPPY)
    ]
    out.append(
        encode_entry(
            batch[:1], producer_name="p", sequence_id=0, publish_time=1, batch=False, checksum=False
        )
    )
    out.append(
        encode_entry(
            batch,
            producer_name="p",
            sequence_id=0,
            publish_time=1,
            encryptor=Encryptor(public, "k"),
        )
    )
    return out


def _decode_or_typed_error(data: bytes, verify: bool) -> None:
    try:
        for _ in iter_messages([(1, 2, data)], verify_checksum=verify):
            pass
    except PulsarMessageError as exc:
        assert "ledger 1 entry 2" in str(exc)
    except FormatError:  # pragma: no cover - must not happen: all carry the location
        raise


@pytest.mark.parametrize("verify", [True, False])
def test_truncation_at_every_offset_and_flipped_bytes(verify: bool) -> None:
    for entry in _samples():
        for cut in range(len(entry)):
            _decode_or_typed_error(entry[:cut], verify)
        for at in range(len(entry)):
            for mask in (0x01, 0x80, 0xFF):
                bad = bytearray(entry)
                bad[at] ^= mask
                _decode_or_typed_error(bytes(bad), verify)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_the_error_tree(data: bytes) -> None:
    _decode_or_typed_error(data, verify=False)
    _decode_or_typed_error(b"\x0e\x02" + data, verify=False)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(messages, min_size=1, max_size=6), data=st.data())
def test_c_and_python_splitters_agree(batch: list[OutgoingMessage], data: st.DataObject) -> None:
    from formats.pulsar.batch import split_columns

    entry = encode_entry(batch, producer_name="p", sequence_id=0, publish_time=1)
    parsed = parse_entry(entry)
    payload = bytearray(parsed.payload)
    if data.draw(st.booleans()) and payload:  # corrupt one byte, or cut the payload short
        at = data.draw(st.integers(0, len(payload) - 1))
        if data.draw(st.booleans()):
            payload[at] ^= data.draw(st.integers(1, 255))
        else:
            del payload[at:]
    md = parsed.metadata
    try:
        want = split_columns(md, bytes(payload), use_c=False)
    except PulsarMessageError:
        want = None
    try:
        got = split_columns(md, bytes(payload), use_c=True)
    except PulsarMessageError:
        got = None  # the C twin declined and the Python twin raised
    assert got == want
