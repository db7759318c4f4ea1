"""ledger-offloader's one exception tree.

The root, :class:`OffloaderError`, and the format errors are defined in :mod:`formats.errors`
(the bottom layer) and re-exported here; this module adds the errors of the engine: object
stores, the metadata store, the local ledger store, offloads and reads. SDK exceptions
(botocore, sqlite3) are translated into these classes in the one module that talks to the SDK,
and never escape it. Messages never contain credentials.
"""

from __future__ import annotations

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    CorruptDataError,
    EmptyLedgerError,
    EntryTooLargeError,
    FormatError,
    IndexInconsistentError,
    InvalidKeyError,
    OffloaderError,
    ProtobufError,
    TruncatedError,
    UnsupportedVersionError,
)

__all__ = [
    "AccessDenied",
    "AlreadyExists",
    "BadMagicError",
    "ChecksumMismatchError",
    "ConfigError",
    "CorruptDataError",
    "EmptyLedgerError",
    "EntryOutOfRange",
    "EntryTooLargeError",
    "ForeignObjectError",
    "FormatError",
    "IndexInconsistentError",
    "InvalidKeyError",
    "InvalidName",
    "LedgerClosedError",
    "LedgerStoreError",
    "MetadataError",
    "NotFound",
    "ObjectNotFound",
    "OffloadConflict",
    "OffloadError",
    "OffloadInProgress",
    "OffloaderError",
    "PreconditionFailed",
    "ProtobufError",
    "ReadError",
    "StoreError",
    "StoreUnavailable",
    "TruncatedError",
    "UnsupportedVersionError",
    "UploadNotFound",
    "VerificationError",
]


class ConfigError(OffloaderError):
    """Invalid settings, URLs, size or time strings."""


# --- object stores ------------------------------------------------------------------------
class StoreError(OffloaderError):
    """An object-store operation failed."""


class ObjectNotFound(StoreError):
    """The key (or bucket) does not exist."""


class UploadNotFound(StoreError):
    """The multipart upload does not exist (completed, aborted or never created)."""


class StoreUnavailable(StoreError):
    """The store could not be reached or did not answer in time (after bounded retries)."""


class AccessDenied(StoreError):
    """The credentials were refused or lack permission."""


class PreconditionFailed(StoreError):
    """A conditional write lost (for example ``IfNoneMatch='*'`` on an existing key)."""


class ForeignObjectError(StoreError):
    """An object that is not an offloaded ledger of a format version we read."""


# --- metadata store -----------------------------------------------------------------------
class MetadataError(OffloaderError):
    """The metadata store failed or refused a change."""


class NotFound(MetadataError):
    """A tenant, namespace, topic or ledger that does not exist."""


class AlreadyExists(MetadataError):
    """Creating something that already exists."""


class OffloadConflict(MetadataError):
    """Compare-and-set on an offload UUID lost: another attempt owns the ledger now."""


class InvalidName(OffloaderError):
    """A tenant, namespace or topic name that breaks Pulsar's naming rules."""


# --- local ledger store -------------------------------------------------------------------
class LedgerStoreError(OffloaderError):
    """The local (BookKeeper stand-in) ledger store failed."""


class LedgerClosedError(LedgerStoreError):
    """Appending to a ledger that is closed."""


# --- offload and read ---------------------------------------------------------------------
class OffloadError(OffloaderError):
    """An offload attempt failed; nothing it wrote remains."""


class OffloadInProgress(OffloadError):
    """Another offload is already running for the topic (Pulsar: HTTP 409)."""


class VerificationError(OffloadError):
    """Offloaded objects do not match what the metadata recorded (size, checksums)."""


class ReadError(OffloaderError):
    """Reading entries failed."""


class EntryOutOfRange(ReadError):
    """The requested entry range is not inside the ledger (Pulsar: BKIncorrectParameter)."""
