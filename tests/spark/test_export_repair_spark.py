"""Files gone below an export's watermark written again by the Spark engine (a repair's tasks
carry the files that are there to the executors), for a time field of the decoded value whose
partitions interleave (files of several hours overlap in range, so no gap shows where a file
was: the repair reads every task up to the watermark). Same names, same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from offloader.api import ExportSpec
from tests.spark.export_helpers import (
    TOPIC,
    Clock,
    digest,
    duck_digest,
    new_home,
    offload_all,
    produce_ledger,
)

pytestmark = [pytest.mark.spark]

HOUR = 3_600_000


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.parquet"))
    }


def test_spark_writes_gone_files_again_when_partitions_interleave(
    spark: Any, tmp_path: Path
) -> None:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)

    def ts(i: int, now: int) -> int:
        return now + (i % 3) * HOUR  # three hours' rows interleaved in every entry range

    values = produce_ledger(off, clock, TOPIC, 0, 120, ts=ts)
    offload_all(off, TOPIC)
    values += produce_ledger(off, clock, TOPIC, 120, 60, ts=ts)  # still local
    lake = tmp_path / "lake"
    spec = ExportSpec(
        str(lake), time_field="ts", value_format="json", schema="i BIGINT, ts BIGINT",
        max_file_size=2048,
    )  # fmt: skip
    with off:
        (first,) = off.export_run([TOPIC], spec, spark=spark)
        assert first.rows == len(values)
        before = _files(lake)
        assert len({p.split("/")[2] for p in before}) >= 3  # several hour directories
        gone = sorted(before)[1::4]
        for path in gone:
            (lake / path).unlink()
        status = off.export_status(TOPIC, str(lake))
        assert status.missing_files == len(gone)
        (again,) = off.export_run([TOPIC], spec, spark=spark)
        assert (again.repaired, again.missing, again.rows) == (len(gone), 0, 0)
        assert _files(lake) == before
        assert duck_digest(str(lake)) == (len(values), len(values), digest(values)[1])
