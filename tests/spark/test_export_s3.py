"""offloader export run to s3://bucket/prefix (moto, and RGW when it runs): files put whole
through pyarrow's S3FileSystem, a crashed run's leftovers (a file past the watermark, an
unfinished multipart upload) removed, DuckDB proves every message is there once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import ExportSpec
from offloader.export.naming import topic_dir
from tests.spark.export_helpers import (
    TOPIC,
    Clock,
    digest,
    duck_digest,
    new_home,
    offload_all,
    produce_ledger,
)

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def mirror(endpoint: S3Endpoint, bucket: str, prefix: str, to: Path) -> Path:
    """Copy the target's objects to a local directory for DuckDB (no httpfs needed)."""
    client = endpoint.client()
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    for page in pages:
        for obj in page.get("Contents", []):
            if obj["Key"].endswith("/"):
                continue
            path = to / obj["Key"][len(prefix) + 1 :]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
    return to


def test_export_to_s3_exactly_once(spark: Any, aws_env: S3Endpoint, tmp_path: Path) -> None:
    endpoint = aws_env
    bucket = endpoint.new_bucket()
    clock = Clock()
    off = new_home(tmp_path / "home", clock, f"s3://{bucket}/store", endpoint.url)
    values = produce_ledger(off, clock, TOPIC, 0, 80)
    values += produce_ledger(off, clock, TOPIC, 80, 40)
    offload_all(off, TOPIC)
    values += produce_ledger(off, clock, TOPIC, 120, 30)  # still local
    target = f"s3://{bucket}/lake"
    spec = ExportSpec(target, endpoint_url=endpoint.url)
    (report,) = off.export_run([TOPIC], spec, spark=spark)
    assert report.rows == len(values)
    first = mirror(endpoint, bucket, "lake", tmp_path / "m1")
    assert duck_digest(str(first)) == (len(values), len(values), digest(values)[1])
    assert list(first.rglob("_SUCCESS"))

    # a crashed run's leftovers: a complete-looking file past the watermark, an open upload
    client = endpoint.client()
    ledger = report.watermark[0] + 5
    ghost = f"lake/{topic_dir(TOPIC)}/dt=2025-06-15/hr=16/g1-{ledger}-0-3-2025-06-15T16.parquet"
    client.put_object(Bucket=bucket, Key=ghost, Body=b"partial")
    upload = client.create_multipart_upload(Bucket=bucket, Key=ghost + "x")["UploadId"]
    more = produce_ledger(off, clock, TOPIC, 150, 20)
    (second,) = off.export_run([TOPIC], spec, spark=spark)
    assert second.rows == 20 and second.removed_leftovers == 2
    listed = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert upload not in [u["UploadId"] for u in listed]
    final = mirror(endpoint, bucket, "lake", tmp_path / "m2")
    assert duck_digest(str(final)) == (170, 170, digest(values + more)[1])
    status = off.export_status(TOPIC, target, endpoint_url=endpoint.url)
    assert status.watermark == second.watermark and status.lag_entries == 0
    fs = pafs.S3FileSystem(
        endpoint_override=endpoint.url.split("://")[1], scheme="http", region="us-east-1"
    )
    names = {
        i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/lake", recursive=True))
    }
    assert ghost.rpartition("/")[2] not in names
    off.close()
