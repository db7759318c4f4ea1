"""ledger-offloader's one exception tree.

The root, :class:`OffloaderError`, and the format errors are defined in :mod:`formats.errors`
(the bottom layer) and re-exported here; this module adds the errors of the engine: object
stores, the metadata store, the local ledger store, offloads and reads. SDK exceptions
(botocore, sqlite3) are translated into these classes in the one module that talks to the SDK,
and never escape it. Messages never contain credentials.
"""

from __future__ import annotations

from typing import Literal

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    ChunkAuthenticationError,
    CorruptDataError,
    EmptyLedgerError,
    EntryTooLargeError,
    FormatError,
    IndexInconsistentError,
    InvalidKeyError,
    ManagedLedgerInfoError,
    OffloaderError,
    ProtobufError,
    TransformError,
    TruncatedError,
    UnsupportedVersionError,
    WrongKeyError,
)

__all__ = [
    "AccessDenied",
    "AlreadyExists",
    "BadMagicError",
    "ChecksumMismatchError",
    "ChunkAuthenticationError",
    "ConfigError",
    "ConfigSetting",
    "CorruptDataError",
    "CorruptLedgerError",
    "EmptyLedgerError",
    "EntryOutOfRange",
    "EntryTooLargeError",
    "ExportBusy",
    "ExportError",
    "ForeignObjectError",
    "FormatError",
    "IcebergConflict",
    "IcebergError",
    "IcebergSchemaError",
    "IndexInconsistentError",
    "InvalidKeyError",
    "InvalidLedgerState",
    "InvalidName",
    "InvalidStoreKey",
    "KafkaMetadataError",
    "KafkaMetadataUnavailable",
    "KeyRingError",
    "LedgerClosedError",
    "LedgerExistsError",
    "LedgerNotClosedError",
    "LedgerNotFound",
    "LedgerStoreError",
    "ManagedLedgerInfoError",
    "MetadataBusy",
    "MetadataError",
    "MetadataUnavailable",
    "MissingKeyError",
    "NamespaceNotEmpty",
    "NotFound",
    "ObjectNotFound",
    "OffloadAlreadyComplete",
    "OffloadConflict",
    "OffloadError",
    "OffloadInProgress",
    "OffloaderError",
    "PreconditionFailed",
    "ProtobufError",
    "PulsarMetadataError",
    "PulsarMetadataUnavailable",
    "ReadError",
    "RebuildRefused",
    "RemoteSegmentMismatch",
    "SchemaVersionError",
    "SegmentChangedError",
    "StoreError",
    "StoreUnavailable",
    "TopicBusy",
    "TopicOwnedElsewhere",
    "TransformError",
    "TruncatedError",
    "UnsupportedVersionError",
    "UploadNotFound",
    "VerificationError",
    "WrongKeyError",
]


#: the settings a :class:`ConfigError` can name as the one at fault
ConfigSetting = Literal["store_url", "endpoint_url", "max_block_size", "part_size"]


class ConfigError(OffloaderError):
    """Invalid settings, URLs, size or time strings.

    ``setting`` names the setting at fault when one is (``"store_url"``, ``"endpoint_url"``),
    so a front end can say where the bad value came from (an option, the environment, a
    config file) without reading the message.
    """

    def __init__(self, message: str, *, setting: ConfigSetting | None = None) -> None:
        self.setting = setting
        super().__init__(message)


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


class InvalidStoreKey(StoreError):
    """An object key that no store accepts (empty, absolute, ``..``, NUL, backslash, reserved)."""


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


class OffloadAlreadyComplete(OffloadConflict):
    """Starting an offload of a ledger whose offload is already complete."""


class InvalidLedgerState(MetadataError):
    """A ledger change its state does not allow (offloading an open ledger, closing it twice)."""


class NamespaceNotEmpty(MetadataError):
    """Deleting a namespace that still has topics."""


class MetadataBusy(MetadataError):
    """The metadata database stayed locked by another process for longer than the busy timeout."""


class SchemaVersionError(MetadataError):
    """The metadata database has a schema this version cannot use (written by a newer one)."""


class MetadataUnavailable(MetadataError):
    """The metadata server (PostgreSQL) cannot be reached, or the connection broke during a
    change: that change was rolled back or never sent (retry it)."""


class TopicOwnedElsewhere(MetadataError):
    """A broker touched the local ledgers of a topic another broker owns (producing, offloading
    or deleting them); ownership moves only by ``topics unload`` on the owner."""

    def __init__(self, topic: str, owner: str, me: str) -> None:
        super().__init__(
            f"topic {topic} is owned by broker {owner}, not by this broker ({me}): only its "
            f"owner produces to it, offloads or deletes its local ledgers (even while the owner "
            f"is down); run `offloader topics unload {topic}` on the owner's home to release it"
        )
        self.topic = topic
        self.owner = owner
        self.me = me


