"""Fixtures of the object-store contract suites: ``backend`` (local, moto, RGW, fake-gcs-server
and Azurite) and
``store``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.cloud import AzuriteEmulator, GcsEmulator
from devservers.endpoint import S3Endpoint
from offloader.store.base import ObjectStore
from offloader.store.local import LocalObjectStore
from tests.contract.backends import (
    Backend,
    KiB,
    MiB,
    make_azure_store,
    make_gcs_store,
    make_s3_store,
)


@pytest.fixture(
    params=[
        "local",
        pytest.param("moto", marks=pytest.mark.s3),
        pytest.param("rgw", marks=[pytest.mark.s3, pytest.mark.rgw]),
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local":
        store: ObjectStore = LocalObjectStore(tmp_path / "objects")
        yield Backend("local", store, part_size=4 * KiB)
        store.close()
        return
    if request.param == "gcs":
        gcs: GcsEmulator = request.getfixturevalue("gcs_emulator")
        store = make_gcs_store(gcs, gcs.new_bucket())
        yield Backend("gcs", store, part_size=4 * KiB)
        store.close()
        return
    if request.param == "azure":
        azurite: AzuriteEmulator = request.getfixturevalue("azurite")
        store = make_azure_store(azurite, azurite.new_container())
        yield Backend("azure", store, part_size=4 * KiB)
        store.close()
        return
    endpoint: S3Endpoint = request.getfixturevalue(f"{request.param}_endpoint")
    bucket = endpoint.new_bucket()
    store = make_s3_store(endpoint, bucket)
    # RGW enforces S3's 5 MiB minimum for non-final parts; moto's is lowered to 1 KiB
    part_size = 5 * MiB if request.param == "rgw" else 4 * KiB
    yield Backend(request.param, store, part_size, endpoint, bucket)
    store.close()


@pytest.fixture()
def store(backend: Backend) -> ObjectStore:
    return backend.store
