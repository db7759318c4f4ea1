"""Reading topics through the metadata store: each ledger from whichever tier holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.extension import crc32c
from formats.keys import data_key, index_key
from offloader.config import OffloadSettings
from offloader.ledgers import LedgerStore
from offloader.metadata import open_metadata_store
from offloader.metadata.base import DriverMetadata
from offloader.spark import offloaded_rdd, register
from tests.spark.conftest import TOPIC_A, TOPIC_B, payloads_of, records_digest, sha, upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]
NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def home(s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two topics; on each, one offloaded ledger (local copy deleted), one offloaded ledger
    whose local copy is still there, one closed ledger only local, and an open ledger."""
    root = tmp_path_factory.mktemp("home")
    bucket = s3_endpoint.new_bucket()
    ledgers = LedgerStore(root)
    meta = open_metadata_store(root)
    expected = []
    meta.create_namespace("public/default", NOW)
    for topic, ml_name in (TOPIC_A, TOPIC_B):
        meta.create_topic(topic, NOW)
        for kind in ("offloaded", "offloaded-local-kept", "local", "open"):
            lid = meta.allocate_ledger_id()
            meta.add_ledger(topic, lid, NOW)
            payloads = payloads_of(lid, 120, 0, 300, empty_every=7)
            writer = ledgers.create_ledger(topic, lid)
            for p in payloads:
                writer.append(p)
            if kind == "open":
                meta.update_ledger_stats(lid, len(payloads), sum(map(len, payloads)))
                continue
            writer.close()
            meta.close_ledger(lid, NOW, len(payloads), sum(map(len, payloads)))
            expected += [(topic, lid, i, sha(p)) for i, p in enumerate(payloads)]
            if kind == "local":
                continue
            up = upload_ledger(
                s3_endpoint, bucket, lid, payloads, 2048, managed_ledger_name=ml_name
            )
            driver = DriverMetadata(
                "aws-s3", {"store_url": f"s3://{bucket}", "endpoint": s3_endpoint.url}
            )
            meta.begin_offload(
                lid,
                up.uuid,
                driver,
                NOW,
                data_key=data_key(up.uuid, lid),
                index_key=index_key(up.uuid, lid),
            )
            meta.complete_offload(
                lid,
                up.uuid,
                NOW,
                data_size=up.blocks[-1][3],
                index_size=len(up.index),
                index_crc32c=crc32c(up.index),
            )
            if kind == "offloaded":
                meta.mark_local_deleted(lid, up.uuid)
                ledgers.delete_ledger(topic, lid)  # only the object store has it now
    meta.close()
    return {"home": str(root), "expected": sorted(expected)}


def test_topics_read_completely_across_tiers(
    spark: Any, home: dict[str, Any], aws_env: S3Endpoint
) -> None:
    settings = OffloadSettings(max_block_size=8 * 1024, enforce_min_block_size=False)
    rdd = offloaded_rdd(spark.sparkContext, [TOPIC_A[0], TOPIC_B[0]], settings, home=home["home"])
    got = records_digest(rdd.collect())
    assert got == home["expected"]
    # 3 closed ledgers x 2 topics, each > 1 partition (2 KiB blocks / 8 KiB local chunks)
    assert rdd.getNumPartitions() > 12

    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("home", home["home"])
        .option("topics", f"{TOPIC_A[0]},{TOPIC_B[0]}")
        .load()
    )
    assert records_digest([tuple(r) for r in df.collect()]) == home["expected"]


def test_topic_with_pruning(spark: Any, home: dict[str, Any], aws_env: S3Endpoint) -> None:
    from pyspark.sql import functions as F

    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("home", home["home"])
        .option("topics", TOPIC_B[0])
        .load()
    )
    lid = next(r[1] for r in home["expected"] if r[0] == TOPIC_B[0])
    rows = df.filter((F.col("ledger_id") == lid) & (F.col("entry_id").isin(3, 50, 119))).collect()
    assert sorted(r["entry_id"] for r in rows) == [3, 50, 119]
    assert Path(home["home"]).is_dir()
