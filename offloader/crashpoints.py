"""Named crash points for the kill -9 test harness (``tests/crash``).

``crash_point("offload.after_begin")`` kills the current process with SIGKILL, exactly as
``kill -9`` would (no ``finally``, no cleanup, user-space buffers lost; what was already handed
to the kernel survives), when the environment variable ``LEDGER_OFFLOADER_CRASH_AT``

* equals the name (the first time the point is reached), or
* equals ``name:N`` (the N-th time the point is reached in this process, N >= 1).

The variable is read once, at import; without it a crash point is one comparison of a module
global with None, so the calls can stay in production code at no cost. :func:`count_hits` lets a
test count the points a workload reaches (in its own process).
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV_VAR", "count_hits", "crash_point"]

ENV_VAR = "LEDGER_OFFLOADER_CRASH_AT"


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, sep, count = spec.rpartition(":")
    if sep and count.isdigit() and name:
        return name, max(int(count), 1)
    return spec, 1


_TARGET = _parse(os.environ.get(ENV_VAR))
_seen = 0
#: when not None, every point reached is counted here (see :func:`count_hits`)
_hits: dict[str, int] | None = None


def crash_point(name: str) -> None:
    """Die here (SIGKILL) if ``LEDGER_OFFLOADER_CRASH_AT`` names this point and occurrence."""
    global _seen
    if _hits is not None:
        _hits[name] = _hits.get(name, 0) + 1
    if _TARGET is None or name != _TARGET[0]:
        return
    _seen += 1
    if _seen >= _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)


def count_hits(hits: dict[str, int] | None) -> None:
    """Count every crash point reached in this process into ``hits`` (None stops counting):
    the harness learns how often each point is reached by a workload, to pick occurrences."""
    global _hits
    _hits = hits
