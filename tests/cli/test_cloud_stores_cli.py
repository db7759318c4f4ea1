"""The installed ``offloader`` console script against Google Cloud Storage (fake-gcs-server) and
Azure Blob Storage (Azurite), configured the way each cloud's own tools are
(``STORAGE_EMULATOR_HOST``, ``AZURE_STORAGE_CONNECTION_STRING``): offload, read, the driver
metadata Pulsar reads, orphans (an abandoned upload included) and gc, then the bad inputs
(missing bucket or container, wrong credentials, an unreachable endpoint), each one line naming
the URL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from cli.topics.produce import synthetic_payloads
from devservers.cloud import AZURITE_ACCOUNT, AzuriteEmulator, GcsEmulator
from offloader.config import OffloadSettings
from offloader.metadata import METADATA_FILENAME
from offloader.store import open_store
from offloader.store.base import ObjectStore
from tests.cli.test_console_script import offloader, offloader_command, records

NS = "tenant/ns"
TOPIC = "persistent://tenant/ns/events"
PREFIX = "tiered"

CLOUDS = [
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("azure", marks=pytest.mark.azure),
]


class Cloud:
    """One emulator as the CLI sees it: its environment and a fresh bucket or container."""

    def __init__(self, name: str, request: pytest.FixtureRequest) -> None:
        self.name = name
        if name == "gcs":
            gcs: GcsEmulator = request.getfixturevalue("gcs_emulator")
            self.env = gcs.env()
            self.bucket = gcs.new_bucket()
            self.scheme, self.driver = "gs", "google-cloud-storage"
        else:
            azurite: AzuriteEmulator = request.getfixturevalue("azurite")
            self.env = azurite.env()
            self.bucket = azurite.new_container()
            self.scheme, self.driver = "az", "azureblob"
        self.url = f"{self.scheme}://{self.bucket}/{PREFIX}"

    def store(self, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)
        return open_store(self.url, settings=OffloadSettings(max_attempts=2))


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> Cloud:
    return Cloud(request.param, request)


def _env(cloud: Cloud, tmp_path: Path) -> dict[str, str]:
    import os

    return {
        **os.environ,
        **cloud.env,
        "OFFLOADER_HOME": str(tmp_path / "home"),
        "OFFLOADER_STORE": cloud.url,
    }


def test_operator_flow_on_each_cloud(
    cloud: Cloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(cloud, tmp_path)
    small = ("--max-entries-per-ledger", "100", "--min-rollover-time", "0")
    offloader(env, "namespaces", "create", NS)
    offloader(
        env, "--json", "topics", "produce", TOPIC, "--synthetic", "300", "--size", "1K", *small
    )
    offloader(env, "topics", "offload-prefix", TOPIC, "--size-threshold", "150K")
    assert offloader(env, "topics", "offload-status", TOPIC).stdout == "Offload was a success\n"

    info = records(offloader(env, "--json", "topics", "info", TOPIC))[0]
    offloaded = [ledger for ledger in info["ledgers"] if ledger["offloaded"]]
    assert len(offloaded) >= 1
    store = cloud.store(monkeypatch)
    keys = {i.key for i in store.list()}
    for ledger in offloaded:
        stem = f"{ledger['uuid']}-ledger-{ledger['ledger_id']}"
        assert {stem, f"{stem}-index"} <= keys
        # the user metadata Pulsar writes on every driver, readable back
        meta = store.head(stem).metadata
        assert meta["s3managedledgeroffloaderformatversion"] == "1", meta
    with sqlite3.connect(tmp_path / "home" / METADATA_FILENAME) as db:
        rows = db.execute("SELECT driver_name, driver_properties FROM offload_attempts").fetchall()
    drivers = {name for name, _ in rows if name}
    assert drivers == {cloud.driver}, rows
    assert all(json.loads(props)["bucket"] == cloud.bucket for name, props in rows if name)
    # the driver metadata keys Pulsar's tiered-storage configuration records
    assert all(
        json.loads(props)["managedLedgerOffloadDriver"] == cloud.driver
        and "serviceEndpoint" in json.loads(props)
        for name, props in rows
        if name
    )

    entries = records(offloader(env, "--json", "topics", "read", TOPIC))
    expected = [hashlib.sha256(p).hexdigest() for p in synthetic_payloads(300, 1024)]
    assert [e["sha256"] for e in entries] == expected
    assert "offloaded" in {e["tier"] for e in entries}
    verified = records(offloader(env, "--json", "objects", "verify", "--verify-checksums"))
    assert len(verified) == len(offloaded) and all(r["ok"] for r in verified)

    # an upload a crash abandoned, and an object no ledger claims: orphans lists both, gc drops them
    # (keys of this broker's offload history: gc removes only what is provably ours)
    uuid = offloaded[0]["uuid"]
    abandoned, stray = f"{uuid}-ledger-99", f"{uuid4()}-ledger-98"
    upload_id = store.create_multipart_upload(abandoned, {"role": "data"})
    store.upload_part(abandoned, upload_id, 1, b"half a block", 0)
    store.put(stray, b"nobody's", {})
    report = records(offloader(env, "--json", "objects", "orphans", "--min-age", "0"))[0]
    assert not report["clean"], report
    text = repr(report)
    assert abandoned in text and stray in text
    assert [u["deletable"] for u in report["uploads"]] == [True]
    kept = {o["key"] for o in report["objects"] if not o["deletable"]}
    offloader(env, "objects", "gc", "--min-age", "0")
    assert store.list_multipart_uploads() == []  # the marker and the staged parts are gone
    assert {i.key for i in store.list()} & {stray} == kept
    report = records(offloader(env, "--json", "objects", "orphans", "--min-age", "0"))[0]
    assert report["uploads"] == [] and {o["key"] for o in report["objects"]} == kept
    again = records(offloader(env, "--json", "topics", "read", TOPIC))
    assert [e["sha256"] for e in again] == expected
    store.close()


def _one_line_error(env: dict[str, str], *args: str) -> str:
    Path(env["OFFLOADER_HOME"]).mkdir(parents=True, exist_ok=True)
    good = {**env, "OFFLOADER_STORE": str(Path(env["OFFLOADER_HOME"]) / "objects")}
    offloader(good, "namespaces", "create", NS)  # a home, so that the store is what fails
    proc = subprocess.run(
        [*offloader_command(), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_missing_bucket_or_container_is_one_line(cloud: Cloud, tmp_path: Path) -> None:
    env = _env(cloud, tmp_path)
    env["OFFLOADER_STORE"] = f"{cloud.scheme}://no-such-bucket-4711/p"
    line = _one_line_error(env, "objects", "orphans")
    assert f"{cloud.scheme}://no-such-bucket-4711/p" in line
    assert "does not exist" in line


@pytest.mark.azure
def test_azure_wrong_key_is_one_line(azurite: AzuriteEmulator, tmp_path: Path) -> None:
    container = azurite.new_container()
    wrong = azurite.connection_string.replace("AccountKey=Eby8", "AccountKey=AAAA")
    env: dict[str, Any] = {
        **_env_plain(tmp_path),
        "AZURE_STORAGE_CONNECTION_STRING": wrong,
        "OFFLOADER_STORE": f"az://{container}/p",
    }
    line = _one_line_error(env, "objects", "orphans")
    assert f"az://{container}/p" in line and "access denied" in line
    assert "AAAA" not in line


def test_unreachable_endpoint_is_one_line(cloud: Cloud, tmp_path: Path) -> None:
    env = _env(cloud, tmp_path)
    if cloud.name == "gcs":
        env["STORAGE_EMULATOR_HOST"] = "http://127.0.0.1:9"
    else:
        env["AZURE_STORAGE_CONNECTION_STRING"] = env["AZURE_STORAGE_CONNECTION_STRING"].replace(
            env["AZURE_STORAGE_CONNECTION_STRING"].split("BlobEndpoint=")[1].rstrip(";"),
            f"http://127.0.0.1:9/{AZURITE_ACCOUNT}",
        )
    line = _one_line_error(env, "objects", "orphans")
    assert cloud.url in line and "unreachable" in line


def _env_plain(tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "OFFLOADER_HOME": str(tmp_path / "home")}


@pytest.mark.parametrize(
    ("url", "says"), [("gs://some-bucket/p", "Google"), ("az://some-box/p", "Azure")]
)
def test_no_credentials_is_one_line(tmp_path: Path, url: str, says: str) -> None:
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STORAGE_EMULATOR_HOST", "GOOGLE_", "AZURE_STORAGE_"))
    }
    env.update(OFFLOADER_HOME=str(tmp_path / "home"), OFFLOADER_STORE=url, NO_GCE_CHECK="True")
    line = _one_line_error(env, "objects", "orphans")
    assert url in line, line
    assert f"no usable {says} credentials" in line or f"no {says} credentials" in line, line
