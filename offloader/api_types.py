"""The values the :class:`~offloader.api.Offloader` facade takes and returns.

Plain frozen dataclasses, no behaviour beyond parsing and printing themselves: a Pulsar
position (``ledger:entry``), the broker settings of a home, and the results of produce,
topic info, offload-prefix, reads, verification, the orphan audit and a service tick. The
CLI renders them as text or JSON. :mod:`offloader.api` re-exports every name, so callers
import them from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.metadata.base import LedgerRecord
from offloader.policies import TransformPolicy

GiB = 1024**3
_POSITION = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


@dataclass(frozen=True, order=True)
class Position:
    """A position in a topic: ``ledger_id:entry_id`` (Pulsar's message id without partition)."""

    ledger_id: int
    entry_id: int

    @classmethod
    def parse(cls, text: str) -> Position:
        match = _POSITION.match(text)
        if match is None:
            raise ConfigError(f"invalid position {text!r}: use LEDGER:ENTRY, e.g. 12:0")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


@dataclass(frozen=True)
class BrokerSettings:
    """Broker-side settings with Pulsar's defaults (CLI options or ``offloader.toml``)."""

    max_entries_per_ledger: int = 50_000
    max_ledger_size: int = 2 * GiB
    min_rollover_seconds: int = 600
    max_rollover_seconds: int = 14_400
    #: local ledger durability: "always" (fsync every append batch), "batch", "never"
    fsync: str = "always"
    offload: OffloadSettings = field(default_factory=OffloadSettings)
    #: broker default deletion lag when a namespace sets none (Pulsar: 4 h)
    default_deletion_lag_ms: int = 14_400_000
    #: objects younger than this are never treated as orphans (a running offload)
    orphan_min_age_seconds: int = 3_600
    #: a topic's offload lock is taken over when its holder's heartbeat is older than this
    offload_lock_stale_seconds: int = 300
    #: before deleting a local copy (deletion lag), read the data object back and check every
    #: block's CRC32C (and the index's); otherwise only existence and sizes (HEAD) are checked
    verify_checksums: bool = False
    #: automatic retries of a failed offload: base * 2**(failures-1) seconds, capped at max
    offload_retry_base_seconds: float = 1.0
    offload_retry_max_seconds: float = 3_600.0
    #: the service runs the orphan audit + gc at most this often
    orphan_sweep_interval_seconds: int = 3_600
    #: a shared metadata store: how long a ``service run``'s lease on cluster work (orphan
    #: audit and gc, remote retention, Kafka remote retention) lasts without renewal; another
    #: live service takes the work over once it expires
    cluster_lease_seconds: int = 60
    #: offloader.toml's [transform.namespaces]: the transform of namespaces that set none in
    #: the metadata store (spec/transforms.md)
    namespace_transforms: tuple[tuple[str, TransformPolicy], ...] = ()
    #: offloader.toml's [transform.kafka_topics]: the transform of Kafka topics that set none
    #: in the metadata store (spec/transforms.md §8)
    kafka_topic_transforms: tuple[tuple[str, TransformPolicy], ...] = ()
    #: Kafka broker log directories whose closed segments the service uploads each pass
    kafka_log_dirs: tuple[str, ...] = ()
    #: only these Kafka topics, in the one selection form of offloader.selection (None: all)
    kafka_topics: str | None = None
    #: the Kafka cluster's metadata (``zk:host:port[/chroot]``, ``kraft:<dir>``): uploads only
    #: what this broker leads, of tiered topics (None: every partition of the log dirs)
    kafka_metadata: str | None = None


@dataclass(frozen=True)
class ProduceResult:
    topic: str
    entries: int
    bytes: int
    first: Position | None
    last: Position | None
    #: ledgers closed (rolled over) while producing
    ledgers_closed: tuple[int, ...] = ()
    #: ledgers offloaded automatically (namespace thresholds) while producing
    ledgers_offloaded: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicInfo:
    topic: str
    managed_ledger_name: str
    ledgers: tuple[LedgerRecord, ...]
    entries: int
    size_bytes: int
    offloaded_size_bytes: int
    local_size_bytes: int
    #: the broker that owns the topic (shared metadata store); None: unowned, or embedded
    owner: str | None = None
    #: ledgers retention trimmed (state DELETED) before their offload completed: their entries
    #: are in no tier any more (a retention not above the offload threshold does this)
    trimmed_before_offload: tuple[LedgerRecord, ...] = ()


@dataclass(frozen=True)
class OffloadTrigger:
    """What ``offload-prefix`` did: ``position`` None means "Nothing to offload"."""

    topic: str
    position: Position | None
    ledgers: tuple[int, ...] = ()
    #: ledgers offloaded successfully / failed (ledger id -> error) when run in the foreground
    offloaded: tuple[int, ...] = ()
    failed: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class EntryRecord:
    topic: str
    ledger_id: int
    entry_id: int
    payload: bytes
    tier: Literal["local", "offloaded"]
    #: the bytes were checked before the entry was returned (a local record's CRC32C, an
    #: offloaded span's); False for offloaded objects without span CRC32Cs (see ReadHandle)
    verified: bool = True


@dataclass(frozen=True)
class VerifyResult:
    topic: str
    ledger_id: int
    uuid: str
    ok: bool
    data_size: int | None
    index_size: int | None
    checked_checksums: bool
    problem: str | None = None


@dataclass(frozen=True)
class OrphanObject:
    key: str
    size: int
    #: "superseded-attempt", "deleted-ledger", "stale-temporary" (gc deletes them);
    #: "unclaimed-uuid", "not-an-offload-key", "foreign-object", "odd-key" (left alone);
    #: Kafka's "kafka-abandoned-copy", "kafka-deleted-segment" (gc deletes them),
    #: "kafka-superseded-copy" (gc deletes it with the caller's --min-age) and
    #: "kafka-unclaimed-segment" (left alone)
    reason: str
    last_modified_ms: int | None = None
    #: provably written by this installation: gc deletes it (else it is only reported)
    deletable: bool = False


@dataclass(frozen=True)
class OrphanUpload:
    key: str
    upload_id: str
    initiated_ms: int | None = None
    #: "unfinished-upload" (an attempt of this home: gc aborts it) or "foreign-upload"
    reason: str = "unfinished-upload"
    deletable: bool = False


@dataclass(frozen=True)
class MissingObject:
    """A metadata record whose object is gone."""

    topic: str
    ledger_id: int
    uuid: str
    key: str


@dataclass(frozen=True)
class OrphanReport:
    objects: tuple[OrphanObject, ...] = ()
    uploads: tuple[OrphanUpload, ...] = ()
    missing: tuple[MissingObject, ...] = ()
    #: for gc: whether anything was removed (False with dry_run)
    removed: bool = False

    @property
    def clean(self) -> bool:
        return not (self.objects or self.uploads or self.missing)


@dataclass(frozen=True)
class TickReport:
    """What one pass of the background service did."""

    rolled_over: tuple[int, ...] = ()
    offloaded: tuple[int, ...] = ()
    offload_failures: tuple[tuple[int, str], ...] = ()
    local_deleted: tuple[int, ...] = ()
    trimmed: tuple[int, ...] = ()
    orphans_removed: int = 0
    #: ledgers whose local copy was kept because their objects failed verification
    verification_failures: tuple[tuple[int, str], ...] = ()
    #: steps that failed (``topic: error``); the tick carried on
    errors: tuple[str, ...] = ()
    #: Kafka segments copied this pass (``topic-partition@base offset``)
    kafka_uploaded: tuple[str, ...] = ()
    #: remote Kafka segments deleted by remote retention this pass (segment ids)
    kafka_deleted: tuple[str, ...] = ()


#: where an applied policy came from
PolicySource = Literal["topic", "namespace", "broker"]


@dataclass(frozen=True)
class AppliedOffloadPolicies:
    """The offload policies that apply to a topic (``get-offload-policies --applied``): each
    from the topic, else its namespace, else the broker; ``sources`` says which, per field."""

    offload_threshold_bytes: int
    offload_threshold_seconds: int
    #: None: local copies are never deleted
    offload_deletion_lag_ms: int | None
    read_priority: str
    sources: dict[str, PolicySource] = field(default_factory=dict)
