"""Issue 21 item 18: ``objects encode`` writes both files or neither: an index path that cannot
be written leaves no data file behind (and no temporary file)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.cli.helpers import one_line_error, run


def _entries(tmp_path: Path) -> Path:
    path = tmp_path / "e.jsonl"
    path.write_text(
        "".join(json.dumps({"payload_b64": base64.b64encode(b"x" * n).decode()}) + "\n"
                for n in range(5))
    )  # fmt: skip
    return path


@pytest.mark.parametrize("bad_index", ["missing-dir/L.index", "a-file/L.index"])
def test_an_unwritable_index_leaves_no_data_file(tmp_path: Path, bad_index: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    out = tmp_path / "out"
    out.mkdir()
    data = out / "L.data"
    line = one_line_error(
        run(
            tmp_path,
            "objects",
            "encode",
            "--entries",
            str(_entries(tmp_path)),
            "--ledger-id",
            "3",
            "--data",
            str(data),
            "--index",
            str(tmp_path / bad_index),
        )
    )
    assert "cannot write" in line
    assert not data.exists()
    assert list(out.iterdir()) == []  # no temporary file either


def test_both_files_are_written(tmp_path: Path) -> None:
    data, index = tmp_path / "L.data", tmp_path / "L.index"
    result = run(
        tmp_path,
        "objects", "encode", "--entries", str(_entries(tmp_path)), "--ledger-id", "3",
        "--data", str(data), "--index", str(index),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert data.stat().st_size > 0 and index.stat().st_size > 0
