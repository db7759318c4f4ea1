"""Where a store is: the one parse of a store URL, and the one rule for the S3 endpoint.

A store URL is ``s3://bucket[/prefix]``, ``gs://bucket[/prefix]`` (Google Cloud Storage),
``az://container[/prefix]`` (Azure Blob Storage; Azure's own
``abfs[s]://container@account.dfs.core.windows.net[/prefix]`` is accepted too and means the same
container), ``file:///absolute/path`` or a plain path (a local directory).
:func:`parse_store_url` turns it into a :class:`StoreLocation` (scheme, bucket, prefix or path)
once, refusing what no backend takes (credentials in the URL, a query, a file
URL with a host, an unknown scheme) with a :class:`ConfigError` whose ``setting`` is
``store_url``; every place that needs to know whether a store is S3 asks the value, never the
string.

The S3 endpoint is, in this order: the one given (``--endpoint-url``, ``endpoint_url`` in
``offloader.toml``), ``$AWS_ENDPOINT_URL_S3``, ``$AWS_ENDPOINT_URL`` (the AWS SDKs' own order),
else AWS itself: :func:`s3_endpoint`. Nothing here changes the process environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast
from urllib.parse import unquote, urlsplit

from offloader.errors import ConfigError
from offloader.logs import redact

#: the environment variables of an S3 endpoint, in the order the AWS SDKs read them
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")

_SCHEMES = (
    "use s3://bucket[/prefix], gs://bucket[/prefix], az://container[/prefix] "
    "or file:///absolute/path"
)
#: the schemes of remote object stores, and the scheme each one is known by
_REMOTE = {"s3": "s3", "gs": "gs", "az": "az", "abfs": "az", "abfss": "az"}
#: how each cloud's own tools take credentials (for the "credentials in the URL" refusal)
_CREDENTIALS = {
    "s3": "the AWS credential chain (environment, profile, role)",
    "gs": "STORAGE_EMULATOR_HOST or Application Default Credentials",
    "az": "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY",
}


def s3_endpoint(given: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint: ``given``, else the first of :data:`ENDPOINT_VARIABLES` that is set
    (and not empty), else None (AWS's own endpoints)."""
    if given:
        return given
    env = os.environ if environ is None else environ
    for name in ENDPOINT_VARIABLES:
        if env.get(name):
            return env[name]
    return None


def endpoint_variable(environ: Mapping[str, str] | None = None) -> str | None:
    """The name of the environment variable :func:`s3_endpoint` takes the endpoint from."""
    env = os.environ if environ is None else environ
    return next((name for name in ENDPOINT_VARIABLES if env.get(name)), None)


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store URL: S3, GCS or Azure (``bucket``, ``prefix``; an Azure container is
    its ``bucket``) or a local directory (``path``)."""

    scheme: Literal["s3", "gs", "az", "file"]
    #: the URL as given (stripped), for messages and the driver metadata
    url: str
    bucket: str = ""
    #: the key prefix inside the bucket, without leading or trailing slashes
    prefix: str = ""
    #: the local directory (absolute) of a file store
    path: Path | None = None

    #: the Azure storage account named by an ``abfs://container@account...`` URL
    account: str = ""

    @property
    def is_s3(self) -> bool:
        return self.scheme == "s3"

    @property
    def is_gcs(self) -> bool:
        return self.scheme == "gs"

    @property
    def is_azure(self) -> bool:
        return self.scheme == "az"

    @property
    def is_remote(self) -> bool:
        """An object store reached over the network (S3, GCS or Azure), not a directory."""
        return self.scheme != "file"


def _bad_url(message: str) -> ConfigError:
    return ConfigError(message, setting="store_url")


def _no_query(query: str, fragment: str, url: str) -> None:
    if query or fragment:
        raise _bad_url(f"store URL {redact(url)!r} must not have a query or fragment")


def parse_store_url(url: str) -> StoreLocation:
    """The :class:`StoreLocation` of ``url`` (see the module docstring)."""
    if not isinstance(url, str) or not url.strip():
        raise _bad_url("store URL is empty")
    url = url.strip()
    if "://" not in url:
        if ":" in url.split("/", 1)[0]:
            raise _bad_url(f"unsupported store URL {redact(url)!r}: {_SCHEMES}")
        return StoreLocation("file", url, path=Path(url).expanduser().resolve())
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in (*_REMOTE, "file"):
        raise _bad_url(f"unsupported store URL scheme {scheme!r} in {redact(url)!r}: {_SCHEMES}")
    if scheme in _REMOTE:
        return _remote_location(url, scheme, parts.netloc, parts.path, parts.query, parts.fragment)
    if parts.netloc not in ("", "localhost"):
        raise _bad_url(
            f"file store URL {redact(url)!r} must be file:///absolute/path "
            f"(host {parts.netloc!r} is not supported)"
        )
    _no_query(parts.query, parts.fragment, url)
    path = unquote(parts.path)
    if not path or not os.path.isabs(path):
        raise _bad_url(f"file store URL {redact(url)!r} needs an absolute path")
    return StoreLocation("file", url, path=Path(path))


def _remote_location(
    url: str, scheme: str, netloc: str, path: str, query: str, fragment: str
) -> StoreLocation:
    kind = _REMOTE[scheme]
    account = ""
    if kind == "az" and scheme != "az" and "@" in netloc:
        # abfs[s]://container@account.dfs.core.windows.net/path: no credentials, a host
        netloc, _, host = netloc.partition("@")
        account = host.split(".", 1)[0]
        if not netloc or not account or ":" in netloc:
            raise _bad_url(
                f"store URL {redact(url)!r}: use abfs://container@account.dfs.core.windows.net"
            )
    elif "@" in netloc:
        raise _bad_url(
            f"store URL {redact(url)!r} contains credentials; use {_CREDENTIALS[kind]} instead"
        )
    _no_query(query, fragment, url)
    if not netloc:
        what = "container" if kind == "az" else "bucket"
        raise _bad_url(f"store URL {redact(url)!r} has no {what}: use {kind}://{what}[/prefix]")
    return StoreLocation(
        cast(Literal["s3", "gs", "az"], kind),
        url,
        bucket=netloc,
        prefix=unquote(path).strip("/"),
        account=account,
    )


def is_remote_url(url: str | None) -> bool:
    """Whether ``url`` names a remote object store (S3, GCS, Azure); False for None, a path
    or a URL that does not parse."""
    if not url:
        return False
    try:
        return parse_store_url(url).is_remote
    except ConfigError:
        return False


def is_s3_url(url: str | None) -> bool:
    """Whether ``url`` names an S3 store (False for None, a path or a URL that does not parse:
    opening it says what is wrong)."""
    if not url:
        return False
    try:
        return parse_store_url(url).is_s3
    except ConfigError:
        return False
