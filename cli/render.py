"""Output for people and for scripts: aligned tables, JSON lines, progress bars.

* :func:`table` lines up columns (numbers right-aligned) for text mode;
* :func:`json_line` is the one JSON encoding every ``--json`` command uses: one object per
  line, keys in a stable order, ``null`` for "unknown";
* :func:`plural` says "1 entry", "2 entries"; :func:`safe_bytes` shows arbitrary bytes (a
  payload) on one terminal line: printable ASCII as is, everything else backslash-escaped,
  truncated with an indication;
* :class:`Progress` draws ``label [####----] 12.0/40.0 MiB 8.1 MiB/s ETA 0:03`` on stderr, only
  when stderr is a terminal and ``--json`` is off (:func:`progress_enabled`), and only after
  the work has lasted a moment, so that short commands never flicker.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import click

from cli.context import CliContext
from offloader.units import format_size


def json_line(record: dict[str, Any]) -> str:
    """One compact JSON object (no trailing newline)."""
    return json.dumps(record, separators=(", ", ": "), default=str)


def echo_json(record: dict[str, Any]) -> None:
    click.echo(json_line(record))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Aligned text lines: a header row, then the rows; numbers right-aligned, None as ``-``."""
    raw = [list(row) for row in rows]
    cells = [[_cell(value) for value in row] for row in raw]
    numeric = [
        any(_is_number(row[i]) for row in raw)
        and all(row[i] is None or _is_number(row[i]) for row in raw)
        for i in range(len(headers))
    ]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = [_join(list(headers), widths, numeric)]
    lines.extend(_join(row, widths, numeric) for row in cells)
    return lines


def _is_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return safe_text(str(value))


def safe_text(text: str, *, escape_backslash: bool = True) -> str:
    """``text`` (an object key, a name: anything that came from outside) as one line that is
    safe on a terminal: a backslash as ``\\\\``, ``\\n``/``\\r``/``\\t``, a byte the command
    line could not decode (a surrogate escape) as the ``\\xNN`` it was, and every other
    character that is not printable (escape sequences, C1 controls, ...) as ``\\xNN`` or
    ``\\uNNNN``; printable characters, non-ASCII ones included, as they are.

    ``escape_backslash=False`` is for error messages: their names and paths are already
    quoted and escaped (``repr``, an ``OSError``'s filename), so a backslash there is an
    escape, shown as it is, not escaped a second time."""
    if text.isprintable() and (not escape_backslash or "\\" not in text):
        return text
    parts: list[str] = []
    for char in text:
        code = ord(char)
        if char == "\\" and not escape_backslash:
            parts.append(char)
        elif code in _ESCAPES:
            parts.append(_ESCAPES[code])
        elif 0xDC80 <= code <= 0xDCFF:
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():
            parts.append(char)
        elif code < 0x100:
            parts.append(f"\\x{code:02x}")
        elif code < 0x10000:
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(f"\\U{code:08x}")
    return "".join(parts)


def _join(row: list[str], widths: list[int], numeric: list[bool]) -> str:
    parts = [
        text.rjust(width) if is_number else text.ljust(width)
        for text, width, is_number in zip(row, widths, numeric, strict=True)
    ]
    return "  ".join(parts).rstrip()


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    for line in table(headers, rows):
        click.echo(line)


def time_text(ms: int | None) -> str:
    """Epoch milliseconds as a UTC time a person reads (``2026-11-27T20:42:38.000Z``); ``-``
    for unknown, the number itself when it is outside the calendar. JSON output keeps the
    milliseconds: this is for the tables."""
    if ms is None:
        return "-"
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- words and bytes -----------------------------------------------------------------------
def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``0 blocks`` (``plural_form`` defaults to ``singular + s``)."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {word}"


_ESCAPES = {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
#: bytes of a payload that ``topics read --payload`` shows in text mode
PAYLOAD_TEXT_LIMIT = 64


def safe_bytes(data: bytes, limit: int = PAYLOAD_TEXT_LIMIT) -> str:
    """``data`` as one line that is safe on a terminal: printable ASCII as is, backslash as
    ``\\\\``, ``\\n``/``\\r``/``\\t``, every other byte as ``\\xNN``; after ``limit`` bytes it
    stops and says how many more there are (``... [+936 bytes]``)."""
    shown = data[:limit]
    parts: list[str] = []
    for byte in shown:
        if byte in _ESCAPES:
            parts.append(_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            parts.append(chr(byte))
        else:
            parts.append(f"\\x{byte:02x}")
    text = "".join(parts)
    if len(data) > limit:
        text += f"... [+{plural(len(data) - limit, 'byte')}]"
    return text


# --- progress ------------------------------------------------------------------------------
def progress_enabled(cli: CliContext, stream: TextIO | None = None) -> bool:
    """Progress bars only for people: stderr is a terminal and ``--json`` is off."""
    stream = stream if stream is not None else sys.stderr
    if cli.json:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """A byte-progress bar on stderr; call it as ``progress(done, total)``.

    ``total`` 0 means unknown (no bar, no ETA). Nothing is drawn when disabled, nor during
    the first ``delay`` seconds; redraws are limited to ten per second. Use as a context
    manager: the line is finished (or cleared) on exit.
    """

    WIDTH = 24
    #: seconds of work before the bar first appears
    DELAY = 0.5

    def __init__(
        self,
        label: str,
        *,
        enabled: bool,
        delay: float | None = None,
        stream: TextIO | None = None,
        unit: str = "bytes",
    ) -> None:
        self.label = label
        self.enabled = enabled
        self.delay = self.DELAY if delay is None else delay
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self.done = 0
        self.total = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.delay or now - self._last_draw < 0.1:
            return
        self._last_draw = now
        self._draw(now)

    def advance(self, amount: int, total: int | None = None) -> None:
        """Add ``amount`` to what is done (for callers that count themselves)."""
        self(self.done + amount, self.total if total is None else total)

    def render(self, now: float | None = None) -> str:
        """The progress line (without the carriage return)."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self.started, 1e-6)
        rate = self.done / elapsed
        parts = [self.label]
        if self.total > 0:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * self.WIDTH)
            parts.append("[" + "#" * filled + "-" * (self.WIDTH - filled) + "]")
            parts.append(f"{self._amount(self.done)}/{self._amount(self.total)}")
        else:
            parts.append(self._amount(self.done))
        parts.append(f"{self._amount(int(rate))}/s")
        if self.total > 0 and rate > 0 and self.done < self.total:
            parts.append(f"ETA {_clock((self.total - self.done) / rate)}")
        else:
            parts.append(_clock(elapsed))
        return " ".join(parts)

    def _amount(self, n: int) -> str:
        return format_size(n) if self.unit == "bytes" else f"{n} {self.unit}"

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.render(now) + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
