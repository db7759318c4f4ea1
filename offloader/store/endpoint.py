"""The S3 endpoint URL: checked before any client is built (no boto3 here).

An endpoint is ``http(s)://host[:port][/path]``. Credentials in it (``user:pass@``) and query
strings (a presigned URL's ``X-Amz-Signature=...``) are refused, since they would be echoed by
every error message and log line that names the endpoint; a port outside 1..65535 is refused
here rather than by botocore's bare ``EndpointResolutionError``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from offloader.errors import ConfigError
from offloader.logs import redact

__all__ = ["check_endpoint_url"]

_USAGE = "use http(s)://host[:port], e.g. http://127.0.0.1:9000"


def _bad(endpoint: str, why: str) -> ConfigError:
    return ConfigError(
        f"invalid S3 endpoint URL {redact(endpoint)!r}: {why}{_USAGE}", setting="endpoint_url"
    )


def check_endpoint_url(endpoint: str) -> None:
    """Raise :class:`ConfigError` (``setting="endpoint_url"``) unless ``endpoint`` is usable."""
    try:
        parts = urlsplit(endpoint)
    except ValueError:
        raise _bad(endpoint, "") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise _bad(endpoint, "")
    if "@" in parts.netloc:
        raise _bad(
            endpoint,
            "it contains credentials; use the AWS credential chain (environment, profile, "
            "role) instead; ",
        )
    if parts.query or parts.fragment:
        raise _bad(endpoint, "it must not have a query string or fragment; ")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise _bad(endpoint, f"the port {parts.netloc.rpartition(':')[2]!r} is not in 1..65535; ")
