"""Issue 39's bad input through every command that reaches a ``gs://`` or ``az://`` store or
target (test_cloud_stores_cli.py covers ``objects orphans``): a bucket or container that does
not exist and an unreachable endpoint, for the offload, the rebuild, the Kafka upload and the
export (whose GCS client retried for 15 minutes before), and Google credentials that are wrong
(a file that is no key; a key whose token endpoint cannot be reached). Each is one ``error:``
line naming the URL, no traceback, in bounded time."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from devservers.cloud import AZURITE_ACCOUNT
from tests.cli.test_cloud_stores_cli import CLOUDS, NS, TOPIC, Cloud
from tests.cli.test_console_script import offloader, offloader_command
from tests.kafka.logdir import write_partition

SMALL = ("--max-entries-per-ledger", "100", "--min-rollover-time", "0")


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> Cloud:
    return Cloud(request.param, request)


def _home(where: Cloud, tmp_path: Path) -> dict[str, str]:
    """A home with a topic of 3 closed ledgers (on a file store), and the cloud's environment."""
    env = {**os.environ, **where.env, "OFFLOADER_HOME": str(tmp_path / "home")}
    local = {**env, "OFFLOADER_STORE": f"file://{tmp_path / 'objects'}"}
    offloader(local, "namespaces", "create", NS)
    offloader(local, "topics", "produce", TOPIC, "--synthetic", "300", "--size", "1K", *SMALL)
    return env


def _unreachable(where: Cloud, env: dict[str, str]) -> dict[str, str]:
    if where.name == "gcs":
        return {**env, "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"}
    conn = env["AZURE_STORAGE_CONNECTION_STRING"]
    endpoint = conn.split("BlobEndpoint=")[1].split(";")[0]
    return {
        **env,
        "AZURE_STORAGE_CONNECTION_STRING": conn.replace(
            endpoint, f"http://127.0.0.1:9/{AZURITE_ACCOUNT}"
        ),
    }


def _one_line(env: dict[str, str], *args: str, within: float = 90) -> str:
    start = time.monotonic()
    proc = subprocess.run(
        [*offloader_command(), *args], env=env, capture_output=True, text=True, timeout=300
    )
    took = time.monotonic() - start
    assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert took < within, f"{args}: {took:.0f}s"
    return lines[0]


def test_a_missing_bucket_for_the_offload_rebuild_kafka_and_export(
    cloud: Cloud,
    tmp_path: Path,
) -> None:
    env = _home(cloud, tmp_path)
    missing = f"{cloud.scheme}://no-such-bucket-4711"
    gone = {**env, "OFFLOADER_STORE": f"{missing}/p"}
    line = _one_line(gone, "topics", "offload-prefix", TOPIC, "--size-threshold", "0")
    assert f"{missing}/p/" in line and "does not exist" in line
    line = _one_line(
        {**gone, "OFFLOADER_HOME": str(tmp_path / "new")}, "metadata", "rebuild", "--dry-run"
    )
    assert f"{missing}/p" in line and "does not exist" in line
    logs = tmp_path / "logs"
    write_partition(logs, "orders", 0, records=60, segment_bytes=2048)
    out = offloader(
        gone, "--json", "kafka", "upload", "--log-dir", str(logs), "--once", code=1
    )  # each partition's failure is reported, then one line
    failed = [r for r in map(json.loads, out.stdout.splitlines()) if r.get("outcome") == "failed"]
    assert failed and all(f"{missing}/p/" in f["detail"] for f in failed)
    assert "does not exist" in failed[0]["detail"]
    assert out.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in out.stderr
    line = _one_line(env, "export", "run", TOPIC, "--to", f"{missing}/lake", "--engine", "local")
    assert f"{missing}/lake" in line and "does not exist" in line


def test_an_unreachable_endpoint_for_the_offload_and_export(
    cloud: Cloud,
    tmp_path: Path,
) -> None:
    env = _unreachable(cloud, _home(cloud, tmp_path))
    line = _one_line(
        {**env, "OFFLOADER_STORE": cloud.url},
        "topics",
        "offload-prefix",
        TOPIC,
        "--size-threshold",
        "0",
    )
    assert cloud.url in line and "unreachable" in line
    line = _one_line(env, "export", "run", TOPIC, "--to", f"{cloud.url}/lake", "--engine", "local")
    assert f"export target {cloud.url}/lake" in line and "unreachable" in line
    assert "error_info" not in line and "google::cloud" not in line


@pytest.mark.gcs
def test_wrong_google_credentials(tmp_path: Path, gcs_emulator: object) -> None:
    """fake-gcs-server takes any credentials, so "wrong" is what a client can tell alone: a
    credentials file that is no key, and a key whose token endpoint cannot be reached."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STORAGE_EMULATOR_HOST", "GOOGLE_"))
    }
    env.update(OFFLOADER_HOME=str(tmp_path / "home"), NO_GCE_CHECK="True")
    offloader({**env, "OFFLOADER_STORE": f"file://{tmp_path / 'o'}"}, "namespaces", "create", NS)
    url = "gs://some-bucket-4711/p"
    env["OFFLOADER_STORE"] = url
    bad = tmp_path / "not-a-key.json"
    bad.write_text("{not json")
    line = _one_line({**env, "GOOGLE_APPLICATION_CREDENTIALS": str(bad)}, "objects", "orphans")
    assert url in line and "no usable Google credentials" in line
    assert f"GOOGLE_APPLICATION_CREDENTIALS ({bad}) is not a usable key file" in line
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    account = tmp_path / "account.json"
    account.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "offloader@p.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "http://127.0.0.1:9/token",
            }
        )
    )
    line = _one_line({**env, "GOOGLE_APPLICATION_CREDENTIALS": str(account)}, "objects", "orphans")
    assert url in line and "BEGIN PRIVATE KEY" not in line
    assert "no Google access token" in line and "unreachable" in line
