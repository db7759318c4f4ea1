"""Object keys and object user metadata, with their inverses.

Keys (spec/object-keys.md §1): data ``<uuid>-ledger-<ledgerId>``, index
``<uuid>-ledger-<ledgerId>-index``, at the bucket root or under an optional key prefix.
User metadata (spec/object-keys.md §3), on both objects:
``s3managedledgeroffloaderformatversion=1`` (checked by every Pulsar reader), ``role``
(``data``/``index``), ``ManagedLedgerName``, and the software version. S3 lower-cases metadata
keys, so parsing is case-insensitive.
"""

from __future__ import annotations

import re
import uuid as _uuid
from collections.abc import Mapping
from dataclasses import dataclass

from formats.errors import InvalidKeyError, UnsupportedVersionError

FORMAT_VERSION_KEY = "s3managedledgeroffloaderformatversion"
FORMAT_VERSION = "1"
SOFTWARE_VERSION_KEY = "s3managedledgeroffloadersoftwareversion"
SOFTWARE_GIT_SHA_KEY = "s3managedledgeroffloadersoftwaregitsha"
CLUSTER_NAME_KEY = "pulsarClusterName"
ROLE_KEY = "role"
ROLE_DATA = "data"
ROLE_INDEX = "index"
MANAGED_LEDGER_NAME_KEY = "ManagedLedgerName"
INDEX_SUFFIX = "-index"

_KEY = re.compile(
    r"^(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"-ledger-(?P<ledger>-?\d{1,19})(?P<index>-index)?$"
)


@dataclass(frozen=True)
class ObjectKey:
    """A parsed object key."""

    uuid: str
    ledger_id: int
    is_index: bool

    @property
    def data_key(self) -> str:
        return data_key(self.uuid, self.ledger_id)

    @property
    def index_key(self) -> str:
        return index_key(self.uuid, self.ledger_id)


def _check_uuid(value: str) -> str:
    try:
        parsed = _uuid.UUID(value)
    except ValueError as exc:
        raise InvalidKeyError(f"{value!r} is not a UUID") from exc
    return str(parsed)


def data_key(uuid: str, ledger_id: int, prefix: str = "") -> str:
    """``<prefix><uuid>-ledger-<ledgerId>`` (UUID in Java's lower-case form)."""
    return f"{prefix}{_check_uuid(uuid)}-ledger-{ledger_id}"


def index_key(uuid: str, ledger_id: int, prefix: str = "") -> str:
    """``<prefix><uuid>-ledger-<ledgerId>-index``."""
    return data_key(uuid, ledger_id, prefix) + INDEX_SUFFIX


def parse_key(key: str, prefix: str = "") -> ObjectKey:
    """The inverse of :func:`data_key` / :func:`index_key` (raises InvalidKeyError)."""
    if prefix:
        if not key.startswith(prefix):
            raise InvalidKeyError(f"key {key!r} does not start with prefix {prefix!r}")
        key = key[len(prefix) :]
    match = _KEY.match(key)
    if match is None:
        raise InvalidKeyError(
            f"{key!r} is not an offloaded-ledger key (<uuid>-ledger-<id>[-index])"
        )
    ledger_id = int(match.group("ledger"))
    if not -(1 << 63) <= ledger_id < (1 << 63):
        raise InvalidKeyError(f"ledger id in {key!r} is outside the int64 range")
    return ObjectKey(match.group("uuid"), ledger_id, match.group("index") is not None)


def object_user_metadata(
    role: str,
    *,
    managed_ledger_name: str | None = None,
    software_version: str | None = None,
    cluster_name: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """User metadata for a data or index object, as Pulsar writes it."""
    if role not in (ROLE_DATA, ROLE_INDEX):
        raise ValueError(f"role must be 'data' or 'index', not {role!r}")
    md: dict[str, str] = {}
    if extra:
        md.update(extra)
    if software_version is not None:
        md[SOFTWARE_VERSION_KEY] = software_version
    if cluster_name is not None:
        md[CLUSTER_NAME_KEY] = cluster_name
    if managed_ledger_name is not None:
        md[MANAGED_LEDGER_NAME_KEY] = managed_ledger_name
    md[ROLE_KEY] = role
    md[FORMAT_VERSION_KEY] = FORMAT_VERSION
    return md


@dataclass(frozen=True)
class ObjectUserMetadata:
    """User metadata read back from an object (keys matched case-insensitively)."""

    format_version: str | None
    role: str | None
    managed_ledger_name: str | None
    software_version: str | None
    cluster_name: str | None


def parse_user_metadata(metadata: Mapping[str, str]) -> ObjectUserMetadata:
    lower = {k.lower(): v for k, v in metadata.items()}
    return ObjectUserMetadata(
        format_version=lower.get(FORMAT_VERSION_KEY),
        role=lower.get(ROLE_KEY),
        managed_ledger_name=lower.get(MANAGED_LEDGER_NAME_KEY.lower()),
        software_version=lower.get(SOFTWARE_VERSION_KEY),
        cluster_name=lower.get(CLUSTER_NAME_KEY.lower()),
    )


def check_format_version(metadata: Mapping[str, str], key: str) -> None:
    """Pulsar's ``VERSION_CHECK``: the object must say format version exactly ``1``."""
    version = parse_user_metadata(metadata).format_version
    if version != FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"Invalid object version {version} for {key}, expect {FORMAT_VERSION}: not an "
            "offloaded ledger written in Pulsar's format"
        )
