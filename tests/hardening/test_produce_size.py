"""Issue 21 item 12: ``topics produce --synthetic N --size 256M`` (or more) is a usage error
naming the limit, not an OverflowError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.topics.produce import synthetic_payloads
from tests.cli.helpers import ok, run


@pytest.mark.parametrize("size", ["256M", "300M", "3G", "1T"])
def test_an_entry_too_big_for_any_block_is_a_usage_error(tmp_path: Path, size: str) -> None:
    ok(tmp_path, "namespaces", "create", "public/default")
    result = run(tmp_path, "topics", "produce", "t", "--synthetic", "1", "--size", size)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.stderr
    assert "could never be offloaded" in result.stderr
    assert "--max-block-size" in result.stderr


def test_the_largest_entry_a_block_holds_is_accepted(tmp_path: Path) -> None:
    ok(tmp_path, "namespaces", "create", "public/default")
    # a 1M block holds 1M - 140 bytes of payload
    ok(
        tmp_path,
        "topics", "produce", "t", "--synthetic", "1", "--size", str((1 << 20) - 140),
        "--max-block-size", "1M",
    )  # fmt: skip
    result = run(
        tmp_path,
        "topics", "produce", "t", "--synthetic", "1", "--size", str((1 << 20) - 139),
        "--max-block-size", "1M",
    )  # fmt: skip
    assert result.exit_code == 2, result.output


def test_large_synthetic_payloads_are_drawn_in_chunks() -> None:
    # above the 16 MiB chunk: the filler is joined from pieces, still deterministic
    first = next(synthetic_payloads(1, 17 << 20))
    again = next(synthetic_payloads(1, 17 << 20))
    assert len(first) == 17 << 20 and first == again
    assert first.startswith(b"entry-0000000000 ")
