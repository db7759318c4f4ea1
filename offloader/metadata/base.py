"""The MetadataStore Protocol and its records: what the offloader remembers, durably.

This module owns the metadata model (Pulsar's ``ManagedLedgerInfo`` and namespace policies):
namespaces and their :class:`~offloader.policies.NamespacePolicies`, topics, ledgers (Pulsar's
``LedgerInfo``), each ledger's current :class:`OffloadContext`, every :class:`OffloadAttempt`
ever made (for the orphan audit), a topic's ``offload-status`` and the per-topic "offload
running" lock.

Rules every backend follows (the contract suite in ``tests/metadata`` checks them):

* every state change is one transaction; read-modify-write changes (id allocation, the
  compare-and-set on offload UUIDs, lock takeover) are atomic across processes;
* the store never reads a clock: callers pass times as ``*_ms`` (milliseconds since the epoch);
* errors are only :class:`~offloader.errors.MetadataError` subclasses (``NotFound``,
  ``AlreadyExists``, ``OffloadConflict``, ``InvalidLedgerState``, ...);
* names arrive validated: namespaces ``tenant/ns``, topics ``persistent://tenant/ns/topic``.

The offload lifecycle (the commit protocol): ``begin_offload`` makes the UUID, driver metadata
and object keys durable before any upload and hands back the previous incomplete attempt so its
objects can be deleted; ``complete_offload`` is a compare-and-set on the UUID;
``mark_local_deleted`` (also CAS) records that the local copy may go. An object is claimed when
its UUID is the offload context of a ledger that is not deleted
(:meth:`MetadataStore.claimed_uuids`); anything else in the bucket is an orphan once it is
older than a running offload could be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from offloader.errors import InvalidName
from offloader.policies import LedgerView, NamespacePolicies, TopicPolicies

LedgerState = Literal["OPEN", "CLOSED", "DELETED"]
AttemptState = Literal["STARTED", "COMPLETED", "FAILED", "SUPERSEDED", "CLEANED"]
OffloadStatusValue = Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]

LEDGER_STATES: tuple[LedgerState, ...] = ("OPEN", "CLOSED", "DELETED")
ATTEMPT_STATES: tuple[AttemptState, ...] = (
    "STARTED",
    "COMPLETED",
    "FAILED",
    "SUPERSEDED",
    "CLEANED",
)
OFFLOAD_STATUSES: tuple[OffloadStatusValue, ...] = ("NOT_RUN", "RUNNING", "SUCCESS", "ERROR")

#: conventional keys of :attr:`DriverMetadata.properties`: ours, and Pulsar's (its tiered-storage
#: configuration records ``managedLedgerOffloadDriver``, bucket, region, ``serviceEndpoint``;
#: older brokers ``endpoint``), so each side reads the other's offload contexts
DRIVER_STORE_URL = "store_url"
DRIVER_BUCKET = "bucket"
DRIVER_REGION = "region"
DRIVER_ENDPOINT = "endpoint"
DRIVER_PROVIDER = "managedLedgerOffloadDriver"
DRIVER_SERVICE_ENDPOINT = "serviceEndpoint"


def namespace_of_topic(topic: str) -> str:
    """``tenant/ns`` of ``persistent://tenant/ns/topic`` (names arrive validated; this only
    refuses what cannot be a topic name at all)."""
    scheme, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or scheme not in ("persistent", "non-persistent") or len(parts) < 3:
        raise InvalidName(f"not a full topic name: {topic!r} (persistent://tenant/ns/topic)")
    if not all(parts):
        raise InvalidName(f"topic name {topic!r} has an empty part")
    return f"{parts[0]}/{parts[1]}"


@dataclass(frozen=True)
class NamespaceRecord:
    name: str
    policies: NamespacePolicies
    created_ms: int


@dataclass(frozen=True)
class TopicRecord:
    name: str
    namespace: str
    created_ms: int


@dataclass(frozen=True)
class DriverMetadata:
    """Where an offload's objects live (Pulsar's ``OffloadDriverMetadata``: name + properties).

    ``name`` is the driver (``aws-s3``, ``google-cloud-storage``, ``azureblob``, ``file``);
    ``properties`` holds ``store_url``, ``bucket`` (an Azure container), ``region`` and
    ``endpoint`` (empty strings when unset), never credentials.
    """

    name: str
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OffloadContext:
    """A ledger's current offload (Pulsar's ``OffloadContext``), joined with its attempt.

    ``timestamp_ms`` is the completion time (None until complete); sizes and checksums are known
    once complete. ``data_key``/``index_key`` are the object keys relative to the store's root.
    """

    uuid: str
    complete: bool
    local_deleted: bool
    timestamp_ms: int | None
    driver: DriverMetadata
    data_key: str
    index_key: str
    data_size: int | None = None
    index_size: int | None = None
    block_crc32c: tuple[int, ...] = ()
    index_crc32c: int | None = None


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger of a topic (Pulsar's ``LedgerInfo``); ``closed_ms`` is None while open."""

    ledger_id: int
    topic: str
    entries: int
    size_bytes: int
    created_ms: int
    closed_ms: int | None
    state: LedgerState
    offload: OffloadContext | None = None

    @property
    def offload_complete(self) -> bool:
        return self.offload is not None and self.offload.complete

    @property
    def local_deleted(self) -> bool:
        return self.offload is not None and self.offload.local_deleted

    def view(self) -> LedgerView:
        """The ledger as the pure policy functions see it."""
        offload = self.offload
        return LedgerView(
            ledger_id=self.ledger_id,
            entries=self.entries,
            size_bytes=self.size_bytes,
            closed_ms=self.closed_ms,
            offload_complete=self.offload_complete,
            local_deleted=self.local_deleted,
            offloaded_ms=offload.timestamp_ms if offload is not None else None,
        )


