"""Object stores: the :class:`ObjectStore` Protocol, its backends, and :func:`open_store`.

``open_store(url)`` picks the backend from the URL: ``s3://bucket[/prefix]`` is
:class:`~offloader.store.s3.S3ObjectStore` (imported lazily, so that boto3 is loaded only when
S3 is used), ``gs://bucket[/prefix]`` :class:`~offloader.store.gcs.GCSObjectStore`,
``az://container[/prefix]`` (or ``abfs://``) :class:`~offloader.store.azure.AzureObjectStore`
(each SDK loaded only when used), and ``file:///abs/path`` or a plain path is
:class:`~offloader.store.local.LocalObjectStore`.
"""

from __future__ import annotations

from offloader.config import OffloadSettings
from offloader.location import StoreLocation, parse_store_url
from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    ObjectStore,
    UploadedPart,
)
from offloader.store.local import LocalObjectStore
from offloader.store.metered import MeteredObjectStore

__all__ = [
    "Buffer",
    "GetResult",
    "LocalObjectStore",
    "MeteredObjectStore",
    "MultipartUploadInfo",
    "ObjectInfo",
    "ObjectStore",
    "UploadedPart",
    "open_store",
]


def open_store(
    url: str | StoreLocation,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    settings: OffloadSettings | None = None,
    create: bool = True,
) -> ObjectStore:
    """The store at ``url`` (a :class:`~offloader.location.StoreLocation` or a URL that
    :func:`~offloader.location.parse_store_url` takes): ``s3://bucket[/prefix]``,
    ``file:///abs/path`` or a plain path.

    A local store's missing directory is created, unless ``create`` is False (read-only uses,
    where a mistyped path must not become a new, empty store): then ``ObjectNotFound``.

    GCS takes ``STORAGE_EMULATOR_HOST`` (or ``endpoint_url``) and Application Default
    Credentials; Azure takes ``AZURE_STORAGE_CONNECTION_STRING`` or ``AZURE_STORAGE_ACCOUNT`` and
    ``AZURE_STORAGE_KEY``.

    ``endpoint_url`` and ``region`` apply to S3 only (the endpoint by
    :func:`~offloader.location.s3_endpoint`'s rule, and the rest of the standard AWS
    configuration); credentials in the URL are refused.
    """
    location = url if isinstance(url, StoreLocation) else parse_store_url(url)
    if location.is_gcs:
        from offloader.store.gcs import GCSObjectStore  # the GCS SDK only for gs://

        return GCSObjectStore(
            location.bucket, location.prefix, endpoint=endpoint_url, settings=settings
        )
    if location.is_azure:
        from offloader.store.azure import AzureObjectStore  # the Azure SDK only for az://

        return AzureObjectStore(
            location.bucket, location.prefix, settings=settings, account=location.account
        )
    if location.is_s3:
        from offloader.store.s3 import S3ObjectStore  # boto3 is loaded only for S3

        return S3ObjectStore(
            location.bucket,
            location.prefix,
            endpoint_url=endpoint_url,
            region=region,
            settings=settings,
        )
    assert location.path is not None
    return LocalObjectStore(location.path, create=create)