class PulsarMetadataError(OffloaderError):
    """A Pulsar cluster's metadata store (ZooKeeper) refused a read, lacks a node the reader
    needs, or holds a value it cannot use. The message names the path. The project never
    writes to that store."""


class PulsarMetadataUnavailable(PulsarMetadataError):
    """A Pulsar cluster's metadata store cannot be reached (or the session to it broke)."""


class KafkaMetadataError(OffloaderError):
    """A Kafka cluster's metadata (ZooKeeper znodes or a KRaft metadata log) refused a read,
    lacks what the sidecar needs, or holds a value it cannot use. The message names the path.
    The project never writes to it."""


class KafkaMetadataUnavailable(KafkaMetadataError):
    """A Kafka cluster's metadata cannot be reached (ZooKeeper down, the metadata log dir
    missing)."""


class InvalidName(OffloaderError):
    """A tenant, namespace or topic name that breaks Pulsar's naming rules."""


# --- local ledger store -------------------------------------------------------------------
class LedgerStoreError(OffloaderError):
    """The local (BookKeeper stand-in) ledger store failed."""


class LedgerClosedError(LedgerStoreError):
    """Appending to a ledger that is closed."""


class LedgerNotFound(LedgerStoreError):
    """The ledger (or its topic directory) does not exist in the local store."""


class LedgerExistsError(LedgerStoreError):
    """Creating a ledger whose id already exists for the topic."""


class LedgerNotClosedError(LedgerStoreError):
    """Reading as closed a ledger that has no valid close footer (recover it first)."""


class TopicBusy(LedgerStoreError):
    """Another process holds the topic's writer lock (:mod:`offloader.topics.lock`)."""


class CorruptLedgerError(LedgerStoreError):
    """A ledger file whose bytes are damaged where a crash cannot explain it.

    ``offset`` is the byte offset in the file where the damage was found.
    """

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None) -> None:
        self.path = path
        self.offset = offset
        where = "" if offset is None else f" at offset {offset}"
        prefix = "" if path is None else f"{path}: "
        super().__init__(f"{prefix}{message}{where}")


# --- offload and read ---------------------------------------------------------------------
class OffloadError(OffloaderError):
    """An offload attempt failed; nothing it wrote remains."""


class FramingAborted(OffloadError):
    """Raised into a store's HTTP transport, in place of the framing's own error, when a block
    of a one-request body could not be framed: not an ``OSError``, so neither the HTTP client
    nor the SDK takes it for a network error and retries; the writer then raises the framing's
    own error."""


class OffloadInProgress(OffloadError):
    """Another offload is already running for the topic (Pulsar: HTTP 409)."""


class VerificationError(OffloadError):
    """Offloaded objects do not match what the metadata recorded (size, checksums)."""


class ReadError(OffloaderError):
    """Reading entries failed."""


class RebuildRefused(OffloaderError):
    """``metadata rebuild`` would write into a metadata store that already has records
    (give ``--merge`` to add only what is missing)."""


class RemoteSegmentMismatch(ReadError):
    """A remote Kafka segment's object does not match what its record pinned at upload (a span
    CRC32C, its size, its transform), or holds batches outside the segment's offsets or the
    request's: nothing read from it is returned. The message names the topic, partition, base
    offset and object key."""


class SegmentChangedError(OffloadError):
    """A local Kafka segment shrank or changed (Kafka truncated or rewrote it) while it was being
    copied: the attempt is cleaned up and a later pass copies the segment as it is then."""


class EntryOutOfRange(ReadError):
    """The requested entry range is not inside the ledger (Pulsar: BKIncorrectParameter)."""


# --- keys (transforms: spec/transforms.md) ---------------------------------------------------
class KeyRingError(OffloaderError):
    """The key ring file cannot be read or written (missing, bad mode, malformed, bad id)."""


class MissingKeyError(KeyRingError):
    """The key ring has no key with this id (the id is named; key bytes never are)."""

    def __init__(self, key_id: str, where: str) -> None:
        self.key_id = key_id
        super().__init__(f"key {key_id!r} is not in the key ring {where}")


# --- exports to Parquet (spec/export.md) -------------------------------------------------------
class ExportError(OffloaderError):
    """An export run cannot go on (settings that changed at the same generation, a file that
    is not where the run wrote it)."""


class ExportBusy(ExportError):
    """Another process is exporting the same topic to the same target and generation."""


# --- exports to Apache Iceberg tables (spec/export.md §Iceberg) ----------------------------------
class IcebergError(ExportError):
    """An Iceberg catalog or table operation failed (pyiceberg's errors, translated in
    ``offloader/export/iceberg_catalog.py``)."""


class IcebergSchemaError(IcebergError):
    """The exported columns cannot be added to the table's schema (an incompatible change);
    ``field`` names the field at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class IcebergConflict(IcebergError):
    """Another writer kept committing to the table: the run's commit was retried on each new
    snapshot and gave up; nothing of it was committed (its files are orphans)."""
