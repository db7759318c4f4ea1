"""Fixtures and helpers for the writer and ReadHandle tests.

``store_kind`` runs a test on a :class:`LocalObjectStore` (fast), on moto's server, on Ceph
RGW (deselected with one summary line when Ceph is not installed, see tests/conftest.py), on
fake-gcs-server and on Azurite.
RGW enforces S3's 5 MiB minimum for non-final parts, so :func:`settings_for` raises the block
size to 5 MiB there; moto's test server accepts parts down to 1 KiB and local stores any size.
The golden cases are read from ``tests/golden`` (data, index, manifest) and their payloads are
recovered from the golden data objects with ``formats``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid as uuid_mod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.block import iter_block_entries
from formats.index import OffloadIndex, decode_index
from formats.keys import FORMAT_VERSION_KEY, ROLE_KEY
from formats.ledger_metadata import LedgerMetadata
from formats.wire import S3_MIN_PART_SIZE
from offloader.config import OffloadSettings
from offloader.store.base import ObjectStore
from offloader.store.local import LocalObjectStore

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STORE_KINDS = [
    "local",
    pytest.param("moto", marks=pytest.mark.s3),
    pytest.param("rgw", marks=[pytest.mark.s3, pytest.mark.rgw]),
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("azure", marks=pytest.mark.azure),
]


@dataclass(frozen=True)
class GoldenCase:
    """One golden case written by Pulsar: its objects, entries and expectations."""

    name: str
    ledger_id: int
    max_block_size: int
    data: bytes
    index: bytes
    entry_sha256: tuple[str, ...]
    expected: str  # "ok" or "error"

    @functools.cached_property
    def decoded_index(self) -> OffloadIndex:
        return decode_index(self.index)

    @property
    def metadata(self) -> LedgerMetadata:
        return self.decoded_index.ledger_metadata

    @functools.cached_property
    def payloads(self) -> list[bytes]:
        """The entries, recovered from the golden data object (checked against the
        manifest's hashes)."""
        idx = self.decoded_index
        out: list[bytes] = []
        for block in range(idx.block_count):
            start, end = idx.block_span(block)
            out.extend(
                bytes(e.payload)
                for e in iter_block_entries(self.data[start:end], base_offset=start)
            )
        assert [sha256(p) for p in out] == list(self.entry_sha256)
        return out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    result: dict[str, Any] = json.loads((GOLDEN / "manifest.json").read_text())
    return result


@functools.cache
def golden_case(name: str) -> GoldenCase:
    case = next(c for c in manifest()["cases"] if c["name"] == name)
    return GoldenCase(
        name=name,
        ledger_id=case["ledger_id"],
        max_block_size=case["max_block_size"],
        data=(GOLDEN / case["files"]["data"]).read_bytes(),
        index=(GOLDEN / case["files"]["index"]).read_bytes(),
        entry_sha256=tuple(e["sha256"] for e in case["entries"]),
        expected=case["expected_reader_result"],
    )


def golden_names(expected: str | None = None) -> list[str]:
    """Cases that have objects on disk (optionally only those with this reader result)."""
    return [
        c["name"]
        for c in manifest()["cases"]
        if "files" in c and (expected is None or c["expected_reader_result"] == expected)
    ]


def new_uuid() -> str:
    return str(uuid_mod.uuid4())


def pulsar_metadata(role: str) -> dict[str, str]:
    """User metadata as Pulsar's offloader sets it."""
    return {
        FORMAT_VERSION_KEY: "1",
        ROLE_KEY: role,
        "ManagedLedgerName": "public/default/persistent/golden",
    }


def settings_for(kind: str, block_size: int, **changes: Any) -> OffloadSettings:
    """Settings with ``block_size`` blocks, raised to 5 MiB on RGW."""
    if kind == "rgw":
        return OffloadSettings(max_block_size=max(block_size, S3_MIN_PART_SIZE), **changes)
    return OffloadSettings(enforce_min_block_size=False, max_block_size=block_size, **changes)


def s3_store(endpoint: S3Endpoint, settings: OffloadSettings | None = None) -> ObjectStore:
    from offloader.store.s3 import S3ObjectStore

    return S3ObjectStore(
        endpoint.new_bucket(),
        endpoint_url=endpoint.url,
        region=endpoint.region,
        settings=settings or OffloadSettings(max_attempts=2, read_timeout=30.0),
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
    )


def cloud_store(kind: str, request: pytest.FixtureRequest) -> ObjectStore:
    """A store on a fresh bucket (GCS, fake-gcs-server) or container (Azure, Azurite)."""
    settings = OffloadSettings(max_attempts=2, read_timeout=30.0)
    if kind == "gcs":
        from offloader.store.gcs import GCSObjectStore

        gcs = request.getfixturevalue("gcs_emulator")
        return GCSObjectStore(gcs.new_bucket(), endpoint=gcs.url, settings=settings)
    from offloader.store.azure import AzureObjectStore

    azurite = request.getfixturevalue("azurite")
    return AzureObjectStore(
        azurite.new_container(), connection_string=azurite.connection_string, settings=settings
    )


def leftovers(store: ObjectStore) -> tuple[list[str], list[str]]:
    """(object keys, keys of incomplete multipart uploads) in the store."""
    return ([o.key for o in store.list()], [u.key for u in store.list_multipart_uploads()])


def assert_empty(store: ObjectStore) -> None:
    objects, uploads = leftovers(store)
    assert objects == [] and uploads == [], f"left behind: objects={objects} uploads={uploads}"


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture()
def store(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    """An empty store of ``store_kind`` (a fresh bucket on the S3 servers)."""
    if store_kind == "local":
        result: ObjectStore = LocalObjectStore(tmp_path / "objects")
    elif store_kind in ("gcs", "azure"):
        result = cloud_store(store_kind, request)
    else:
        endpoint: S3Endpoint = request.getfixturevalue(f"{store_kind}_endpoint")
        result = s3_store(endpoint)
    try:
        yield result
    finally:
        result.close()
