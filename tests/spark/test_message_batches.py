"""How the pulsar-messages source cuts a block into Arrow batches: by default ``batch_rows``
(8192, the in-memory floor's batch) binds for small messages, not ``batch_bytes`` (each batch
costs a flush in the worker and a batch read in the JVM: bench pulsar_scan), and a small block's
batches hold at most half the block (a worker's memory stays within two blocks)."""

from __future__ import annotations

from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.pulsar import OutgoingMessage, encode_entry
from offloader.spark import register
from offloader.spark.message_rows import schema_ddl
from offloader.spark.messages import (
    DEFAULT_MESSAGE_BATCH_BYTES,
    PulsarMessagesReader,
    task_batch_bytes,
)
from offloader.spark.source import DEFAULT_BATCH_ROWS, TaskPartition
from tests.spark.conftest import upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]

T0 = 1_750_000_000_000
ENTRIES, BATCH, SIZE = 220, 100, 200  # 22,000 messages of 200 bytes: 4.4 MB of values


@pytest.fixture(scope="module")
def small_messages(s3_endpoint: S3Endpoint) -> Any:
    entries = [
        encode_entry(
            [OutgoingMessage(bytes([i % 251]) * SIZE, key=f"k{j % 4}") for j in range(BATCH)],
            producer_name="p",
            sequence_id=i * BATCH,
            publish_time=T0 + i,
        )
        for i in range(ENTRIES)
    ]
    bucket = s3_endpoint.new_bucket()
    ledger = upload_ledger(s3_endpoint, bucket, 7, entries, 8 << 20)  # one block
    assert len(ledger.blocks) == 1
    options = {
        "store": f"s3://{bucket}",
        "endpoint": s3_endpoint.url,
        "ledgers": f"{ledger.ledger_id}:{ledger.uuid}",
    }
    return options


def _batches(spark: Any, options: dict[str, str]) -> list[Any]:
    schema = spark.createDataFrame([], schema_ddl(options)).schema
    reader = PulsarMessagesReader(options, schema)
    (task,) = reader.plan()
    return list(reader.read(TaskPartition(task)))


def test_default_batches_are_cut_by_rows(
    spark: Any, small_messages: Any, aws_env: S3Endpoint
) -> None:
    assert DEFAULT_BATCH_ROWS * SIZE < DEFAULT_MESSAGE_BATCH_BYTES
    batches = _batches(spark, small_messages)
    rows = [b.num_rows for b in batches]
    # a batch is flushed after the entry that fills it: 82 entries of 100 messages, twice, then 56
    assert rows == [8200, 8200, 5600]
    values = [sum(len(v) for v in b.column("value").to_pylist()) for b in batches]
    assert values == [8200 * SIZE, 8200 * SIZE, 5600 * SIZE]


def test_batch_bytes_still_bounds_a_batch(
    spark: Any, small_messages: Any, aws_env: S3Endpoint
) -> None:
    batches = _batches(spark, {**small_messages, "batch_bytes": str(512 << 10)})
    rows = [b.num_rows for b in batches]
    assert sum(rows) == ENTRIES * BATCH
    # 512 KiB holds 2,621 values of 200 bytes: flushed after the entry that passes it
    assert rows == [2700] * 8 + [400]


def test_scan_with_default_batches(spark: Any, small_messages: Any, aws_env: S3Endpoint) -> None:
    from pyspark.sql import functions as F

    register(spark)
    reader = spark.read.format("pulsar-messages")
    for key, value in small_messages.items():
        reader = reader.option(key, value)
    row = reader.load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
    assert (row["n"], row["b"]) == (ENTRIES * BATCH, ENTRIES * BATCH * SIZE)


class _Ref:
    def __init__(self, size: int) -> None:
        self.start, self.end = 1000, 1000 + size


class _Task:
    def __init__(self, size: int) -> None:
        self.ref = _Ref(size)


def test_a_small_blocks_batches_hold_at_most_half_of_it() -> None:
    d = DEFAULT_MESSAGE_BATCH_BYTES
    assert task_batch_bytes(_Task(64 << 20), d) == d  # large blocks: the default
    assert task_batch_bytes(_Task(1 << 20), d) == 512 << 10
    assert task_batch_bytes(_Task(4 << 10), d) == 64 << 10  # never below 64 KiB
    assert task_batch_bytes(object(), d) == d  # a local ledger's task: no block


def test_a_small_block_is_cut_in_halves_unless_batch_bytes_is_given(
    spark: Any, s3_endpoint: S3Endpoint, aws_env: S3Endpoint
) -> None:
    entries = [
        encode_entry(
            [OutgoingMessage(bytes([i % 251]) * SIZE) for _ in range(BATCH)],
            producer_name="p",
            sequence_id=i * BATCH,
            publish_time=T0 + i,
        )
        for i in range(50)  # 1 MB of values in one block
    ]
    bucket = s3_endpoint.new_bucket()
    ledger = upload_ledger(s3_endpoint, bucket, 8, entries, 2 << 20)
    assert len(ledger.blocks) == 1
    options = {
        "store": f"s3://{bucket}",
        "endpoint": s3_endpoint.url,
        "ledgers": f"{ledger.ledger_id}:{ledger.uuid}",
    }
    half = [b.num_rows for b in _batches(spark, options)]
    assert sum(half) == 5000 and len(half) == 2 and max(half) < 5000
    given = [b.num_rows for b in _batches(spark, {**options, "batch_bytes": str(2 << 20)})]
    assert given == [5000]
