"""The Spark sources' ``topics`` option on a shared PostgreSQL metadata store: one broker's
home reads every broker's offloaded ledgers (issue 26's cluster-wide reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from offloader.api import BrokerSettings, Offloader
from offloader.spark import offloaded_rdd, register
from offloader.spark.plan import plan_topics

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

NS = "public/default"
T_A = "persistent://public/default/from-a"
T_B = "persistent://public/default/from-b"


def test_topics_read_other_brokers_offloaded_ledgers(
    spark: Any, tmp_path: Path, pg_url: str
) -> None:
    store = f"file://{tmp_path / 'objects'}"
    small = BrokerSettings(max_entries_per_ledger=5, min_rollover_seconds=0)
    with (
        Offloader.from_settings(tmp_path / "a", store, metadata_url=pg_url, broker=small) as a,
        Offloader.from_settings(tmp_path / "b", store, metadata_url=pg_url, broker=small) as b,
    ):
        a.create_namespace(NS)
        a.produce(T_A, [f"a{i}".encode() for i in range(23)])  # 4 closed ledgers, 1 open
        a.offload_prefix(T_A, size_threshold=0)
        a.produce(T_A, [f"a{i}".encode() for i in range(23, 25)])  # a 5th closed, local to a
        a.produce(T_A, [b"a25"])  # a's open ledger
        b.produce(T_B, [f"b{i}".encode() for i in range(12)])  # 2 closed ledgers, 1 open, in b
    # b reads its own open ledger; a's ledgers only in a's home are left out, with a warning
    expected = sorted([(T_A, f"a{i}") for i in range(20)] + [(T_B, f"b{i}") for i in range(12)])
    with capture_logs() as logs:
        plan_topics(str(tmp_path / "b"), [T_A, T_B], metadata=pg_url)
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert (warning["ledgers"], warning["entries"]) == (2, 6)  # a20..a24, a25
    assert warning["left_out"].count(f"{T_A} ledger") == 2
    register(spark)
    rows = (
        spark.read.format("offloaded-ledger")
        .option("topics", f"{T_A},{T_B}")
        .option("home", str(tmp_path / "b"))
        .option("metadata", pg_url)
        .load()
        .collect()
    )
    assert sorted((r.topic, bytes(r.payload).decode()) for r in rows) == expected
    rdd = offloaded_rdd(spark.sparkContext, [T_A], home=str(tmp_path / "b"), metadata=pg_url)
    assert sorted(bytes(p).decode() for _t, _l, _e, p in rdd.collect()) == sorted(
        f"a{i}" for i in range(20)
    )
