"""Names in an export target: Hive-style directories and deterministic file names.

A topic's files live under ``topic=<topic, percent-encoded>/`` (shortened with a hash when
longer than a file name may be) then one directory per time
partition, ``dt=YYYY-MM-DD/`` or ``dt=YYYY-MM-DD/hr=HH/`` (UTC), and ``dt=__invalid__/`` (with
``hr=__invalid__/``) for messages whose time field is missing or unparsable. A file's name is a
pure function of what it holds::

    g<generation>-<ledger id>-<first entry>-<last entry>-<partition value>.parquet

so a re-run writes the same names, a reset knows from names alone which files hold messages
after a position, and a new generation writes beside the old files. Files being written are
``.<name>.tmp-<random>`` (hidden from readers; removed by the next run). Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from offloader.errors import ConfigError

__all__ = [
    "INVALID",
    "MAX_DIR_BYTES",
    "PARTITIONINGS",
    "SUCCESS",
    "TOPIC_KEY",
    "ExportFile",
    "Partitioning",
    "file_name",
    "is_shortened",
    "parse_file_name",
    "topic_dir",
]

#: the partition value of messages without a usable time
INVALID = "__invalid__"
SUCCESS = "_SUCCESS"
#: the longest ``topic=`` directory name (NAME_MAX of ext4, XFS, APFS: 255 bytes)
MAX_DIR_BYTES = 255
_HASH_DIGITS = 32
#: the Parquet key-value metadata key of a file's full topic name, set in the files under a
#: shortened directory (:func:`topic_dir`)
TOPIC_KEY = "offloader.topic"
PARTITIONINGS = ("dt", "dt,hr")
_DAY_MS = 86_400_000
_HOUR_MS = 3_600_000
_NAME = re.compile(
    r"^g(?P<gen>\d+)-(?P<ledger>\d+)-(?P<first>\d+)-(?P<last>\d+)-"
    r"(?P<value>\d{4}-\d\d-\d\d(?:T\d\d)?|invalid)\.parquet$"
)


def topic_dir(topic: str) -> str:
    """``topic=<topic>`` with every character but letters, digits, ``-``, ``_``, ``.``, ``~``
    escaped (as Hive escapes partition values). A name longer than a file name may be
    (:data:`MAX_DIR_BYTES`) is shortened: the escaped name's first bytes (never half an
    escape), ``+`` (which escaping never yields, so no full name looks like it), and 32 hex
    digits of the SHA-256 of the topic's UTF-8 bytes; the files keep the full name in their
    ``topic`` column and in the key-value metadata :data:`TOPIC_KEY` (spec/export.md §1)."""
    full = "topic=" + quote(topic, safe="-_.")
    if len(full) <= MAX_DIR_BYTES:
        return full
    digest = hashlib.sha256(topic.encode("utf-8")).hexdigest()[:_HASH_DIGITS]
    cut = MAX_DIR_BYTES - 1 - _HASH_DIGITS
    if "%" in full[cut - 2 : cut]:  # never cut an escape %XX in two
        cut = full.rindex("%", cut - 2, cut)
    return f"{full[:cut]}+{digest}"


def is_shortened(directory: str) -> bool:
    """Whether a ``topic=`` directory name is a shortened one (:func:`topic_dir`)."""
    return "+" in directory


def topic_of_dir(name: str) -> str | None:
    """The topic of a ``topic=...`` directory name, or None (a shortened name: None, the
    topic is in its files)."""
    if not name.startswith("topic=") or is_shortened(name):
        return None
    return unquote(name[6:])


@dataclass(frozen=True)
class Partitioning:
    """``dt`` (days) or ``dt,hr`` (hours), UTC. A bucket is a day or hour number since the
    epoch; None is the ``__invalid__`` partition."""

    by: str = "dt,hr"

    def __post_init__(self) -> None:
        if self.by not in PARTITIONINGS:
            raise ConfigError(
                f"--partition-by {self.by!r}: choose one of {', '.join(PARTITIONINGS)}"
            )

    @property
    def size_ms(self) -> int:
        return _HOUR_MS if self.by == "dt,hr" else _DAY_MS

    def bucket(self, ms: int) -> int:
        return ms // self.size_ms

    def end_ms(self, bucket: int) -> int:
        """The first millisecond after the bucket."""
        return (bucket + 1) * self.size_ms

    def directory(self, bucket: int | None) -> str:
        """``dt=2025-06-15/hr=03`` (or ``dt=2025-06-15``; ``dt=__invalid__[/hr=__invalid__]``)."""
        if bucket is None:
            return f"dt={INVALID}" + (f"/hr={INVALID}" if self.by == "dt,hr" else "")
        start = dt.datetime.fromtimestamp(bucket * self.size_ms / 1000, tz=dt.timezone.utc)
        day = f"dt={start:%Y-%m-%d}"
        return f"{day}/hr={start:%H}" if self.by == "dt,hr" else day

    def value(self, bucket: int | None) -> str:
        """The partition value in file names: ``2025-06-15``, ``2025-06-15T03`` or ``invalid``."""
        if bucket is None:
            return "invalid"
        start = dt.datetime.fromtimestamp(bucket * self.size_ms / 1000, tz=dt.timezone.utc)
        return f"{start:%Y-%m-%dT%H}" if self.by == "dt,hr" else f"{start:%Y-%m-%d}"

    def bucket_of_value(self, value: str) -> int | None:
        if value == "invalid":
            return None
        fmt = "%Y-%m-%dT%H" if "T" in value else "%Y-%m-%d"
        start = dt.datetime.strptime(value, fmt).replace(tzinfo=dt.timezone.utc)
        return int(start.timestamp() * 1000) // self.size_ms


def file_name(generation: int, ledger_id: int, first: int, last: int, value: str) -> str:
    return f"g{generation}-{ledger_id}-{first}-{last}-{value}.parquet"


@dataclass(frozen=True)
class ExportFile:
    """One complete output file, as its path says."""

    path: str  # relative to the target root
    generation: int
    ledger_id: int
    first_entry: int
    last_entry: int
    value: str
    size: int = 0

    @property
    def directory(self) -> str:
        return self.path.rpartition("/")[0]

    @property
    def first(self) -> tuple[int, int]:
        return (self.ledger_id, self.first_entry)

    @property
    def last(self) -> tuple[int, int]:
        return (self.ledger_id, self.last_entry)


def parse_file_name(path: str, size: int = 0) -> ExportFile | None:
    """The file a relative path names, or None when the name is not an export file's."""
    match = _NAME.match(path.rpartition("/")[2])
    if match is None:
        return None
    return ExportFile(
        path,
        int(match["gen"]),
        int(match["ledger"]),
        int(match["first"]),
        int(match["last"]),
        match["value"],
        size,
    )


def is_temp_name(path: str) -> bool:
    name = path.rpartition("/")[2]
    return name.startswith(".") and ".tmp-" in name
