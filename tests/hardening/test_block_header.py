"""Issue 21 item 2: the public block header decoder refuses a header shorter than it says."""

from __future__ import annotations

import pytest

from formats.block import DataBlockHeader
from formats.errors import TruncatedError
from formats.wire import BLOCK_HEADER_LEN


@pytest.mark.parametrize("length", [28, 29, 64, BLOCK_HEADER_LEN - 1])
def test_a_short_header_is_refused(length: int) -> None:
    raw = DataBlockHeader(block_len=4096, first_entry_id=7).encode()
    with pytest.raises(TruncatedError, match="too small"):
        DataBlockHeader.decode(raw[:length])
    with pytest.raises(TruncatedError, match="too small"):
        DataBlockHeader.decode(b"xx" + raw[:length], 2)


def test_a_whole_header_still_decodes() -> None:
    raw = DataBlockHeader(block_len=4096, first_entry_id=7).encode()
    assert DataBlockHeader.decode(raw) == DataBlockHeader(block_len=4096, first_entry_id=7)