@dataclass(frozen=True)
class OffloadAttempt:
    """One offload attempt, kept forever (``CLEANED`` once its objects are known deleted)."""

    uuid: str
    ledger_id: int
    topic: str
    state: AttemptState
    started_ms: int
    finished_ms: int | None
    error: str | None
    driver: DriverMetadata
    data_key: str
    index_key: str


@dataclass(frozen=True)
class TopicOffloadStatus:
    """``offload-status`` of a topic: NOT_RUN until an offload was requested."""

    topic: str
    status: OffloadStatusValue
    last_error: str | None = None
    updated_ms: int | None = None


@dataclass(frozen=True)
class OffloadLock:
    """Who holds a topic's "offload running" lock, and their last heartbeat."""

    topic: str
    owner: str
    acquired_ms: int
    heartbeat_ms: int


@runtime_checkable
class MetadataStore(Protocol):
    """Durable metadata shared by the CLI and the service (several processes, one machine)."""

    # --- namespaces -----------------------------------------------------------------------
    def create_namespace(
        self, name: str, now_ms: int, policies: NamespacePolicies | None = None
    ) -> NamespaceRecord:
        """Create ``tenant/ns`` (default policies unless given); AlreadyExists if present."""
        ...

    def get_namespace(self, name: str) -> NamespaceRecord:
        """The namespace; NotFound if absent."""
        ...

    def list_namespaces(self, tenant: str | None = None) -> list[NamespaceRecord]:
        """Every namespace (of ``tenant`` if given), sorted by name."""
        ...

    def set_policies(self, name: str, policies: NamespacePolicies) -> NamespaceRecord:
        """Replace the namespace's policies (use ``policies.replace(...)`` to change one)."""
        ...

    def delete_namespace(self, name: str) -> None:
        """Delete an empty namespace; NamespaceNotEmpty while it has topics, NotFound if absent."""
        ...

    # --- topics ---------------------------------------------------------------------------
    def create_topic(self, name: str, now_ms: int) -> TopicRecord:
        """Create ``persistent://tenant/ns/topic``; its namespace must exist (NotFound)."""
        ...

    def ensure_topic(self, name: str, now_ms: int) -> TopicRecord:
        """The topic, created first if absent (its namespace must exist)."""
        ...

    def get_topic(self, name: str) -> TopicRecord:
        """The topic; NotFound if absent."""
        ...

    def list_topics(self, namespace: str | None = None) -> list[TopicRecord]:
        """Every topic (of ``namespace`` if given), sorted by name."""
        ...

    def delete_topic(self, name: str) -> list[LedgerRecord]:
        """Delete the topic with its ledgers, status and lock in one transaction; returns its
        ledger records (deleted ones included) so the caller can delete local data and objects.
        Attempts stay in the history."""
        ...

    # --- topic policies -------------------------------------------------------------------
    def get_topic_policies(self, name: str) -> TopicPolicies:
        """The topic's own offload policies (every field None when it sets none); NotFound if
        the topic is absent."""
        ...

    def set_topic_policies(self, name: str, policies: TopicPolicies) -> TopicPolicies:
        """Replace the topic's own offload policies (all None removes them); NotFound if the
        topic is absent. They go with the topic when it is deleted."""
        ...

    # --- ledgers --------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        """A new ledger id: global, monotonic, never handed out twice, even across processes."""
        ...

    def add_ledger(self, topic: str, ledger_id: int, created_ms: int) -> LedgerRecord:
        """Append an OPEN, empty ledger to the topic. Its id must be above every ledger id of
        the topic (InvalidLedgerState) and unused (AlreadyExists)."""
        ...

    def update_ledger_stats(self, ledger_id: int, entries: int, size_bytes: int) -> LedgerRecord:
        """Record an OPEN ledger's entry count and size so far."""
        ...

    def close_ledger(
        self, ledger_id: int, closed_ms: int, entries: int, size_bytes: int
    ) -> LedgerRecord:
        """OPEN -> CLOSED with final stats; repeating the same close is a no-op."""
        ...

    def get_ledger(self, ledger_id: int) -> LedgerRecord:
        """The ledger (any state); NotFound if absent."""
        ...

    def list_ledgers(self, topic: str, *, include_deleted: bool = False) -> list[LedgerRecord]:
        """The topic's ledgers by ascending id; NotFound if the topic does not exist."""
        ...

    def mark_ledger_deleted(self, ledger_id: int) -> LedgerRecord:
        """State DELETED (trimmed); its offload UUID stops being claimed. Returns the record as
        it was before, so the caller can delete the local copy and the objects."""
        ...

    # --- offload lifecycle ----------------------------------------------------------------
    def begin_offload(
        self,
        ledger_id: int,
        uuid: str,
        driver: DriverMetadata,
        now_ms: int,
        *,
        data_key: str,
        index_key: str,
    ) -> OffloadContext | None:
        """Record a STARTED attempt and make it the ledger's (incomplete) offload context, before
        any upload. Returns the previous incomplete context, whose attempt becomes SUPERSEDED
        (unless FAILED), so the caller deletes its objects. OffloadAlreadyComplete if the
        ledger is offloaded; InvalidLedgerState unless CLOSED; AlreadyExists for a reused uuid."""
        ...

    def complete_offload(
        self,
        ledger_id: int,
        uuid: str,
        now_ms: int,
        *,
        data_size: int,
        index_size: int,
        block_crc32c: Sequence[int] = (),
        index_crc32c: int | None = None,
    ) -> OffloadContext:
        """Compare-and-set: if ``uuid`` is still the ledger's offload, mark it complete at
        ``now_ms`` with sizes and checksums (the attempt COMPLETED; repeating is a no-op).
        Otherwise (newer attempt, ledger deleted or gone) the attempt becomes SUPERSEDED and
        OffloadConflict is raised: the caller deletes this attempt's objects."""
        ...

    def record_index_rewrite(self, uuid: str, index_size: int, index_crc32c: int) -> None:
        """A completed attempt's index object was rewritten in place (``objects rekey``):
        record its new size and CRC32C (NotFound if ``uuid`` is no completed attempt)."""
        ...

    def fail_offload(self, ledger_id: int, uuid: str, now_ms: int, error: str) -> None:
        """Mark a STARTED attempt FAILED with its error. The ledger keeps pointing at it (as
        Pulsar does) so the next ``begin_offload`` returns it for cleanup. OffloadConflict if
        the attempt already completed."""
        ...

    def mark_local_deleted(self, ledger_id: int, uuid: str) -> LedgerRecord:
        """Compare-and-set on ``uuid``: the offload is complete and the local copy may go now.
        OffloadConflict if ``uuid`` is not the ledger's offload; InvalidLedgerState if it is
        not complete. Idempotent."""
        ...

    def get_attempt(self, uuid: str) -> OffloadAttempt:
        """One attempt; NotFound if absent."""
        ...

    def list_attempts(
        self,
        *,
        ledger_id: int | None = None,
        topic: str | None = None,
        states: Sequence[AttemptState] | None = None,
    ) -> list[OffloadAttempt]:
        """Attempts in the order they began, optionally filtered."""
        ...

    def mark_attempt_cleaned(self, uuid: str, now_ms: int) -> OffloadAttempt:
        """The attempt's objects are deleted: state CLEANED. OffloadConflict if a live ledger
        still claims the uuid."""
        ...

    def claimed_offloads(self) -> list[LedgerRecord]:
        """Every ledger that is not DELETED and has an offload context (complete or not)."""
        ...

    def claimed_uuids(self) -> frozenset[str]:
        """The UUIDs of :meth:`claimed_offloads`: objects with any other UUID are orphans."""
        ...

    # --- offload status and the per-topic lock --------------------------------------------
    def set_offload_status(
        self, topic: str, status: OffloadStatusValue, now_ms: int, error: str | None = None
    ) -> None:
        """Record the topic's offload status (and last error for ERROR)."""
        ...

    def get_offload_status(self, topic: str) -> TopicOffloadStatus:
        """The topic's status; NOT_RUN if none was recorded; NotFound for an unknown topic."""
        ...

    def try_acquire_offload_lock(
        self, topic: str, owner: str, now_ms: int, stale_after_ms: int
    ) -> bool:
        """Take the topic's offload lock: True if free, already ours (heartbeat refreshed), or
        held by someone whose last heartbeat is more than ``stale_after_ms`` old (taken over).
        False while another owner holds it (Pulsar: "Offload operation already running")."""
        ...

    def refresh_offload_lock(self, topic: str, owner: str, now_ms: int) -> bool:
        """Heartbeat; False if ``owner`` no longer holds the lock (it was taken over)."""
        ...

    def release_offload_lock(self, topic: str, owner: str) -> bool:
        """Release if ``owner`` holds it; False otherwise (nothing changes)."""
        ...

    def get_offload_lock(self, topic: str) -> OffloadLock | None:
        """The current holder, if any."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """One write transaction for every change the body makes (for many records at once:
        one commit instead of one per call). Each change is still all or nothing on its own
        (a savepoint: one that raises is undone alone and the body may go on); everything is
        committed at the end, or rolled back if the body raises. Reads inside see the batch's
        changes; other threads wait for its end; a batch inside a batch joins it."""
        ...

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        ...
