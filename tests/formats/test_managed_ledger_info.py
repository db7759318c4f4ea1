"""The hand-written ``ManagedLedgerInfo`` codec against the official protobuf runtime built
from Pulsar's ``MLDataFormats.proto`` field numbers (tests/formats/mldataformats.py): binary,
every compression of the header Pulsar's ``MetaStoreImpl`` writes, the old text format, and
bad input as typed errors."""

from __future__ import annotations

import contextlib
import zlib
from typing import Any

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import ManagedLedgerInfoError, OffloaderError
from formats.pulsar import compression
from formats.pulsar.managed_ledger_info import (
    DriverMetadata,
    LedgerInfo,
    ManagedLedgerInfo,
    OffloadContext,
    OffloadSegment,
    decode_managed_ledger_info,
    encode_managed_ledger_info,
    java_uuid,
    uuid_halves,
)
from tests.formats import mldataformats as pb

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
TEXT = st.text(max_size=12)
PAIRS = st.lists(st.tuples(TEXT, TEXT), max_size=3).map(tuple)


def _official(info: ManagedLedgerInfo) -> Any:
    """``info`` as a message of the official runtime."""
    msg = pb.ManagedLedgerInfo()
    for li in info.ledgers:
        m = msg.ledgerInfo.add(ledgerId=li.ledger_id)
        if li.entries is not None:
            m.entries = li.entries
        if li.size is not None:
            m.size = li.size
        if li.timestamp is not None:
            m.timestamp = li.timestamp
        for k, v in li.properties:
            m.properties.add(key=k, value=v)
        c = li.offload_context
        if c is not None:
            oc = m.offloadContext
            oc.complete = c.complete
            oc.bookkeeperDeleted = c.bookkeeper_deleted
            if c.uid_msb is not None:
                oc.uidMsb = c.uid_msb
            if c.uid_lsb is not None:
                oc.uidLsb = c.uid_lsb
            if c.timestamp is not None:
                oc.timestamp = c.timestamp
            if c.driver_metadata is not None:
                oc.driverMetadata.name = c.driver_metadata.name
                for k, v in c.driver_metadata.properties:
                    oc.driverMetadata.properties.add(key=k, value=v)
            for s in c.segments:
                seg = oc.offloadSegment.add(complete=s.complete)
                for attr, name in (
                    ("uid_msb", "uidMsb"),
                    ("uid_lsb", "uidLsb"),
                    ("assigned_timestamp", "assignedTimestamp"),
                    ("offloaded_timestamp", "offloadedTimestamp"),
                    ("end_entry_id", "endEntryId"),
                ):
                    if getattr(s, attr) is not None:
                        setattr(seg, name, getattr(s, attr))
                if s.driver_metadata is not None:
                    seg.driverMetadata.name = s.driver_metadata.name
    if info.terminated_position is not None:
        msg.terminatedPosition.ledgerId, msg.terminatedPosition.entryId = info.terminated_position
    for k, v in info.properties:
        msg.properties.add(key=k, value=v)
    return msg


def _pulsar_compressed(body: bytes, codec: int) -> bytes:
    """The header and compressed body as Pulsar's MetaStoreImpl lays them out, its metadata
    serialized by the official runtime."""
    meta = pb.ManagedLedgerInfoMetadata(compressionType=codec, uncompressedSize=len(body))
    raw: bytes = meta.SerializeToString()
    return b"\x47\x78" + len(raw).to_bytes(4, "big") + raw + compression.compress(codec, body)


DRIVER = DriverMetadata(
    "aws-s3",
    (("bucket", "offload-bucket"), ("region", "us-east-1"), ("endpoint", "http://s3:9000")),
)
UID = "4fd5a1c0-0c1d-4e2b-9f3a-0123456789ab"
SAMPLE = ManagedLedgerInfo(
    ledgers=(
        LedgerInfo(
            3,
            entries=100,
            size=12_345,
            timestamp=1_700_000_000_000,
            offload_context=OffloadContext(
                *uuid_halves(UID),
                complete=True,
                bookkeeper_deleted=True,
                timestamp=1_700_000_100_000,
                driver_metadata=DRIVER,
            ),
        ),
        LedgerInfo(
            7,
            entries=5,
            size=640,
            timestamp=1_700_000_200_000,
            offload_context=OffloadContext(*uuid_halves(UID), complete=False),
            properties=(("k", "v"),),
        ),
        LedgerInfo(9, entries=0, size=0, timestamp=0),
    ),
    terminated_position=(9, -1),
    properties=(("pulsar.schema", "x"),),
)


