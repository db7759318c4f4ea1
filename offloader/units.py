"""Size and relative-time strings, with Pulsar's conventions.

Sizes (``ByteUnitUtil``): a plain integer is bytes; a suffix k/K, m/M, g/G, t/T multiplies by
1024**1..4 (``4096``, ``100K``, ``10M``, ``16G``, ``2T``). Times (``RelativeTimeUtil``): a plain
integer is seconds; suffixes s, m, h, d, w (7 days), y (365 days), case-insensitive. ``-1`` is
accepted by both where a caller allows "disabled".

Values must be storable as a signed 64-bit integer (SQLite's INTEGER, Java's ``long``): sizes at
most :data:`MAX_SIZE_BYTES` (8 EiB - 1), times at most :data:`MAX_DURATION_SECONDS`, so that
they fit in milliseconds too; anything larger is refused with a :class:`ConfigError`.
"""

from __future__ import annotations

import re

from offloader.errors import ConfigError

_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_PATTERN = re.compile(r"^\s*(-?\d+)\s*([A-Za-z]?)\s*$")

#: the largest signed 64-bit integer (SQLite INTEGER, Java long)
MAX_INT64 = 2**63 - 1
#: the largest size accepted, in bytes
MAX_SIZE_BYTES = MAX_INT64
#: the largest time accepted, in seconds: its milliseconds still fit in 64 bits
MAX_DURATION_SECONDS = MAX_INT64 // 1000
#: longer digit strings are too large anyway (and Python refuses to parse very long ones)
_MAX_DIGITS = 40
_HUGE = int("1" + "0" * _MAX_DIGITS)


def _number(digits: str) -> int:
    """The integer; one with too many digits to be in range anyway becomes +-10**40."""
    if len(digits.lstrip("-")) > _MAX_DIGITS:
        return -_HUGE if digits.startswith("-") else _HUGE
    return int(digits)


def parse_size(text: str | int, *, allow_negative: bool = False) -> int:
    """Bytes in a size string such as ``10M``; raises ConfigError with the accepted forms."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ConfigError(f"invalid size {text!r}: use bytes or a number with K, M, G or T")
    if isinstance(text, int):
        value = text
    else:
        match = _PATTERN.match(text)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _SIZE_UNITS:
            raise ConfigError(
                f"invalid size {text!r}: use bytes or a number with K, M, G or T (e.g. 10M, 5G)"
            )
        value = _number(match.group(1)) * _SIZE_UNITS[unit]
    if value < 0 and not (allow_negative and value == -1):
        raise ConfigError(f"invalid size {text!r}: must not be negative")
    if value > MAX_SIZE_BYTES:
        raise ConfigError(
            f"invalid size {text!r}: too large, at most {MAX_SIZE_BYTES} bytes (8 EiB - 1)"
        )
    return value


def parse_duration_seconds(text: str | int, *, allow_negative: bool = False) -> int:
    """Seconds in a relative time such as ``4h``; raises ConfigError with the accepted forms."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ConfigError(f"invalid time {text!r}: use seconds or a number with s, m, h, d, w or y")
    if isinstance(text, int):
        value = text
    else:
        match = _PATTERN.match(text)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _TIME_UNITS:
            raise ConfigError(
                f"invalid time {text!r}: use seconds or a number with s, m, h, d, w or y "
                "(e.g. 30s, 10m, 4h, 2d)"
            )
        value = _number(match.group(1)) * _TIME_UNITS[unit]
    if value < 0 and not (allow_negative and value == -1):
        raise ConfigError(f"invalid time {text!r}: must not be negative")
    if value > MAX_DURATION_SECONDS:
        raise ConfigError(
            f"invalid time {text!r}: too large, at most {MAX_DURATION_SECONDS} seconds "
            "(about 292 million years)"
        )
    return value


def format_size(n: int) -> str:
    """A human size: ``1.5 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover
