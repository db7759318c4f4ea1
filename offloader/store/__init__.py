"""Object stores: the :class:`ObjectStore` Protocol, its backends, and :func:`open_store`.

``open_store(url)`` picks the backend from the URL: ``s3://bucket[/prefix]`` is
:class:`~offloader.store.s3.S3ObjectStore` (imported lazily, so that boto3 is loaded only when
S3 is used), and ``file:///abs/path`` or a plain path is
:class:`~offloader.store.local.LocalObjectStore`.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.logs import redact
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


def _bad_url(message: str) -> ConfigError:
    return ConfigError(message, setting="store_url")


def open_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    settings: OffloadSettings | None = None,
    create: bool = True,
) -> ObjectStore:
    """The store for ``url``: ``s3://bucket[/prefix]``, ``file:///abs/path`` or a plain path.

    A local store's missing directory is created, unless ``create`` is False (read-only uses,
    where a mistyped path must not become a new, empty store): then ``ObjectNotFound``.

    ``endpoint_url`` and ``region`` apply to S3 only (S3 also honours ``AWS_ENDPOINT_URL`` and
    the rest of the standard AWS configuration); credentials in the URL are refused.
    """
    if not isinstance(url, str) or not url.strip():
        raise _bad_url("store URL is empty")
    url = url.strip()
    if "://" not in url:
        if ":" in url.split("/", 1)[0]:
            raise _bad_url(
                f"unsupported store URL {redact(url)!r}: "
                "use s3://bucket[/prefix] or file:///absolute/path"
            )
        return LocalObjectStore(Path(url).expanduser().resolve(), create=create)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "s3":
        if "@" in parts.netloc:
            raise _bad_url(
                f"store URL {redact(url)!r} contains credentials; use the AWS "
                "credential chain (environment, profile, role) instead"
            )
        if parts.query or parts.fragment:
            raise _bad_url(f"store URL {redact(url)!r} must not have a query or fragment")
        bucket = parts.netloc
        if not bucket:
            raise _bad_url(f"store URL {redact(url)!r} has no bucket: use s3://bucket[/prefix]")
        from offloader.store.s3 import S3ObjectStore  # boto3 is loaded only for S3

        return S3ObjectStore(
            bucket,
            unquote(parts.path).strip("/"),
            endpoint_url=endpoint_url,
            region=region,
            settings=settings,
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise _bad_url(
                f"file store URL {redact(url)!r} must be file:///absolute/path "
                f"(host {parts.netloc!r} is not supported)"
            )
        if parts.query or parts.fragment:
            raise _bad_url(f"store URL {redact(url)!r} must not have a query or fragment")
        path = unquote(parts.path)
        if not path or not os.path.isabs(path):
            raise _bad_url(f"file store URL {redact(url)!r} needs an absolute path")
        return LocalObjectStore(Path(path), create=create)
    raise _bad_url(
        f"unsupported store URL scheme {scheme!r} in {redact(url)!r}: "
        "use s3://bucket[/prefix] or file:///absolute/path"
    )
