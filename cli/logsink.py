"""Where the ``offloader`` command's log lines go while a command runs.

A failing command prints one ``error: ...`` line and nothing else (issue 21, item 17): the
warnings that led to the error (an offload that failed, a re-seek) are what the error already
says. So at the default verbosity a command's log lines are *held* while it runs: printed to
stderr when it succeeds, dropped when it fails with an operational error. ``-v`` prints them as
they come (with the traceback), and so does ``service run``, which runs for as long as it is
left running. Repeated lines are aggregated: a line whose event was already printed
:data:`MAX_REPEATS` times is counted, and the count printed once at the end.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

__all__ = ["MAX_HELD_LINES", "MAX_REPEATS", "LogSink"]

#: lines held in memory at most; later ones are only counted
MAX_HELD_LINES = 1000
#: how many lines of one event are printed before the rest are counted
MAX_REPEATS = 3

_EVENT = re.compile(r'(?:^|\s)event=("(?:[^"\\]|\\.)*"|\S+)|"event": ("(?:[^"\\]|\\.)*")')


def _event_of(line: str) -> str:
    match = _EVENT.search(line)
    if match is None:
        return line
    return match.group(1) or match.group(2) or line


class LogSink:
    """A text stream for structlog's PrintLogger: live (to the current ``sys.stderr``) or
    holding lines until :meth:`release` or :meth:`discard`."""

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self._held: list[str] = []
        self._seen: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._partial = ""

    # --- the file-like side (structlog writes "line\n" and flushes) -------------------------
    def write(self, text: str) -> int:
        self._partial += text
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self._line(line)
        return len(text)

    def flush(self) -> None:
        if self.live and sys.stderr is not None:
            sys.stderr.flush()

    def _line(self, line: str) -> None:
        event = _event_of(line)
        self._seen[event] += 1
        if self._seen[event] > MAX_REPEATS:
            self._dropped[event] += 1
            return
        if self.live:
            if sys.stderr is not None:
                print(line, file=sys.stderr, flush=True)
        elif len(self._held) < MAX_HELD_LINES:
            self._held.append(line)
        else:
            self._dropped[event] += 1

    # --- the end of the command ----------------------------------------------------------
    def release(self) -> None:
        """Print what was held, then one line per event that was repeated beyond the cap."""
        lines = [*self._held, *self._summary()]
        self._held, self._dropped = [], Counter()
        if sys.stderr is None:
            return
        for line in lines:
            print(line, file=sys.stderr, flush=True)

    def discard(self) -> None:
        """Drop what was held (the command failed: its ``error:`` line says what happened)."""
        self._held, self._dropped = [], Counter()

    def _summary(self) -> list[str]:
        return [
            f"(log event {event} repeated {count} more time(s), not shown)"
            for event, count in self._dropped.items()
        ]
