"""Logging through structlog: key=value lines on stderr, or JSON lines with ``json=True``.

The library never configures structlog by itself: :func:`configure` is for applications (the
``offloader`` command and the benchmarks call it), since structlog's configuration is
process-wide. Modules get their loggers from :func:`get_logger`, which follows the
application's structlog configuration once there is one (:func:`configure`, or the
application's own ``structlog.configure``). Until then, as in a program that only imports
``offloader`` (a ``ReadHandle`` in a notebook), it logs warnings and above only, as key=value
lines on stderr, never on stdout: structlog's own unconfigured default would print every
level, debug included, on stdout.

Nothing logged by this project carries credentials: callers log store URLs and endpoints, never
keys; :func:`redact` strips userinfo from a URL for the odd case where one is given.

structlog is imported without ``rich``: ``structlog.dev`` imports it, when it is installed
(pyiceberg brings it), for its console renderer's tracebacks, which our renderers (logfmt and
JSON) never use; that is about 4 MB of resident memory in every process, a Kafka upload's
worker included (issue 40's RSS goal). A process that imported structlog or rich before
``offloader`` keeps them as they are; one that imports structlog only through us and then
configures structlog's ``ConsoleRenderer`` gets its plain tracebacks instead of rich's.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from typing import Any

_WITHOUT_RICH = "structlog" not in sys.modules and "rich" not in sys.modules
if _WITHOUT_RICH:
    sys.modules["rich"] = None  # type: ignore[assignment]  # import rich: ImportError
try:
    import structlog
finally:
    if _WITHOUT_RICH and "rich" in sys.modules and sys.modules["rich"] is None:
        del sys.modules["rich"]

_USERINFO = re.compile(r"(?<=://)[^/@\s'\"]+@")
#: the query string of a URL (``?X-Amz-Signature=...``): a presigned URL's credentials
_QUERY = re.compile(r"(?<=://)([^\s'\"?#]*)\?[^\s'\"#]*")
#: a signing parameter outside a URL (``X-Amz-Signature=abc`` quoted on its own)
_SIGNING = re.compile(
    r"(?i)\b(X-Amz-(?:Signature|Credential|Security-Token)|Signature|AWSAccessKeyId)=[^&\s'\"]*"
)

#: the level below which nothing is logged while structlog is not configured
UNCONFIGURED_LEVEL = logging.WARNING


def redact(text: str) -> str:
    """Credentials out of a URL, or of any text quoting URLs: ``s3://key:secret@bucket`` ->
    ``s3://***@bucket``, ``https://h/k?X-Amz-Signature=...`` -> ``https://h/k?***``, and a
    signing parameter quoted on its own (``X-Amz-Signature=...``) -> ``X-Amz-Signature=***``."""
    text = _USERINFO.sub("***@", text)
    text = _QUERY.sub(r"\1?***", text)
    return _SIGNING.sub(r"\1=***", text)


def _redact_event(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: :func:`redact` every string value of a log line."""
    return {k: redact(v) if isinstance(v, str) else v for k, v in event.items()}


def _processors(*, json: bool) -> list[Any]:
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _redact_event,
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors.append(
            structlog.processors.LogfmtRenderer(key_order=["timestamp", "level", "event"])
        )
    return processors


def configure(*, json: bool = False, level: int = logging.WARNING, file: Any = None) -> None:
    """Configure structlog once for the process (applications call it: the CLI, the benchmarks).

    It replaces any structlog configuration the process had, so library code never calls it.
    ``file``: where the lines go (a text stream; default ``sys.stderr``).
    """
    structlog.configure(
        processors=_processors(json=json),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr if file is None else file),
        cache_logger_on_first_use=False,
    )


class _StderrLogger:
    """Writes each rendered line to the ``sys.stderr`` of the moment (pytest and others swap it)."""

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        stream = sys.stderr
        if stream is None:  # pythonw: no console at all
            return
        with self._lock:
            print(message, file=stream, flush=True)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


_UNCONFIGURED_PROCESSORS = _processors(json=False)
#: a class, though structlog types it as the (uncallable) FilteringBoundLogger protocol
_UNCONFIGURED_CLASS: Any = structlog.make_filtering_bound_logger(UNCONFIGURED_LEVEL)
_UNCONFIGURED: dict[str, Any] = {}


def _unconfigured_logger(name: str) -> Any:
    logger = _UNCONFIGURED.get(name)
    if logger is None:
        logger = _UNCONFIGURED_CLASS(
            _StderrLogger(), _UNCONFIGURED_PROCESSORS, {"logger_name": name}
        )
        _UNCONFIGURED[name] = logger
    return logger


class LibraryLogger:
    """A module's logger: structlog's configured logger once ``structlog.is_configured()``,
    until then warnings and above on stderr.

    The choice is made at each call (``log.debug(...)``, ``log.bind(...)``), so a program that
    configures structlog after importing ``offloader`` gets every log line its way.
    """

    __slots__ = ("_configured", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        # ``logger=`` would clash with structlog's own ``wrap_logger(logger, ...)`` parameter
        self._configured = structlog.get_logger(logger_name=name)

    def __getattr__(self, attribute: str) -> Any:
        if structlog.is_configured():
            return getattr(self._configured, attribute)
        return getattr(_unconfigured_logger(self._name), attribute)

    def __repr__(self) -> str:
        return f"<LibraryLogger {self._name}>"


def get_logger(name: str) -> Any:
    """The logger of module ``name`` (see :class:`LibraryLogger`), tagged ``logger_name``."""
    return LibraryLogger(name)
