"""The file store's object container (formats/local_object.py, spec/local-store.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats.errors import BadMagicError, CorruptDataError, MetadataTooLargeError, TruncatedError
from formats.local_object import (
    decode_local_object,
    encode_local_header,
    is_local_object,
    object_bytes,
)

SPEC = Path(__file__).resolve().parents[2] / "spec" / "local-store.md"


@given(
    st.dictionaries(
        st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20),
        st.text(max_size=40),
        max_size=5,
    ),
    st.binary(max_size=200),
)
def test_round_trip(metadata: dict[str, str], body: bytes) -> None:
    data = encode_local_header(metadata) + body
    meta, view = decode_local_object(data)
    assert meta == metadata
    assert bytes(view) == body and object_bytes(data) == body and is_local_object(data)


def test_a_bare_object_is_read_as_it_is() -> None:
    assert object_bytes(b"\x00\x01abc") == b"\x00\x01abc"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"LOFFOBJ1\x00", TruncatedError),
        (b"LOFFOBJ1\x00\x01\x00\x01", BadMagicError),
        (b'LOFFOBJ1\x00\x00\x00\x05{"a":', CorruptDataError),
        (b"LOFFOBJ1\x00\x00\x00\x02[]", CorruptDataError),
        (b"LOFFOBJ1\x00\x00\x00\x04\xff\xfe{}", CorruptDataError),
    ],
)
def test_a_damaged_header_is_a_typed_error(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_local_object(data)


def test_metadata_larger_than_the_header_allows_is_refused() -> None:
    with pytest.raises(MetadataTooLargeError):
        encode_local_header({"k": "v" * 70_000})


def test_the_worked_example_of_the_spec() -> None:
    """spec/local-store.md's hex dump is what the encoder writes for its metadata and body."""
    text = SPEC.read_text()
    hex_lines = re.search(r"```text\n(.*?)```", text, re.S)
    assert hex_lines is not None
    dumped = bytes.fromhex("".join(line.split("|")[0][10:] for line in hex_lines[1].splitlines()))
    expected = (
        encode_local_header({"Role": "data", "ManagedLedgerName": "a/b/persistent/t"}) + b"hi"
    )
    assert dumped == expected
