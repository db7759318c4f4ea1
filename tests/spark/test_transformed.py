"""Spark reads transformed (compressed + encrypted) ledgers: the RDD and the DataFrame source
through the metadata store, the executors decrypting with the home's key ring."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.pulsar import OutgoingMessage, encode_chunks, encode_entry, iter_messages
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.spark import offloaded_rdd, register
from tests.transforms.helpers import (
    NS,
    TOPIC,
    broker,
    json_payloads,
    random_payloads,
    with_offload,
)

pytestmark = [pytest.mark.spark, pytest.mark.s3]

T0 = 1_750_000_000_000  # ms


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


def test_pulsar_messages_source_reads_transformed_ledgers(
    spark: Any,
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    aws_env: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pulsar-messages source over a compressed + encrypted ledger of 2 KiB blocks, with a
    chunked message whose chunks cross blocks: the task finishing it reads the next blocks
    through the same decoding view (never the stored chunks as blocks)."""
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    bucket = s3_endpoint.new_bucket()
    entries = [
        encode_entry(
            [OutgoingMessage(json.dumps({"v": i}).encode() * 8, key=f"k{i % 3}")],
            producer_name="p",
            sequence_id=i,
            publish_time=T0 + i,
            batch=False,
        )
        for i in range(12)
    ]
    entries += encode_chunks(
        OutgoingMessage(os.urandom(5000), key="big"),
        chunk_size=700,
        producer_name="p",
        sequence_id=12,
        publish_time=T0 + 12,
    )
    entries += [
        encode_entry(
            [OutgoingMessage(b"tail-%d" % i)],
            producer_name="p",
            sequence_id=13 + i,
            publish_time=T0 + 13 + i,
            batch=False,
        )
        for i in range(5)
    ]
    settings = with_offload(broker(len(entries)), max_block_size=2048)
    with Offloader.from_settings(
        home, f"s3://{bucket}/off", endpoint_url=s3_endpoint.url, broker=settings
    ) as off:
        off.create_namespace(NS)
        create_key(home, "k1")
        off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
        off.produce(TOPIC, entries)
        off.offload_prefix(TOPIC, position=Position(1, 0))
    off.runtime.ledgers.delete_ledger(TOPIC, 0)  # only in the object store now
    want = sorted(
        (m.message_id, m.key, m.value)
        for m in iter_messages([(0, i, p) for i, p in enumerate(entries)])
    )
    register(spark)
    df = (
        spark.read.format("pulsar-messages")
        .option("home", str(home))
        .option("topics", TOPIC)
        .load()
    )
    assert df.rdd.getNumPartitions() > 3  # several blocks: the big message crosses them
    rows = sorted((r.message_id, r.key, bytes(r.value)) for r in df.collect())
    assert rows == want
    assert sum(1 for r in rows if r[1] == "big") == 1
