"""What the object-store contract suites share: the backends under test and small helpers."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import crc32c

from devservers.cloud import AzuriteEmulator, GcsEmulator
from devservers.endpoint import S3Endpoint
from offloader.config import OffloadSettings
from offloader.store.azure import AzureObjectStore
from offloader.store.base import ObjectStore, UploadedPart
from offloader.store.gcs import GCSObjectStore
from offloader.store.s3 import S3ObjectStore

KiB = 1024
MiB = 1024 * KiB

#: short timeouts and one retry: errors must surface fast in tests (moto answers some with 500)
TEST_SETTINGS = OffloadSettings(connect_timeout=2.0, read_timeout=20.0, max_attempts=2)
#: small ListObjectsV2 / ListMultipartUploads pages, so every listing test paginates on S3
PAGE_SIZE = 3
PREFIX = "pfx/run"


@dataclass
class Backend:
    name: str  # "local", "moto", "rgw", "gcs" or "azure"
    store: ObjectStore
    part_size: int  # smallest non-final part the backend accepts (kept small for speed)
    endpoint: S3Endpoint | None = None
    bucket: str | None = None


def make_s3_store(
    endpoint: S3Endpoint, bucket: str, prefix: str = PREFIX, **kwargs: Any
) -> S3ObjectStore:
    kwargs.setdefault("settings", TEST_SETTINGS)
    kwargs.setdefault("page_size", PAGE_SIZE)
    return S3ObjectStore(
        bucket,
        prefix,
        endpoint_url=endpoint.url,
        region=endpoint.region,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        **kwargs,
    )


def make_gcs_store(
    emulator: GcsEmulator, bucket: str, prefix: str = PREFIX, **kwargs: Any
) -> GCSObjectStore:
    kwargs.setdefault("settings", TEST_SETTINGS)
    kwargs.setdefault("page_size", PAGE_SIZE)
    return GCSObjectStore(bucket, prefix, endpoint=emulator.url, **kwargs)


def make_azure_store(
    emulator: AzuriteEmulator, container: str, prefix: str = PREFIX, **kwargs: Any
) -> AzureObjectStore:
    kwargs.setdefault("settings", TEST_SETTINGS)
    kwargs.setdefault("page_size", PAGE_SIZE)
    return AzureObjectStore(
        container, prefix, connection_string=emulator.connection_string, **kwargs
    )


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def upload_parts(
    store: ObjectStore, key: str, upload_id: str, chunks: list[bytes]
) -> list[UploadedPart]:
    return [
        store.upload_part(key, upload_id, i, c, crc32c.crc32c(c))
        for i, c in enumerate(chunks, start=1)
    ]
