"""Issue 21 item 16: a produce that hits a full disk (ENOSPC) says how many of its entries were
written and where the topic now ends, so that a retry does not write them twice."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.cli.helpers import json_lines, ok, one_line_error, run


def test_a_full_disk_mid_produce_says_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(tmp_path, "namespaces", "create", "public/default")
    real_pwrite = os.pwrite
    limit = 2500 * 1024  # the "disk" holds about 2.5 MiB of ledger data: 2 batches of 1000

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if offset + len(data) > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr("offloader.ledgers.writer.os.pwrite", pwrite)
    line = one_line_error(
        run(tmp_path, "topics", "produce", "t", "--synthetic", "5000", "--size", "1K")
    )
    monkeypatch.undo()
    assert "No space left on device" in line
    (info,) = json_lines(ok(tmp_path, "--json", "topics", "info", "t"))
    written = info["entries"]
    assert 0 < written < 5000
    assert f"the first {written} entries of this produce were written" in line, line
    assert f"now ends at 0:{written - 1}" in line, line
    assert "a retry must skip them" in line
