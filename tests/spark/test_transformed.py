"""Spark reads transformed (compressed + encrypted) ledgers: the RDD and the DataFrame source
through the metadata store, the executors decrypting with the home's key ring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.spark import offloaded_rdd, register
from tests.servers.endpoint import S3Endpoint
from tests.transforms.helpers import NS, TOPIC, broker, json_payloads, random_payloads

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_spark_reads_transformed_ledgers(
    spark: Any,
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    aws_env: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    bucket = s3_endpoint.new_bucket()
    payloads = json_payloads(300) + random_payloads(300)
    with Offloader.from_settings(
        home, f"s3://{bucket}/off", endpoint_url=s3_endpoint.url, broker=broker()
    ) as off:
        off.create_namespace(NS)
        create_key(home, "k1")
        off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
        off.produce(TOPIC, payloads)
        off.offload_prefix(TOPIC, position=Position(2, 0))
    off.runtime.ledgers.delete_ledger(TOPIC, 0)  # ledger 0 only in the object store now
    rdd = offloaded_rdd(spark.sparkContext, [TOPIC], home=str(home))
    got = sorted((r[1], r[2], bytes(r[3])) for r in rdd.collect())
    assert [p for _l, _e, p in got] == payloads
    register(spark)
    df = spark.read.format("offloaded-ledger").option("home", str(home)).option("topics", TOPIC)
    rows = sorted((r["ledger_id"], r["entry_id"], bytes(r["payload"])) for r in df.load().collect())
    assert rows == got
