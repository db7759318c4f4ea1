"""Where ledger files live: ``<home>/ledgers/<tenant>/<namespace>/<topic>/<ledger_id>.log``.

Every name component is encoded (never joined raw): ASCII letters, digits, ``_`` and ``-`` stay
as they are, ``.`` too except as the first character, and every other UTF-8 byte becomes
``%XX``. So no component can be empty, ``.``, ``..``, or contain a separator, whatever the name.
An encoded component longer than :data:`MAX_COMPONENT` characters is shortened to a prefix plus
``~`` and a SHA-256 of the name (``~`` never appears otherwise, so the two forms cannot
collide), keeping every component within a filesystem's 255-byte limit. As a last line of
defence, :func:`ledger_file` checks that the resolved path is inside the root.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from offloader.errors import InvalidName
from offloader.naming import TopicName

MAX_COMPONENT = 200
_HASHED_PREFIX = 150
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
SUFFIX = ".log"
TMP_SUFFIX = ".tmp"


def encode_component(name: str) -> str:
    """A filesystem-safe, injective spelling of one name component."""
    raw = name.encode("utf-8")
    out: list[str] = []
    for i, byte in enumerate(raw):
        if byte in _SAFE or (byte == 0x2E and i > 0):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    encoded = "".join(out)
    if len(encoded) > MAX_COMPONENT:
        encoded = f"{encoded[:_HASHED_PREFIX]}~{hashlib.sha256(raw).hexdigest()[:40]}"
    return encoded


def topic_dir(root: Path, topic: TopicName) -> Path:
    """The directory holding ``topic``'s ledgers, checked to be inside ``root``."""
    path = root.joinpath(
        encode_component(topic.tenant),
        encode_component(topic.namespace_name.local_name),
        encode_component(topic.local_name),
    )
    return _inside(root, path)


def ledger_file(root: Path, topic: TopicName, ledger_id: int) -> Path:
    check_ledger_id(ledger_id)
    return _inside(root, topic_dir(root, topic) / f"{ledger_id}{SUFFIX}")


def check_ledger_id(ledger_id: int) -> None:
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int):
        raise InvalidName(f"ledger id must be an int, not {type(ledger_id).__name__}")
    if not 0 <= ledger_id < 2**63:
        raise InvalidName(f"ledger id {ledger_id} is not in 0..2^63-1")


def parse_ledger_file(name: str) -> int | None:
    """The ledger id of a file name ``<id>.log``; None for anything else."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    if not stem.isascii() or not stem.isdigit() or (len(stem) > 1 and stem[0] == "0"):
        return None
    return int(stem)


def _inside(root: Path, path: Path) -> Path:
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise InvalidName(f"path {path} escapes the ledger root {root}")
    return path
