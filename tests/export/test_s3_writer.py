"""Data files written through pyarrow's S3 writer (``pyarrow.fs.S3FileSystem``) on moto and on
Ceph RGW 16: a small file (one PUT) and one larger than a part (a multipart upload), each under
a temporary name then copied to its name; with the AWS SDK's checksum variables unset in the
environment (the target sets ``when_required`` while the SDK builds its client, without which
RGW answers the parts 411 MissingContentLength, and leaves the environment as it was)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devservers.endpoint import S3Endpoint
from offloader.export.target import CHECKSUM_ENV, TargetSpec
from offloader.spark.export_write import _write_s3

pytestmark = pytest.mark.s3


@pytest.mark.parametrize("rows", [3, 14])  # 3 KiB: one PUT; 14 MiB: parts of 5 MiB and more
def test_pyarrow_s3_writer_puts_complete_files(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    for key in CHECKSUM_ENV:
        monkeypatch.delenv(key, raising=False)
    bucket = s3_endpoint.new_bucket()
    spec = TargetSpec(f"s3://{bucket}/lake", s3_endpoint.url, s3_endpoint.region)
    size = 1024 if rows == 3 else 1 << 20
    table = pa.table({"i": list(range(rows)), "v": [os.urandom(size) for _ in range(rows)]})
    fs = spec.open()
    # the client was built with the checksum defaults; the process environment is as it was
    assert not any(key in os.environ for key in CHECKSUM_ENV)
    path = spec.path("topic=t/dt=2025-06-15/g1-0-0-1-2025-06-15.parquet")
    written, footer = _write_s3(fs, path, table)
    client = s3_endpoint.client()
    # pyarrow keeps the temporary name's directory as an empty "dir/" marker object
    listed = client.list_objects_v2(Bucket=bucket, Prefix="lake/")["Contents"]
    files = [o for o in listed if not o["Key"].endswith("/")]
    assert [o["Key"] for o in files] == ["lake/topic=t/dt=2025-06-15/g1-0-0-1-2025-06-15.parquet"]
    assert files[0]["Size"] == written
    assert all(o["Size"] == 0 for o in listed if o["Key"].endswith("/"))
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert pq.read_table(path, filesystem=fs).equals(table)
    # the footer the task reports (an Iceberg commit's DataFile) is the object's own
    stored = pq.ParquetFile(path, filesystem=fs).metadata
    assert pq.read_metadata(pa.BufferReader(footer)).equals(stored)
