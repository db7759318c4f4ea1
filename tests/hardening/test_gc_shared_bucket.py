"""Issue 21 items 7, 8 and 11 on S3 (moto, over HTTP): a bucket prefix shared with a Pulsar
broker, another offloader home and other clients. gc and the service's sweep delete only what
this installation provably wrote; odd keys (``../x``, ``//x``, control characters) are
skipped and reported, never a failure; hostile keys reach the terminal escaped."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from tests.cli.helpers import json_lines, ok

pytestmark = pytest.mark.s3


def test_gc_on_a_shared_prefix_leaves_others_alone(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    bucket = moto_endpoint.new_bucket()
    store = ("--store", f"s3://{bucket}/pulsar", "--endpoint-url", moto_endpoint.url)
    ok(tmp_path, *store, "namespaces", "create", "public/default")
    ok(
        tmp_path, *store,
        "topics", "produce", "t", "--synthetic", "20", "--size", "100",
        "--max-entries-per-ledger", "10", "--min-rollover-time", "0",
    )  # fmt: skip
    ok(tmp_path, *store, "topics", "offload-prefix", "t", "-s", "0", "--max-block-size", "5M")
    s3 = moto_endpoint.client()
    theirs = str(uuid.uuid4())  # a Pulsar broker's offload (its own metadata), a README, ...
    foreign = [
        f"pulsar/{theirs}-ledger-42",
        f"pulsar/{theirs}-ledger-42-index",
        "pulsar/README.txt",
        "pulsar/.tmp-upload-123",
        "pulsar/../x",
        "pulsar//x",
        "pulsar/bad\trow\x1b[31mred",
    ]
    for key in foreign:
        s3.put_object(
            Bucket=bucket, Key=key, Body=b"not ours",
            Metadata={"s3managedledgeroffloadersoftwareversion": "3.0.0"},
        )  # fmt: skip
    upload = s3.create_multipart_upload(Bucket=bucket, Key=f"pulsar/{theirs}-ledger-43")
    before = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])

    (report,) = json_lines(ok(tmp_path, *store, "--json", "objects", "gc", "--min-age", "0"))
    reasons = {o["key"]: o["reason"] for o in report["objects"]}
    assert reasons[f"{theirs}-ledger-42"] == "unclaimed-uuid"
    assert reasons["README.txt"] == "not-an-offload-key"
    assert reasons["../x"] == "odd-key"
    assert not any(o["deletable"] for o in report["objects"])
    assert [(u["reason"], u["deletable"]) for u in report["uploads"]] == [("foreign-upload", False)]
    after = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert after == before  # nothing deleted
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["UploadId"] for u in uploads] == [upload["UploadId"]]  # not aborted

    # the service's sweep does the same, and its pass does not fail on the odd keys
    (tick,) = json_lines(ok(tmp_path, *store, "--json", "service", "run", "--once"))
    assert tick["orphans_removed"] == 0 and tick["errors"] == []
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) == before

    # the text tables: one row per object, no raw control characters
    text = ok(tmp_path, *store, "objects", "orphans", "--min-age", "0").stdout
    assert "bad\\trow\\x1b[31mred" in text
    assert all(ch.isprintable() for line in text.splitlines() for ch in line)
    ok(tmp_path, *store, "objects", "verify", "--verify-checksums")  # ours intact
