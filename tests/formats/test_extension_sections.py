"""Tagged sections of the index extension (version 2): round trips, the version-1 fallback,
unknown and critical tags, and every truncation and byte flip ending in a typed error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import FormatError, UnsupportedVersionError
from formats.extension import (
    TAG_SPAN_CRC32C,
    TAG_TRANSFORM,
    TAG_ZONE_MAPS,
    ExtensionSection,
    IndexExtension,
    decode_extension,
    encode_extension,
)

_known = st.sampled_from([TAG_SPAN_CRC32C, TAG_ZONE_MAPS, TAG_TRANSFORM])


@st.composite
def extensions(draw: st.DrawFn) -> IndexExtension:
    crcs = tuple(draw(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=5)))
    ids = sorted(draw(st.sets(st.integers(0, 10_000), max_size=5)))
    fine = tuple((e, 1000 + 10 * e) for e in ids)
    tags = draw(st.lists(_known, unique=True, max_size=3))
    sections = tuple(
        ExtensionSection(t, draw(st.binary(max_size=40)), draw(st.booleans())) for t in tags
    )
    return IndexExtension(crcs, fine, sections)


@settings(max_examples=150, deadline=None)
@given(extensions())
def test_round_trip(ext: IndexExtension) -> None:
    data = encode_extension(ext)
    assert data[4:6] == (b"\x00\x02" if ext.sections else b"\x00\x01")
    assert decode_extension(memoryview(data)) == ext


def test_no_sections_is_version_1_byte_for_byte() -> None:
    ext = IndexExtension((0xD774EAC3,), ())
    assert encode_extension(ext).hex() == "4c4f4958000100000000001c00000001d774eac3000000005cdad81f"


def test_unknown_tag_is_skipped_unless_critical() -> None:
    plain = IndexExtension((1,), (), (ExtensionSection(77, b"future", critical=False),))
    assert decode_extension(memoryview(encode_extension(plain))).sections == ()
    critical = IndexExtension((1,), (), (ExtensionSection(77, b"future", critical=True),))
    with pytest.raises(UnsupportedVersionError, match="critical section 77"):
        decode_extension(memoryview(encode_extension(critical)))


def test_section_lookup_and_replace() -> None:
    ext = IndexExtension((1,), ()).with_section(ExtensionSection(TAG_ZONE_MAPS, b"a"))
    ext = ext.with_section(ExtensionSection(TAG_ZONE_MAPS, b"b"))
    found = ext.section(TAG_ZONE_MAPS)
    assert found is not None and found.payload == b"b"
    assert ext.section(TAG_TRANSFORM) is None
    with pytest.raises(ValueError, match="duplicate"):
        IndexExtension((1,), (), (ExtensionSection(1, b""), ExtensionSection(1, b"")))


def test_every_truncation_and_flip_is_typed() -> None:
    ext = IndexExtension(
        (5, 6),
        ((3, 400), (9, 900)),
        (ExtensionSection(TAG_SPAN_CRC32C, b"\x01\x02\x03\x04"), ExtensionSection(3, b"k", True)),
    )
    data = encode_extension(ext)
    for cut in range(len(data)):
        with pytest.raises(FormatError):
            decode_extension(memoryview(data[:cut]))
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x10
        try:
            got = decode_extension(memoryview(bytes(flipped)))
        except FormatError:
            continue
        # the magic is not checked here (is_extension does that); nothing else may pass
        assert i < 4 and got == ext
