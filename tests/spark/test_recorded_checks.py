"""Issue 21 items 1 and 5 through the Spark ``topics`` readers (RDD and DataFrame source): the
data object's format version is checked by the executors' block reads, the fetched index is
compared with the size and CRC32C the metadata recorded (two ledgers' swapped pairs are refused,
not served as each other's), and the recorded block CRC32Cs check an index without extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.extension import crc32c
from formats.keys import FORMAT_VERSION_KEY, data_key, index_key
from offloader.metadata import open_metadata_store
from offloader.metadata.base import DriverMetadata
from offloader.spark import offloaded_rdd, register
from tests.spark.conftest import TOPIC_A, Ledger, payloads_of, records_digest, sha, upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]
NOW = 1_700_000_000_000
TOPIC, ML_NAME = TOPIC_A


def _home(
    root: Path, endpoint: S3Endpoint, bucket: str, *, with_extension: bool = True
) -> list[Ledger]:
    """A home whose topic has two offloaded ledgers (local copies gone) of entries of the same
    sizes (so their indexes are the same size), each recorded as the writer records it: the
    index's size and CRC32C, and the block CRC32Cs."""
    meta = open_metadata_store(root)
    meta.create_namespace("public/default", NOW)
    meta.create_topic(TOPIC, NOW)
    client = endpoint.client()
    ledgers = []
    for seed in (1, 2):
        lid = meta.allocate_ledger_id()
        meta.add_ledger(TOPIC, lid, NOW)
        payloads = payloads_of(seed, 80, 150, 150)
        meta.close_ledger(lid, NOW, len(payloads), sum(map(len, payloads)))
        up = upload_ledger(
            endpoint, bucket, lid, payloads, 2048,
            managed_ledger_name=ML_NAME, with_extension=with_extension,
        )  # fmt: skip
        data = client.get_object(Bucket=bucket, Key=data_key(up.uuid, lid))["Body"].read()
        driver = DriverMetadata("aws-s3", {"store_url": f"s3://{bucket}", "endpoint": endpoint.url})
        meta.begin_offload(
            lid, up.uuid, driver, NOW,
            data_key=data_key(up.uuid, lid), index_key=index_key(up.uuid, lid),
        )  # fmt: skip
        meta.complete_offload(
            lid,
            up.uuid,
            NOW,
            data_size=len(data),
            index_size=len(up.index),
            index_crc32c=crc32c(up.index),
            block_crc32c=[crc32c(data[start:end]) for _, _, start, end in up.blocks],
        )
        meta.mark_local_deleted(lid, up.uuid)
        ledgers.append(up)
    meta.close()
    return ledgers


def _expected(ledgers: list[Ledger]) -> list[tuple[Any, ...]]:
    return sorted(
        (TOPIC, lg.ledger_id, i, sha(p)) for lg in ledgers for i, p in enumerate(lg.payloads)
    )


def _rdd(spark: Any, root: Path) -> Any:
    return offloaded_rdd(spark.sparkContext, [TOPIC], home=str(root))


def _df(spark: Any, root: Path) -> Any:
    register(spark)
    return (
        spark.read.format("offloaded-ledger")
        .option("home", str(root))
        .option("topics", TOPIC)
        .load()
    )


def _fails_with(action: Any, *fragments: str) -> None:
    with pytest.raises(Exception) as info:  # Spark wraps an executor's error
        action()
    message = f"{type(info.value).__name__}: {info.value}"
    for fragment in fragments:
        assert fragment in message, message[-2000:]


def _rewrite(endpoint: S3Endpoint, bucket: str, key: str, body: bytes, version: str) -> None:
    client = endpoint.client()
    metadata = client.head_object(Bucket=bucket, Key=key)["Metadata"]
    metadata[FORMAT_VERSION_KEY] = version
    client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata)


def test_swapped_pairs_are_refused_not_served(
    spark: Any, s3_endpoint: S3Endpoint, aws_env: S3Endpoint, tmp_path: Path
) -> None:
    bucket = s3_endpoint.new_bucket()
    ledgers = _home(tmp_path, s3_endpoint, bucket)
    assert len(ledgers[0].index) == len(ledgers[1].index)  # only the CRC32C tells them apart
    client = s3_endpoint.client()
    a, b = ((data_key(lg.uuid, lg.ledger_id), index_key(lg.uuid, lg.ledger_id)) for lg in ledgers)
    for key_a, key_b in zip(a, b, strict=True):
        got_a = client.get_object(Bucket=bucket, Key=key_a)
        got_b = client.get_object(Bucket=bucket, Key=key_b)
        client.put_object(
            Bucket=bucket, Key=key_a, Body=got_b["Body"].read(), Metadata=got_b["Metadata"]
        )
        client.put_object(
            Bucket=bucket, Key=key_b, Body=got_a["Body"].read(), Metadata=got_a["Metadata"]
        )
    expected = ("ChecksumMismatchError", "not the index this ledger was offloaded with")
    _fails_with(lambda: _rdd(spark, tmp_path).collect(), *expected)
    _fails_with(lambda: _df(spark, tmp_path).collect(), *expected)


def test_a_data_object_of_another_version_fails_the_job(
    spark: Any, s3_endpoint: S3Endpoint, aws_env: S3Endpoint, tmp_path: Path
) -> None:
    version = "-12345"
    bucket = s3_endpoint.new_bucket()
    ledgers = _home(tmp_path, s3_endpoint, bucket)
    key = data_key(ledgers[1].uuid, ledgers[1].ledger_id)
    body = s3_endpoint.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    _rewrite(s3_endpoint, bucket, key, body, version)
    expected = ("ForeignObjectError", f"Invalid object version {version} for {key}")
    _fails_with(lambda: _rdd(spark, tmp_path).collect(), *expected)
    _fails_with(lambda: _df(spark, tmp_path).collect(), *expected)


def test_recorded_block_crcs_check_an_index_without_extension(
    spark: Any, s3_endpoint: S3Endpoint, aws_env: S3Endpoint, tmp_path: Path
) -> None:
    bucket = s3_endpoint.new_bucket()
    ledgers = _home(tmp_path, s3_endpoint, bucket, with_extension=False)
    assert records_digest(_rdd(spark, tmp_path).collect()) == _expected(ledgers)
    lg = ledgers[0]
    key = data_key(lg.uuid, lg.ledger_id)
    data = bytearray(s3_endpoint.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    data[lg.blocks[1][2] + 128 + 12 + 3] ^= 0x01  # block 1, its first entry's payload
    _rewrite(s3_endpoint, bucket, key, bytes(data), "1")
    expected = ("ChecksumMismatchError", "block 1 CRC32C")
    _fails_with(lambda: _rdd(spark, tmp_path).collect(), *expected)
    _fails_with(lambda: _df(spark, tmp_path).collect(), *expected)