def test_a_value_written_by_the_official_encoder_decodes_field_by_field() -> None:
    info = decode_managed_ledger_info(_official(SAMPLE).SerializeToString())
    assert info == SAMPLE
    first = info.ledgers[0]
    assert first.offloaded and first.bookkeeper_deleted and first.uuid == UID
    assert first.offload_context is not None and first.offload_context.driver_metadata == DRIVER
    assert DRIVER.bucket == "offload-bucket" and DRIVER.endpoint == "http://s3:9000"
    assert not info.ledgers[1].offloaded and info.ledgers[1].uuid == UID
    assert info.ledgers[2].uuid is None and info.terminated


def test_our_encoding_parses_with_the_official_runtime() -> None:
    msg = pb.ManagedLedgerInfo()
    msg.ParseFromString(encode_managed_ledger_info(SAMPLE))
    assert msg == _official(SAMPLE)
    assert msg.ledgerInfo[0].offloadContext.driverMetadata.properties[0].value == "offload-bucket"


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_every_compression_of_the_metastore_header(codec: int) -> None:
    body = _official(SAMPLE).SerializeToString()
    value = _pulsar_compressed(body, codec) if codec else body
    assert decode_managed_ledger_info(value) == SAMPLE
    # and ours is the same layout
    ours = encode_managed_ledger_info(SAMPLE, codec=codec)
    assert decode_managed_ledger_info(ours) == SAMPLE
    if codec:
        assert ours[:2] == b"\x47\x78"


def test_a_header_that_says_none_holds_the_plain_message() -> None:
    body = _official(SAMPLE).SerializeToString()
    meta = pb.ManagedLedgerInfoMetadata(compressionType=0, uncompressedSize=len(body))
    raw = meta.SerializeToString()
    value = b"\x47\x78" + len(raw).to_bytes(4, "big") + raw + body
    assert decode_managed_ledger_info(value) == SAMPLE


def test_the_old_text_format_is_read_as_pulsar_does() -> None:
    text = text_format.MessageToString(_official(SAMPLE))
    assert "ledgerInfo" in text
    assert decode_managed_ledger_info(text.encode()) == SAMPLE
    one_line = text_format.MessageToString(_official(SAMPLE), as_one_line=True)
    assert decode_managed_ledger_info(one_line.encode()) == SAMPLE


def test_an_empty_value_is_a_managed_ledger_without_ledgers() -> None:
    assert decode_managed_ledger_info(b"") == ManagedLedgerInfo()


def test_java_uuid_strings() -> None:
    assert java_uuid(0, 1) == "00000000-0000-0000-0000-000000000001"
    assert java_uuid(-1, -1) == "ffffffff-ffff-ffff-ffff-ffffffffffff"
    assert uuid_halves(java_uuid(-5, 42)) == (-5, 42)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (b"\x47\x78\x00", "header truncated"),
        (b"\x47\x78\x00\x00\x00\x09\x08", "overruns"),
        (b"\x47\x78\x00\x00\x00\x02\x08\x09", "lacks uncompressedSize"),
        (b"\x47\x78\x00\x00\x00\x04\x08\x09\x10\x01x", "unknown compressionType 9"),
        (b"\x47\x78\x00\x00\x00\x04\x08\x02\x10\x10" + b"not zlib", "zlib"),
        (b"\x47\x78\x00\x00\x00\x04\x08\x02\x10\x05" + zlib.compress(b"0123456789"), "zlib"),
        (b"\x0a\x02\x10\x01", "lacks its required ledgerId"),
        (b"\x0a\x05\x08\x01", "overruns"),
        (b"\x08\x01", "ledgerInfo is not length-delimited"),
        (b"\x1a\x04\x0a\x02\xff\xfe", "not UTF-8"),
        (b"\x12\x02\x08\x01", "terminatedPosition lacks"),
        (b"\xff\xff\xff", "not a ManagedLedgerInfo"),
        (b"hello world", "not a ManagedLedgerInfo"),
    ],
)
def test_bad_values_are_typed_errors(value: bytes, words: str) -> None:
    with pytest.raises(ManagedLedgerInfoError, match=words):
        decode_managed_ledger_info(value)


