"""The bucket manifests' codec (formats/manifest.py, spec/bucket-manifests.md): marker keys and
watermark keys round-trip, sort in ledger/position order, stay within S3's key length (a long
name is hashed, its body names it), and refuse what is not theirs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import FormatError, InvalidKeyError
from formats.manifest import (
    LEDGER_MARKERS,
    MAX_KEY_BYTES,
    MAX_POSITION,
    TRANSFORMS,
    LedgerMarker,
    decode_marker_body,
    decode_watermark_body,
    encode_marker_body,
    encode_watermark_body,
    is_manifest_key,
    ledger_marker_key,
    ledger_marker_prefix,
    parse_ledger_marker_key,
    parse_watermark_key,
    watermark_key,
)

UUID = "862c7593-011b-4538-86bf-81d485f79a51"
numbers = st.integers(min_value=0, max_value=MAX_POSITION)
names = st.text(min_size=1, max_size=1500)
uuids = st.uuids().map(str)


@st.composite
def markers(draw: st.DrawFn) -> LedgerMarker:
    return LedgerMarker(
        managed_ledger_name=draw(names),
        ledger_id=draw(numbers),
        uuid=draw(uuids),
        entries=draw(numbers),
        entry_bytes=draw(numbers),
        data_size=draw(numbers),
        index_size=draw(numbers),
        index_crc32c=draw(st.integers(0, 0xFFFFFFFF)),
        transform=draw(st.sampled_from(TRANSFORMS)),
        created_ms=draw(numbers),
        closed_ms=draw(numbers),
        offloaded_ms=draw(numbers),
    )


def example(**changes: object) -> LedgerMarker:
    values: dict[str, object] = {
        "managed_ledger_name": "public/default/persistent/t1",
        "ledger_id": 7,
        "uuid": UUID,
        "entries": 30,
        "entry_bytes": 6000,
        "data_size": 6488,
        "index_size": 142,
        "index_crc32c": 0x7C7378DC,
        "transform": "none",
        "created_ms": 1795814112380,
        "closed_ms": 1795814112398,
        "offloaded_ms": 1795814120197,
    }
    values.update(changes)
    return LedgerMarker(**values)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(markers())
def test_marker_key_round_trips(marker: LedgerMarker) -> None:
    key = ledger_marker_key(marker)
    assert len(key.encode("utf-8")) <= MAX_KEY_BYTES
    assert key.isascii()
    assert is_manifest_key(key)
    parsed = parse_ledger_marker_key(key)
    assert (parsed.ledger_id, parsed.uuid) == (marker.ledger_id, marker.uuid)
    if parsed.hashed:
        assert parsed.marker is None
        assert parsed.with_name(marker.managed_ledger_name) == marker
    else:
        assert parsed.marker == marker
    assert decode_marker_body(encode_marker_body(marker)) == marker
    prefix = ledger_marker_prefix(marker.managed_ledger_name, marker.ledger_id, marker.uuid)
    assert key.startswith(prefix)


@settings(deadline=None)
@given(names, numbers, numbers)
def test_marker_keys_sort_in_ledger_order(name: str, a: int, b: int) -> None:
    ka = ledger_marker_key(example(managed_ledger_name=name, ledger_id=a))
    kb = ledger_marker_key(example(managed_ledger_name=name, ledger_id=b, uuid=str(UUID)))
    assert (ka < kb) == (a < b)


@settings(max_examples=200, deadline=None)
@given(names, numbers, st.from_regex(r"[A-Za-z0-9-]{1,64}", fullmatch=True), numbers)
def test_watermark_round_trips(name: str, position: int, tag: str, written: int) -> None:
    key = watermark_key("ledgers", name, position, tag)
    assert len(key.encode("utf-8")) <= MAX_KEY_BYTES
    parsed = parse_watermark_key(key)
    assert (parsed.kind, parsed.position, parsed.tag) == ("ledgers", position, tag)
    assert parsed.name in (name, None)
    assert (parsed.name is None) == parsed.segment.startswith("~")
    body = encode_watermark_body("ledgers", name, position, tag, written)
    assert decode_watermark_body(body) == ("ledgers", name, position, tag, written)


def test_a_long_name_is_hashed_and_its_body_names_it() -> None:
    name = "t/ns/persistent/" + "x" * 1200
    marker = example(managed_ledger_name=name)
    parsed = parse_ledger_marker_key(ledger_marker_key(marker))
    assert parsed.hashed and parsed.marker is None
    assert (
        parsed.with_name(decode_marker_body(encode_marker_body(marker)).managed_ledger_name)
        == marker
    )
    with pytest.raises(InvalidKeyError, match="does not match"):
        parsed.with_name("t/ns/persistent/other")


def test_a_tilde_in_a_name_is_escaped_so_only_hashes_start_with_one() -> None:
    key = ledger_marker_key(example(managed_ledger_name="~t/ns/persistent/a~b"))
    assert "/%7Et%2Fns%2Fpersistent%2Fa%7Eb/" in key
    assert not parse_ledger_marker_key(key).hashed


@pytest.mark.parametrize(
    "key",
    [
        "862c7593-011b-4538-86bf-81d485f79a51-ledger-7",  # a Pulsar key
        LEDGER_MARKERS + "a/7.x",
        LEDGER_MARKERS + "a%2Fb/00000000000000000007." + UUID,  # fields missing
        # not canonical: a leading zero in a number, an upper-case UUID, a lower-case escape
        ledger_marker_key(example()).replace(".e30.", ".e030."),
        ledger_marker_key(example()).replace(UUID, UUID.upper()),
        ledger_marker_key(example()).replace("%2F", "%2f"),
        ledger_marker_key(example()).replace(".tnone.", ".tgzip."),
        ledger_marker_key(example()) + ".extra",
    ],
)
def test_a_key_that_is_no_marker_is_refused(key: str) -> None:
    with pytest.raises(InvalidKeyError):
        parse_ledger_marker_key(key)


def test_bad_values_are_refused() -> None:
    with pytest.raises(InvalidKeyError):
        example(ledger_id=-1)
    with pytest.raises(InvalidKeyError):
        example(uuid="not-a-uuid")
    with pytest.raises(InvalidKeyError):
        example(transform="gzip")
    with pytest.raises(InvalidKeyError):
        watermark_key("Ledgers", "n", 1, "x")
    with pytest.raises(InvalidKeyError):
        watermark_key("ledgers", "n", MAX_POSITION + 1, "x")
    with pytest.raises(FormatError):
        decode_marker_body(b"{not json")
    with pytest.raises(FormatError):
        decode_watermark_body(b'{"format": 2}')
