"""Building the S3 client: the endpoint (explicit, ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``; path-style addressing when one is set), timeouts and bounded retries from
:class:`~offloader.config.OffloadSettings`, checksums only when required (we send our own
CRC32Cs), and the standard AWS credential chain unless keys are given. Every client of the
process shares one botocore data loader (the parsed service model and endpoint rules), so a new
client costs ~15 ms of CPU instead of ~130 ms; nothing else (credentials, configuration) is shared.

Owned by :mod:`offloader.store.s3`; with :mod:`offloader.store.s3_errors`, the only modules
besides it that import boto3/botocore.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.location import s3_endpoint
from offloader.logs import get_logger, redact
from offloader.store.endpoint import check_endpoint_url

__all__ = ["bad_endpoint", "make_client", "resolve_endpoint", "retry_logger", "warm_loader"]

log = get_logger("offloader.store.s3")

Credentials = tuple[str | None, str | None, str | None]

_loader: botocore.loaders.Loader | None = None
_loader_lock = threading.Lock()


def _session(credentials: Credentials, region: str | None) -> boto3.session.Session:
    """A new boto3 session (its own credentials and region) on the process's one botocore
    data loader, which caches every JSON file it has parsed."""
    global _loader
    core = botocore.session.get_session()
    with _loader_lock:
        if _loader is None:
            _loader = botocore.loaders.create_loader()
        core.register_component("data_loader", _loader)
        session = boto3.session.Session(
            aws_access_key_id=credentials[0],
            aws_secret_access_key=credentials[1],
            aws_session_token=credentials[2],
            region_name=region,
            botocore_session=core,
        )
        paths = _loader.search_paths  # boto3 appends its data directory for every session
        while len(paths) > 1 and paths[-1] in paths[:-1]:
            paths.pop()
    return session


def warm_loader() -> None:
    """Parse the S3 service model and endpoint rules into the process's shared data loader
    now, by building (and dropping) one client with placeholder keys: no credential lookup, no
    connection, no thread. A process that forks workers (Spark's worker daemon,
    :mod:`offloader.spark.daemon`) does it once for all of them."""
    client = make_client(
        OffloadSettings(), None, "us-east-1", ("warm", "warm", None), shown="the loader warm-up"
    )
    client.close()


def bad_endpoint(endpoint: str) -> ConfigError:
    return ConfigError(
        f"invalid S3 endpoint URL {redact(endpoint)!r}: use http(s)://host[:port], "
        "e.g. http://127.0.0.1:9000",
        setting="endpoint_url",
    )


def resolve_endpoint(endpoint_url: str | None) -> str | None:
    """The endpoint to use: the given one, else the AWS environment's, else None (AWS)."""
    endpoint = s3_endpoint(endpoint_url)
    if endpoint is not None:
        check_endpoint_url(endpoint)
    return endpoint


def make_client(
    settings: OffloadSettings,
    endpoint: str | None,
    region: str | None,
    credentials: Credentials,
    *,
    shown: str,
) -> Any:
    """A boto3 S3 client; configuration failures are :class:`ConfigError` naming ``shown``."""
    s = settings
    config = Config(
        connect_timeout=s.connect_timeout,
        read_timeout=s.read_timeout,
        # botocore's "max_attempts" counts retries; "total_max_attempts" counts attempts,
        # which is what OffloadSettings.max_attempts means (1 = no retry)
        retries={"total_max_attempts": s.max_attempts, "mode": "standard"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        max_pool_connections=max(10, s.offload_concurrency * 2 + 2),
        s3={"addressing_style": "path"} if endpoint else None,
    )
    try:
        session = _session(credentials, region)
        return session.client("s3", endpoint_url=endpoint, config=config)
    except BotoCoreError as exc:
        raise ConfigError(
            f"cannot configure the S3 client for {shown}: {type(exc).__name__}"
        ) from None
    except ValueError:  # botocore: "Invalid endpoint: ..." for an endpoint it cannot use
        if endpoint is None:
            raise ConfigError(f"cannot configure the S3 client for {shown}") from None
        raise bad_endpoint(endpoint) from None


def retry_logger(store_url: str, max_attempts: int) -> Callable[..., None]:
    """A botocore ``needs-retry`` handler that logs attempts that failed in a retryable way
    (transport errors, 5xx, 408/429) at debug level; it never returns a value, so botocore
    alone decides whether to retry."""

    def handler(
        attempts: int = 0,
        caught_exception: Exception | None = None,
        response: Any = None,
        operation: Any = None,
        **_: Any,
    ) -> None:
        if caught_exception is not None:
            error = type(caught_exception).__name__
        elif response is not None and response[0] is not None:
            status = int(response[0].status_code)
            if status < 500 and status not in (408, 429):
                return
            error = str(response[1].get("Error", {}).get("Code", status))
        else:
            return
        log.debug(
            "s3 attempt failed",
            store=store_url,
            operation=getattr(operation, "name", None),
            attempt=attempts,
            max_attempts=max_attempts,
            error=error,
        )

    return handler