def test_a_compressed_value_larger_than_the_limit_is_refused() -> None:
    value = encode_managed_ledger_info(SAMPLE, codec=compression.ZSTD)
    with pytest.raises(ManagedLedgerInfoError, match="outside"):
        decode_managed_ledger_info(value, limit=10)


# --- properties -------------------------------------------------------------------------------

_DRIVERS = st.builds(DriverMetadata, TEXT, PAIRS)
_SEGMENTS = st.builds(
    OffloadSegment,
    st.none() | INT64,
    st.none() | INT64,
    st.booleans(),
    st.none() | INT64,
    st.none() | INT64,
    st.none() | INT64,
    st.none() | st.builds(DriverMetadata, TEXT),
)
_CONTEXTS = st.builds(
    OffloadContext,
    st.none() | INT64,
    st.none() | INT64,
    st.booleans(),
    st.booleans(),
    st.none() | INT64,
    st.none() | _DRIVERS,
    st.lists(_SEGMENTS, max_size=2).map(tuple),
)
_LEDGERS = st.builds(
    LedgerInfo,
    INT64,
    st.none() | INT64,
    st.none() | INT64,
    st.none() | INT64,
    st.none() | _CONTEXTS,
    PAIRS,
)
INFOS = st.builds(
    ManagedLedgerInfo,
    st.lists(_LEDGERS, max_size=4).map(tuple),
    st.none() | st.tuples(INT64, INT64),
    PAIRS,
)


@settings(max_examples=150, deadline=None)
@given(INFOS, st.sampled_from(sorted(compression.CODEC_NAMES)))
def test_round_trip_through_both_encoders(info: ManagedLedgerInfo, codec: int) -> None:
    assert decode_managed_ledger_info(encode_managed_ledger_info(info, codec=codec)) == info
    official = _official(info).SerializeToString()
    assert decode_managed_ledger_info(official) == info
    value = _pulsar_compressed(official, codec) if codec else official
    assert decode_managed_ledger_info(value) == info


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_a_typed_error(data: bytes) -> None:
    with contextlib.suppress(ManagedLedgerInfoError):
        decode_managed_ledger_info(data)
    for value in (b"\x47\x78" + data, b"\x47\x78\x00\x00\x00\x02\x08\x01" + data):
        try:
            decode_managed_ledger_info(value)
        except OffloaderError as exc:
            assert isinstance(exc, ManagedLedgerInfoError)


# --- the C twin (formats/_pulsar_mlinfo.h) against the pure-Python decoder --------------------


def _either(decode: Any, value: bytes) -> Any:
    try:
        return decode(value)
    except ManagedLedgerInfoError as exc:
        return ("error", str(exc))


def test_the_c_twin_is_built_and_used() -> None:
    import os

    from formats.pulsar import managed_ledger_info as mli

    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        assert mli._C_VALUES is None
        return
    assert mli._C_VALUES is not None
    ledgers, terminated, props = mli._C_VALUES(encode_managed_ledger_info(SAMPLE))
    assert [row[0] for row in ledgers] == [li.ledger_id for li in SAMPLE.ledgers]
    assert terminated == SAMPLE.terminated_position and props == SAMPLE.properties


@settings(max_examples=200, deadline=None)
@given(INFOS, st.sampled_from(sorted(compression.CODEC_NAMES)))
def test_the_c_twin_equals_the_pure_decoder(info: ManagedLedgerInfo, codec: int) -> None:
    from formats.pulsar.managed_ledger_info import decode_managed_ledger_info_pure

    for value in (
        encode_managed_ledger_info(info, codec=codec),
        _official(info).SerializeToString(),
    ):
        assert decode_managed_ledger_info(value) == decode_managed_ledger_info_pure(value) == info


