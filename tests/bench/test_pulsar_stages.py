"""bench.pulsar_stages: one block's task taken apart by stage, on moto over HTTP; its rows are
the block's messages and its batches follow the source's batch options."""

from __future__ import annotations

import json

import pytest

from bench.pulsar_stages import _STAGES, main

pytestmark = [pytest.mark.s3]


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    argv = ["--total", "3M", "--block", "1M", "--batch", "50", "--message", "100", "--repeat", "1"]
    assert main([*argv, *extra]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    record: dict[str, object] = json.loads(line)
    return record


def test_stages_of_one_block(capsys: pytest.CaptureFixture[str]) -> None:
    record = _run(capsys)
    assert record["name"] == "pulsar_task_stages"
    stages = record["stages_ms"]
    assert isinstance(stages, dict) and set(stages) == set(_STAGES)
    assert all(isinstance(v, float) and v >= 0 for v in stages.values())
    # every message of the block's entries (50 each), about 1 MiB of 100-byte values
    entries = record["entries"]
    assert isinstance(entries, int) and record["rows"] == entries * 50
    assert 8000 <= entries * 50 <= 10_486
    assert record["batches"] == 2  # 8192 rows bind, not 2 MiB of values
    assert float(record["ours"]) > 0 and float(record["baseline"]) > 0  # type: ignore[arg-type]


def test_batch_bytes_option_reaches_the_reader(capsys: pytest.CaptureFixture[str]) -> None:
    record = _run(capsys, "--batch-bytes", str(100 * 1000))
    assert record["batch_bytes"] == 100 * 1000
    assert record["batches"] == 10  # 100,000 bytes of values: 1,000 rows per batch
