"""The C CRC32C of ``_pulsar_speedups`` (``formats/_crc32c.h``, shared with ``_speedups``:
the crc32 instruction with three streams, and the slicing-by-8 table) against the ``crc32c``
package: any bytes, any starting value, any alignment, lengths around the three-stream rounds
(3 x 4096 bytes)."""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.pulsar.speedups import C_MODULE

pytestmark = pytest.mark.skipif(C_MODULE is None, reason="no C extension (pure Python build)")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), start=st.integers(0, 2**32 - 1), skip=st.integers(0, 7))
def test_same_as_the_crc32c_package(data: bytes, start: int, skip: int) -> None:
    view = memoryview(data)[min(skip, len(data)) :]
    want = crc32c.crc32c(view, start)
    assert C_MODULE.crc32c(view, start) == want
    assert C_MODULE.crc32c(view, start, False) == want


@pytest.mark.parametrize(
    "size", [4095, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 1, 7 * 4096 + 13, 1 << 20]
)
def test_long_buffers_and_the_three_streams(size: int) -> None:
    data = os.urandom(size + 8)
    for skip in (0, 3, 8):
        view = memoryview(data)[skip : skip + size]
        want = crc32c.crc32c(view)
        assert C_MODULE.crc32c(view) == want
        assert C_MODULE.crc32c(view, 0, False) == want
        # in two pieces, going on from the first one's value
        cut = size // 3
        assert C_MODULE.crc32c(view[cut:], C_MODULE.crc32c(view[:cut])) == want


def test_known_value() -> None:
    assert C_MODULE.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert C_MODULE.crc32c(b"") == 0
