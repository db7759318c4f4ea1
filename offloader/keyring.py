"""The key ring: named 256-bit key-encryption keys in one file, mode 0600 (spec/transforms.md).

The file is ``$OFFLOADER_KEY_RING`` when set, else ``<home>/keys``; JSON::

    {"format": "ledger-offloader-key-ring", "version": 1, "active": "k2",
     "keys": [{"id": "k1", "created": "2026-11-25T10:00:00Z", "key": "<base64 of 32 bytes>"}]}

It is written atomically (a 0600 temporary file in the same directory, fsync, rename) and
refused when group or others can read it. Key bytes never leave this module except to the
transform codec: :class:`KeyInfo` (what ``keys list`` shows) carries no key, and errors and
logs name key ids only.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from offloader.errors import KeyRingError, MissingKeyError
from offloader.logs import get_logger

log = get_logger(__name__)

KEY_RING_ENV = "OFFLOADER_KEY_RING"
_FORMAT = "ledger-offloader-key-ring"
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
KEY_LEN = 32


def key_ring_path(home: Path) -> Path:
    env = os.environ.get(KEY_RING_ENV)
    return Path(env).expanduser() if env else home / "keys"


def ring_path(key_ring: str | None) -> Path:
    """The key ring a setting names (``OffloadSettings.key_ring``), else the default one
    (``$OFFLOADER_KEY_RING``, else ``./.offloader/keys``)."""
    return Path(key_ring) if key_ring else key_ring_path(Path(".offloader"))


def check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id):
        raise KeyRingError(
            f"invalid key id {key_id!r}: 1-64 of letters, digits, '.', '_', '-' "
            "(starting with a letter or digit)"
        )
    return key_id


@dataclass(frozen=True)
class KeyInfo:
    """A key as ``keys list`` shows it: never its bytes."""

    key_id: str
    created: datetime
    active: bool


@dataclass(frozen=True)
class _Key:
    key_id: str
    created: datetime
    material: bytes

    def __repr__(self) -> str:  # never the bytes
        return f"_Key({self.key_id!r})"


class KeyRing:
    """The key ring at ``path`` (loaded at construction; empty when the file does not exist)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: dict[str, _Key] = {}
        self.active: str | None = None
        if path.exists():
            self._load()

    # -- reading ---------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                raise KeyRingError(
                    f"key ring {self.path} has mode {mode:04o}: group/others may read it; "
                    f"run chmod 600 {self.path}"
                )
            doc: Any = json.loads(self.path.read_text())
        except OSError as exc:
            raise KeyRingError(f"cannot read key ring {self.path}: {exc.strerror}") from None
        except ValueError:
            raise KeyRingError(f"key ring {self.path} is not valid JSON") from None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("version") != 1:
            raise KeyRingError(f"{self.path} is not a version 1 ledger-offloader key ring")
        try:
            for item in doc["keys"]:
                key_id = check_key_id(str(item["id"]))
                material = base64.b64decode(item["key"], validate=True)
                if len(material) != KEY_LEN:
                    raise KeyRingError(f"key {key_id!r} in {self.path} is not 256 bits")
                created = datetime.fromisoformat(str(item["created"]).replace("Z", "+00:00"))
                self._keys[key_id] = _Key(key_id, created, material)
            active = doc.get("active")
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise KeyRingError(f"key ring {self.path} is malformed") from None
        if active is not None and active not in self._keys:
            raise KeyRingError(f"key ring {self.path}: active key {active!r} is not in it")
        self.active = active

    def key(self, key_id: str) -> bytes:
        """The bytes of key ``key_id`` (:class:`MissingKeyError` naming it if absent)."""
        found = self._keys.get(key_id)
        if found is None:
            raise MissingKeyError(key_id, str(self.path))
        return found.material

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def list(self) -> list[KeyInfo]:
        return [
            KeyInfo(k.key_id, k.created, k.key_id == self.active)
            for k in sorted(self._keys.values(), key=lambda k: (k.created, k.key_id))
        ]

    def active_key_id(self) -> str:
        if self.active is None:
            raise KeyRingError(
                f"key ring {self.path} has no active key: "
                "run `offloader keys create ID --activate` (or give --key-id)"
            )
        return self.active

    # -- writing ---------------------------------------------------------------------------
    def create(
        self, key_id: str, *, activate: bool = False, now: datetime | None = None
    ) -> KeyInfo:
        """Add a fresh random key (the ring file is created if needed); the first key of a
        ring becomes active even without ``activate``."""
        check_key_id(key_id)
        with self._locked():
            if key_id in self._keys:
                raise KeyRingError(f"key {key_id!r} already exists in {self.path}")
            created = (now or datetime.now(timezone.utc)).replace(microsecond=0)
            self._keys[key_id] = _Key(key_id, created, secrets.token_bytes(KEY_LEN))
            if activate or self.active is None:
                self.active = key_id
            self._save()
        log.info("key created", key_id=key_id, active=self.active == key_id, ring=str(self.path))
        return KeyInfo(key_id, created, self.active == key_id)

    def activate(self, key_id: str) -> None:
        with self._locked():
            self.key(key_id)
            self.active = key_id
            self._save()
        log.info("key activated", key_id=key_id, ring=str(self.path))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock on the ring (a ``.<name>.lock`` file beside it), with the ring
        re-read under it: two concurrent ``keys create`` never lose each other's key."""
        lock = self.path.parent / f".{self.path.name}.lock"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise KeyRingError(f"cannot lock key ring {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._keys.clear()
            self.active = None
            if self.path.exists():
                self._load()
            yield
        finally:
            os.close(fd)  # releases the lock

    def _save(self) -> None:
        doc = {
            "format": _FORMAT,
            "version": 1,
            "active": self.active,
            "keys": [
                {
                    "id": k.key_id,
                    "created": k.created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "key": base64.b64encode(k.material).decode(),
                }
                for k in self._keys.values()
            ],
        }
        data = (json.dumps(doc, indent=2) + "\n").encode()
        directory = self.path.parent
        tmp = directory / f".{self.path.name}.{secrets.token_hex(6)}.tmp"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise KeyRingError(f"cannot write key ring {self.path}: {exc.strerror}") from None
