"""structlog configuration: key=value lines on stderr, or JSON lines with ``json=True``.

Nothing logged by this project carries credentials: callers log store URLs and endpoints, never
keys; :func:`redact` strips userinfo from a URL for the odd case where one is given.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact(url: str) -> str:
    """``s3://key:secret@bucket`` -> ``s3://***@bucket``."""
    return _USERINFO.sub("***@", url)


def configure(*, json: bool = False, level: int = logging.WARNING) -> None:
    """Configure structlog once for the process (CLI and service call this)."""
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors.append(
            structlog.processors.LogfmtRenderer(key_order=["timestamp", "level", "event"])
        )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A bound structlog logger tagged with the module name."""
    # ``logger=`` would clash with structlog's own ``wrap_logger(logger, ...)`` parameter
    return structlog.get_logger(logger_name=name)
