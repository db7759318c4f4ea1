"""kill -9 of the S3 server (radosgw) in the middle of an offload's multipart upload, then
recovery (issue 21, "Also": the review's kills of radosgw stay a regression test).

The offload fails with its one ``error:`` line (no traceback, no hang); radosgw is started again
on the same cluster (the OSD kept every object); a second offload completes, gc removes what
the dead attempt left (its multipart upload), and the topic reads back byte for byte with every
CRC32C checked. Runs on a cluster of its own, so the session's RGW is never killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from devservers import ceph_rgw
from tests.cli.helpers import json_lines, ok, run

pytestmark = [pytest.mark.rgw, pytest.mark.s3, pytest.mark.slow]

ROOT = Path(__file__).parents[2]
ENTRIES = 240  # of 64 KiB: one 15 MiB ledger, three 5 MiB parts


def _ok(home: Path, *args: str) -> str:
    return str(ok(home, *args).stdout)


def _digests(stdout: str) -> list[tuple[int, int, str]]:
    rows = [json.loads(line) for line in stdout.splitlines()]
    return [(r["ledger_id"], r["entry_id"], r["sha256"]) for r in rows]


def _wait_for_upload(client: Any, bucket: str, proc: subprocess.Popen[str]) -> None:
    """Until the offload's multipart upload exists on the server (the offload still running)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if client.list_multipart_uploads(Bucket=bucket).get("Uploads"):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("the offload never started its multipart upload")


def _restart_rgw(cluster: ceph_rgw.RgwCluster, url: str) -> None:
    cluster.spawn("rgw", "radosgw", "-n", "client.rgw.a")
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/", timeout=2) as response:
                if b"ListAllMyBucketsResult" in response.read(4096):
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "radosgw did not come back"
        time.sleep(0.1)


def test_kill9_of_radosgw_mid_upload_then_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ceph_rgw.start_cluster(tmp_path / "rgw") as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        for name, value in endpoint.env().items():
            monkeypatch.setenv(name, value)
        client = endpoint.client()
        bucket = endpoint.new_bucket()
        home = tmp_path / "home"
        store = ("--store", f"s3://{bucket}/crash")
        _ok(home, *store, "namespaces", "create", "public/default")
        _ok(
            home, *store,
            "topics", "produce", "t", "--synthetic", str(ENTRIES), "--size", "64K",
            "--max-entries-per-ledger", str(ENTRIES), "--min-rollover-time", "0",
        )  # fmt: skip
        produced = _digests(_ok(home, *store, "--json", "topics", "read", "t"))
        assert len(produced) == ENTRIES

        # the offload, with radosgw killed once its multipart upload exists
        env = {**os.environ, **endpoint.env(), "AWS_CONFIG_FILE": os.devnull}
        offload = (*store, "topics", "offload-prefix", "t", "-s", "0", "--max-block-size", "5M")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "--home", str(home), *offload],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            _wait_for_upload(client, bucket, proc)
            rgw = cluster.daemons["rgw"]
            os.kill(rgw.pid, signal.SIGKILL)
            assert rgw.wait(timeout=30) == -signal.SIGKILL
            _out, err = proc.communicate(timeout=180)  # fails, never hangs
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert "offload of ledger 0 failed" in lines[0], lines[0]

        _restart_rgw(cluster, endpoint.url)
        status = run(home, *store, "--json", "topics", "offload-status", "t")
        assert status.exit_code == 1 and json.loads(status.stdout)["status"] == "ERROR"
        _ok(home, *offload)  # the retry completes
        (gc,) = json_lines(ok(home, *store, "--json", "objects", "gc", "--min-age", "0"))
        assert all(u["deletable"] for u in gc["uploads"]), gc  # only the dead attempt's
        assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        (orphans,) = json_lines(ok(home, *store, "--json", "objects", "orphans", "--min-age", "0"))
        assert orphans["objects"] == [] and orphans["uploads"] == [], orphans
        listed = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
        # the offload's data and index, plus its completion marker and the topic's watermark
        # (spec/bucket-manifests.md): nothing of the dead attempt
        keys = [k for k in listed if "/_offloader/" not in k]
        assert len(keys) == 2 and keys[1] == keys[0] + "-index", listed  # one offload, whole
        manifests = [k for k in listed if "/_offloader/" in k]
        assert (
            len(manifests) == 2 and keys[0].rsplit("/", 1)[1].split("-ledger-")[0] in (manifests[0])
        ), listed
        _ok(home, *store, "objects", "verify", "--verify-checksums")
        _ok(home, *store, "namespaces", "set-offload-deletion-lag", "public/default",
            "-l", "0")  # fmt: skip
        _ok(home, *store, "service", "run", "--once")  # the local copy goes
        rows = _ok(home, *store, "--json", "topics", "read", "t")
        assert {json.loads(line)["tier"] for line in rows.splitlines()} == {"offloaded"}
        assert _digests(rows) == produced  # every span's CRC32C checked on the way
