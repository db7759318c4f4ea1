"""Pulsar-written golden objects read with no metadata store; damaged objects fail the job."""

from __future__ import annotations

import json
import uuid as uuid_mod
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.keys import FORMAT_VERSION_KEY, data_key, index_key
from offloader.spark import offloaded_rdd, register
from tests.conftest import GOLDEN_DIR
from tests.spark.conftest import Dataset, payloads_of, records_digest, upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]

MANIFEST = json.loads((GOLDEN_DIR / "manifest.json").read_text())
OK_CASES = [c for c in MANIFEST["cases"] if c["expected_reader_result"] == "ok"]
ERROR_CASES = [c for c in MANIFEST["cases"] if c["expected_reader_result"] == "error"]


def _upload_golden(endpoint: S3Endpoint, bucket: str, case: dict[str, Any]) -> str:
    """PUT a case's objects under a fresh uuid, with only Pulsar's version metadata."""
    uid = str(uuid_mod.uuid4())
    client = endpoint.client()
    for key, suffix in (
        (data_key(uid, case["ledger_id"]), "data"),
        (index_key(uid, case["ledger_id"]), "index"),
    ):
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=(GOLDEN_DIR / f"{case['name']}.{suffix}").read_bytes(),
            Metadata={FORMAT_VERSION_KEY: "1"},
        )
    return uid


@pytest.fixture(scope="module")
def golden(s3_endpoint: S3Endpoint) -> tuple[str, list[tuple[int, str]]]:
    bucket = s3_endpoint.new_bucket()
    pairs = [(c["ledger_id"], _upload_golden(s3_endpoint, bucket, c)) for c in OK_CASES]
    return bucket, pairs


def _expected_golden() -> list[tuple[Any, ...]]:
    return sorted(
        ("", c["ledger_id"], e["entry_id"], e["sha256"]) for c in OK_CASES for e in c["entries"]
    )


def test_golden_objects_via_pairs_and_discover(
    spark: Any, golden: tuple[str, list[tuple[int, str]]], aws_env: S3Endpoint
) -> None:
    bucket, pairs = golden
    blocks = sum(len(c["blocks"]) for c in OK_CASES)
    rdd = offloaded_rdd(
        spark.sparkContext, pairs, store_url=f"s3://{bucket}", endpoint_url=aws_env.url
    )
    assert rdd.getNumPartitions() == blocks
    assert records_digest(rdd.collect()) == _expected_golden()

    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("store", f"s3://{bucket}")
        .option("endpoint", aws_env.url)
        .option("discover", "true")
        .load()
    )
    assert df.rdd.getNumPartitions() == blocks
    assert records_digest([tuple(r) for r in df.collect()]) == _expected_golden()


def _fails_with(action: Any, error_name: str) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps the worker's error
        action()
    message = f"{type(info.value).__name__}: {info.value}"
    assert error_name in message, message[-2000:]
    return message


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c["name"])
def test_golden_error_case_fails_the_job(
    spark: Any, s3_endpoint: S3Endpoint, aws_env: S3Endpoint, case: dict[str, Any]
) -> None:
    bucket = s3_endpoint.new_bucket()
    uid = _upload_golden(s3_endpoint, bucket, case)
    # the driver refuses the index (or, for damage only the data shows, the job fails)
    _fails_with(
        lambda: offloaded_rdd(
            spark.sparkContext,
            [(case["ledger_id"], uid)],
            store_url=f"s3://{bucket}",
            endpoint_url=aws_env.url,
        ).collect(),
        "IndexInconsistentError",
    )
    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("store", f"s3://{bucket}")
        .option("endpoint", aws_env.url)
        .option("discover", "true")
        .load()
    )
    _fails_with(df.collect, "IndexInconsistentError")


@pytest.fixture(scope="module")
def corrupt(s3_endpoint: S3Endpoint) -> Dataset:
    """One ledger (index extension with block CRC32Cs) with a payload byte of block 1 flipped."""
    bucket = s3_endpoint.new_bucket()
    ledger = upload_ledger(s3_endpoint, bucket, 42, payloads_of(42, 60, 50, 200), 2048)
    client = s3_endpoint.client()
    key = data_key(ledger.uuid, ledger.ledger_id)
    data = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    data[ledger.blocks[1][2] + 128 + 12 + 3] ^= 0x40  # block 1, first entry's payload
    client.put_object(Bucket=bucket, Key=key, Body=bytes(data), Metadata={FORMAT_VERSION_KEY: "1"})
    return Dataset(s3_endpoint, bucket, [ledger])


def test_corrupt_block_fails_rdd_job_with_typed_error(
    spark: Any, corrupt: Dataset, aws_env: S3Endpoint
) -> None:
    rdd = offloaded_rdd(
        spark.sparkContext, corrupt.pairs, store_url=corrupt.store_url, endpoint_url=aws_env.url
    )
    message = _fails_with(rdd.collect, "ChecksumMismatchError")
    assert "block 1 CRC32C" in message
    # the other blocks are intact: a read that skips block 1 succeeds
    _first_bad, last_bad = corrupt.ledgers[0].blocks[1][:2]
    ok = offloaded_rdd(
        spark.sparkContext,
        corrupt.pairs,
        store_url=corrupt.store_url,
        endpoint_url=aws_env.url,
        entry_range=(last_bad + 1, 10_000),
    )
    assert ok.count() == 60 - last_bad - 1


def test_corrupt_block_fails_dataframe_job_with_typed_error(
    spark: Any, corrupt: Dataset, aws_env: S3Endpoint
) -> None:
    register(spark)
    lid, uid = corrupt.pairs[0]
    df = (
        spark.read.format("offloaded-ledger")
        .option("store", corrupt.store_url)
        .option("endpoint", aws_env.url)
        .option("ledgers", f"{lid}:{uid}")
        .load()
    )
    _fails_with(df.count, "ChecksumMismatchError")