@settings(max_examples=400, deadline=None)
@given(INFOS, st.data())
def test_the_c_twin_equals_the_pure_decoder_on_damaged_values(
    info: ManagedLedgerInfo, data: st.DataObject
) -> None:
    """A flipped byte, a cut or an inserted byte: the same value or the same typed error."""
    from formats.pulsar.managed_ledger_info import decode_managed_ledger_info_pure

    value = bytearray(encode_managed_ledger_info(info))
    if value:
        at = data.draw(st.integers(0, len(value) - 1))
        how = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if how == "flip":
            value[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del value[at:]
        else:
            value.insert(at, data.draw(st.integers(0, 255)))
    assert _either(decode_managed_ledger_info, bytes(value)) == _either(
        decode_managed_ledger_info_pure, bytes(value)
    )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_the_c_twin_equals_the_pure_decoder_on_arbitrary_bytes(data: bytes) -> None:
    from formats.pulsar.managed_ledger_info import decode_managed_ledger_info_pure

    assert _either(decode_managed_ledger_info, data) == _either(
        decode_managed_ledger_info_pure, data
    )


# --- ledger_refs: what the orphan audit reads, without the dataclasses ---------------------


def _refs_either(value: bytes) -> Any:
    from formats.pulsar.managed_ledger_info import ledger_refs

    try:
        return ledger_refs(value)
    except ManagedLedgerInfoError as exc:
        return ("error", str(exc))


def _refs_of_decoded(value: bytes) -> Any:
    from formats.pulsar.managed_ledger_info import ledger_refs_of

    try:
        return ledger_refs_of(decode_managed_ledger_info(value))
    except ManagedLedgerInfoError as exc:
        return ("error", str(exc))


_U = "11111111-2222-4333-8444-555555555555"
_V = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
_DRIVER = DriverMetadata("aws-s3", (("bucket", "b"),))


@pytest.mark.parametrize(
    ("ledger", "ref"),
    [
        (LedgerInfo(7), (7, None, False, ())),
        (LedgerInfo(7, offload_context=OffloadContext()), (7, None, False, ())),
        (
            LedgerInfo(8, offload_context=OffloadContext(*uuid_halves(_U), complete=True)),
            (8, _U, True, ()),
        ),
        (
            LedgerInfo(
                9, offload_context=OffloadContext(*uuid_halves(_U), driver_metadata=_DRIVER)
            ),
            (9, _U, False, ()),
        ),
        (
            LedgerInfo(10, offload_context=OffloadContext(uid_msb=0, uid_lsb=None)),
            (10, java_uuid(0, 0), False, ()),
        ),
        (
            LedgerInfo(
                11,
                offload_context=OffloadContext(
                    segments=(
                        OffloadSegment(*uuid_halves(_V), complete=True, driver_metadata=_DRIVER),
                        OffloadSegment(),
                        OffloadSegment(*uuid_halves(_U)),
                    )
                ),
            ),
            (11, None, False, (_V, _U)),
        ),
    ],
)
def test_ledger_refs_table(ledger: LedgerInfo, ref: tuple[Any, ...]) -> None:
    from formats.pulsar.managed_ledger_info import ledger_refs, ledger_refs_of

    info = ManagedLedgerInfo((LedgerInfo(1), ledger))
    for codec in sorted(compression.CODEC_NAMES):
        value = encode_managed_ledger_info(info, codec=codec)
        assert ledger_refs(value) == ledger_refs_of(info) == [(1, None, False, ()), ref]


@settings(max_examples=200, deadline=None)
@given(INFOS, st.sampled_from(sorted(compression.CODEC_NAMES)))
def test_ledger_refs_equal_the_dataclass_path(info: ManagedLedgerInfo, codec: int) -> None:
    from formats.pulsar.managed_ledger_info import ledger_refs, ledger_refs_of

    for value in (
        encode_managed_ledger_info(info, codec=codec),
        _official(info).SerializeToString(),
    ):
        assert ledger_refs(value) == ledger_refs_of(decode_managed_ledger_info(value))
    assert ledger_refs_of(info) == ledger_refs_of(decode_managed_ledger_info(value))


@settings(max_examples=300, deadline=None)
@given(INFOS, st.data())
def test_ledger_refs_equal_the_dataclass_path_on_damaged_values(
    info: ManagedLedgerInfo, data: st.DataObject
) -> None:
    """A flipped byte, a cut or an inserted byte: the same refs or the same typed error."""
    value = bytearray(encode_managed_ledger_info(info))
    if value:
        at = data.draw(st.integers(0, len(value) - 1))
        how = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if how == "flip":
            value[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del value[at:]
        else:
            value.insert(at, data.draw(st.integers(0, 255)))
    assert _refs_either(bytes(value)) == _refs_of_decoded(bytes(value))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_ledger_refs_equal_the_dataclass_path_on_arbitrary_bytes(data: bytes) -> None:
    assert _refs_either(data) == _refs_of_decoded(data)
