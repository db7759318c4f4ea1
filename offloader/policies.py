"""Namespace and topic policies and the pure decisions made from them.

This module owns :class:`NamespacePolicies` (Pulsar's namespace offload fields and their
defaults), :class:`TopicPolicies` (a topic's own offload fields, applied over its namespace's
with :meth:`TopicPolicies.over`) and the algorithms that turn a topic's ledger list into work:

* :func:`select_ledgers_for_auto_offload`: the automatic size/time thresholds;
* :func:`offload_prefix_candidates`: ``offload-prefix`` up to a position;
* :func:`size_threshold_position`: ``topics offload --size-threshold``;
* :func:`ledgers_due_for_local_deletion`: the deletion lag;
* :func:`ledgers_to_trim_for_retention`: retention trimming (with our semantics below);
* :func:`retention_warnings`: retention that trims ledgers before the thresholds offload them.

Every function is pure: it takes :class:`LedgerView` values (no SQLite, no clock) and returns
ledger ids, so it can be unit- and property-tested on its own.

Retention semantics. Pulsar's retention applies to *consumed* messages (0 = delete as soon as
consumed, -1 = forever). We have no subscriptions, so retention here is a cap on what a topic
keeps: ``retention_size_bytes > 0`` keeps at most that many bytes (oldest whole ledgers are
trimmed while the topic's total, offloaded ledgers and the open ledger included, is above it);
``retention_time_seconds > 0`` trims ledgers closed more than that long ago. A value of ``0``
(not set, the default) or ``-1`` (Pulsar's "infinite") means keep forever. Like Pulsar, trimming
removes a prefix of the ledger list (it stops at the first ledger that need not go) and never the
open ledger. Trimming runs before the automatic offload, so a retention size (time) not above
the offload size (time) threshold trims ledgers the threshold never offloaded: their data is
gone from every tier. That is allowed (retention is the user's cap), but said:
:func:`retention_warnings` words it for the commands that set either policy, and ``topics
info`` lists the ledgers trimmed before their offload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from offloader.errors import ConfigError
from offloader.units import format_size

#: Pulsar's broker default ``managedLedgerOffloadDeletionLagMs`` (4 hours).
DEFAULT_DELETION_LAG_MS = 14_400_000

#: the two read priorities, with Pulsar's names (``OffloadedReadPriority``)
READ_PRIORITY_TIERED_FIRST = "tiered-storage-first"
READ_PRIORITY_BOOKKEEPER_FIRST = "bookkeeper-first"
#: the local copy (our BookKeeper stand-in) first; the same value as Pulsar's bookkeeper-first
READ_PRIORITY_LOCAL_FIRST = READ_PRIORITY_BOOKKEEPER_FIRST
#: accepted spellings of the read priority, mapped to the two canonical (Pulsar) values;
#: ``local-first`` is the name earlier versions stored and printed
READ_PRIORITY_ALIASES = {
    "tiered-storage-first": READ_PRIORITY_TIERED_FIRST,
    "bookkeeper-first": READ_PRIORITY_BOOKKEEPER_FIRST,
    "local-first": READ_PRIORITY_BOOKKEEPER_FIRST,
}

#: every integer policy must fit in a signed 64-bit integer (SQLite INTEGER, Java long)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _check_int64(name: str, value: int) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ConfigError(f"{name} {value} is out of range: it must fit in a signed 64-bit integer")


COMPRESSION_NONE = "none"
COMPRESSION_ZSTD = "zstd"
ENCRYPTION_NONE = "none"
ENCRYPTION_AES_256_GCM = "aes-256-gcm"
#: zstd levels accepted by --level (zstd's own range; negative = the fast levels)
ZSTD_LEVELS = range(-7, 23)


@dataclass(frozen=True)
class TransformPolicy:
    """How new data objects of a namespace are stored (spec/transforms.md). The identity
    (no compression, no encryption) writes Pulsar's format, byte for byte."""

    compression: str = COMPRESSION_NONE
    level: int | None = None
    encryption: str = ENCRYPTION_NONE
    key_id: str | None = None

    def __post_init__(self) -> None:
        if self.compression not in (COMPRESSION_NONE, COMPRESSION_ZSTD):
            raise ConfigError(f"compression {self.compression!r} is not one of none, zstd")
        if self.encryption not in (ENCRYPTION_NONE, ENCRYPTION_AES_256_GCM):
            raise ConfigError(f"encryption {self.encryption!r} is not one of none, aes-256-gcm")
        if self.level is not None:
            if self.compression != COMPRESSION_ZSTD:
                raise ConfigError("a compression level needs --compression zstd")
            if isinstance(self.level, bool) or self.level not in ZSTD_LEVELS:
                raise ConfigError(f"zstd level {self.level!r} is not in -7..22")
        if self.key_id is not None and self.encryption == ENCRYPTION_NONE:
            raise ConfigError("a key id needs --encryption aes-256-gcm")

    @property
    def is_identity(self) -> bool:
        return self.compression == COMPRESSION_NONE and self.encryption == ENCRYPTION_NONE

    @property
    def encrypted(self) -> bool:
        return self.encryption == ENCRYPTION_AES_256_GCM

    @property
    def zstd_level(self) -> int | None:
        """The level to compress with (3 by default), None without compression."""
        if self.compression != COMPRESSION_ZSTD:
            return None
        return 3 if self.level is None else self.level

    def describe(self) -> str:
        parts = []
        if self.compression == COMPRESSION_ZSTD:
            parts.append("zstd" if self.level is None else f"zstd(level {self.level})")
        if self.encrypted:
            parts.append(f"aes-256-gcm(key {self.key_id or 'active'})")
        return "+".join(parts) or "none"


@dataclass(frozen=True)
class NamespacePolicies:
    """A namespace's offload and retention policies, with Pulsar's defaults.

    ``offload_threshold_bytes``: negative = automatic size trigger off, 0 = offload every closed
    ledger as soon as possible, N = keep about N bytes of the newest closed ledgers local.
    ``offload_threshold_seconds``: negative = off, N = offload ledgers closed N seconds ago.
    ``offload_deletion_lag_ms``: None = the broker default (4 h), N >= 0 = delete the local copy N
    ms after the offload completed, negative = never delete local copies.
    ``read_priority``: ``tiered-storage-first`` (Pulsar's default) or ``bookkeeper-first`` (the
    local copy first; ``local-first``, the name earlier versions used, is accepted as an alias).
    Every integer must fit in a signed 64-bit integer (ConfigError otherwise).
    """

    offload_threshold_bytes: int = -1
    offload_threshold_seconds: int = -1
    offload_deletion_lag_ms: int | None = None
    retention_size_bytes: int = 0
    retention_time_seconds: int = 0
    read_priority: str = READ_PRIORITY_TIERED_FIRST
    #: the offload transform (spec/transforms.md): "none" | "zstd", level (None = default),
    #: "none" | "aes-256-gcm", and the key-encryption key id (None = the ring's active key)
    transform_compression: str = COMPRESSION_NONE
    transform_level: int | None = None
    transform_encryption: str = ENCRYPTION_NONE
    transform_key_id: str | None = None

    def __post_init__(self) -> None:
        # checks the transform fields (ConfigError)
        TransformPolicy(
            self.transform_compression,
            self.transform_level,
            self.transform_encryption,
            self.transform_key_id,
        )
        for name in (
            "offload_threshold_bytes",
            "offload_threshold_seconds",
            "retention_size_bytes",
            "retention_time_seconds",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, not {value!r}")
            _check_int64(name, value)
        lag = self.offload_deletion_lag_ms
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, int)):
            raise ConfigError(f"offload_deletion_lag_ms must be an integer or None, not {lag!r}")
        if lag is not None:
            _check_int64("offload_deletion_lag_ms", lag)
        canonical = READ_PRIORITY_ALIASES.get(str(self.read_priority).lower())
        if canonical is None:
            raise ConfigError(
                f"read priority {self.read_priority!r} is not one of "
                "tiered-storage-first, bookkeeper-first (local-first)"
            )
        object.__setattr__(self, "read_priority", canonical)

    @property
    def transform(self) -> TransformPolicy:
        """The namespace's offload transform (``is_identity`` when none is set)."""
        return TransformPolicy(
            self.transform_compression,
            self.transform_level,
            self.transform_encryption,
            self.transform_key_id,
        )

    @property
    def effective_deletion_lag_ms(self) -> int | None:
        """The lag in ms after which a local copy may go; None = never delete local copies."""
        if self.offload_deletion_lag_ms is None:
            return DEFAULT_DELETION_LAG_MS
        if self.offload_deletion_lag_ms < 0:
            return None
        return self.offload_deletion_lag_ms

    @property
    def auto_offload_enabled(self) -> bool:
        """True when at least one automatic threshold is set (>= 0)."""
        return self.offload_threshold_bytes >= 0 or self.offload_threshold_seconds >= 0

    @property
    def prefers_local(self) -> bool:
        """True for ``bookkeeper-first``: read the local copy while it exists."""
        return self.read_priority == READ_PRIORITY_BOOKKEEPER_FIRST

    def replace(self, **changes: object) -> NamespacePolicies:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


#: the policies a topic may set over its namespace's (Pulsar's topic-level ``OffloadPolicies``)
TOPIC_POLICY_FIELDS = (
    "offload_threshold_bytes",
    "offload_threshold_seconds",
    "offload_deletion_lag_ms",
    "read_priority",
)


@dataclass(frozen=True)
class TopicPolicies:
    """A topic's own offload policies (``topics set-offload-policies``): each field set here
    wins over the namespace's, which wins over the broker's (Pulsar's precedence for the
    offload thresholds, the deletion lag and the read priority). None = not set on the topic.
    Values mean what they mean in :class:`NamespacePolicies`."""

    offload_threshold_bytes: int | None = None
    offload_threshold_seconds: int | None = None
    offload_deletion_lag_ms: int | None = None
    read_priority: str | None = None

    def __post_init__(self) -> None:
        for name in TOPIC_POLICY_FIELDS[:3]:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer or None, not {value!r}")
            _check_int64(name, value)
        if self.read_priority is not None:
            canonical = READ_PRIORITY_ALIASES.get(str(self.read_priority).lower())
            if canonical is None:
                raise ConfigError(
                    f"read priority {self.read_priority!r} is not one of "
                    "tiered-storage-first, bookkeeper-first (local-first)"
                )
            object.__setattr__(self, "read_priority", canonical)

    @property
    def is_empty(self) -> bool:
        """True when the topic sets nothing (its namespace's policies apply)."""
        return all(getattr(self, name) is None for name in TOPIC_POLICY_FIELDS)

    def over(self, namespace: NamespacePolicies) -> NamespacePolicies:
        """The policies that apply to the topic: its own fields over ``namespace``'s (the
        broker's deletion lag still applies where neither sets one)."""
        changes = {
            name: getattr(self, name)
            for name in TOPIC_POLICY_FIELDS
            if getattr(self, name) is not None
        }
        return namespace.replace(**changes) if changes else namespace


@dataclass(frozen=True)
class LedgerView:
    """What the policy algorithms need to know about one ledger of a topic.

    ``closed_ms`` is None while the ledger is open (Pulsar: timestamp 0). ``offloaded_ms`` is the
    time the offload completed (Pulsar's ``offloadContext.timestamp``), None when not complete.
    """

    ledger_id: int
    entries: int
    size_bytes: int
    closed_ms: int | None
    offload_complete: bool = False
    local_deleted: bool = False
    offloaded_ms: int | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_ms is None

    @property
    def is_empty(self) -> bool:
        return self.entries <= 0 or self.size_bytes <= 0


def _ascending(ledgers: Sequence[LedgerView]) -> list[LedgerView]:
    return sorted(ledgers, key=lambda ledger: ledger.ledger_id)


def select_ledgers_for_auto_offload(
    ledgers: Sequence[LedgerView], policies: NamespacePolicies, now_ms: int
) -> list[int]:
    """Ledgers the namespace thresholds want offloaded now, oldest first (Pulsar).

    Walks newest to oldest, skipping open ledgers; ``size_summed`` adds every ledger walked,
    offloaded or not. A ledger whose offload is not complete is selected when
    ``bytes >= 0 and size_summed > bytes`` or ``secs >= 0 and now - closed >= secs * 1000``.
    Empty ledgers are never selected (there is nothing to offload).
    """
    size_limit = policies.offload_threshold_bytes
    time_limit = policies.offload_threshold_seconds
    if size_limit < 0 and time_limit < 0:
        return []
    selected: list[int] = []
    size_summed = 0
    for ledger in reversed(_ascending(ledgers)):
        if ledger.closed_ms is None:
            continue
        size_summed += ledger.size_bytes
        if ledger.offload_complete or ledger.is_empty:
            continue
        over_size = size_limit >= 0 and size_summed > size_limit
        too_old = time_limit >= 0 and now_ms - ledger.closed_ms >= time_limit * 1000
        if over_size or too_old:
            selected.append(ledger.ledger_id)
    selected.reverse()
    return selected


@dataclass(frozen=True)
class PrefixPlan:
    """What ``offload_prefix`` will do: ledgers to offload (ascending), and Pulsar's
    ``firstUnoffloaded`` position ``(first_retained_ledger_id, 0)`` (None for no ledgers)."""

    ledger_ids: list[int]
    first_retained_ledger_id: int | None


def offload_prefix_candidates(ledgers: Sequence[LedgerView], position_ledger_id: int) -> PrefixPlan:
    """Ledgers ``offload-prefix`` up to ``(position_ledger_id, entry)`` offloads (Pulsar).

    Candidates are every ledger but the last (the current one), ascending; one qualifies when its
    id is below the position's ledger, its offload is not complete and it is not empty. The walk
    stops at the first ledger at or after the position, which is the first retained ledger (the
    current ledger when the walk runs out). Open ledgers are never candidates.
    """
    ordered = _ascending(ledgers)
    if not ordered:
        return PrefixPlan([], None)
    first_retained = ordered[-1].ledger_id
    chosen: list[int] = []
    for ledger in ordered[:-1]:
        if ledger.ledger_id >= position_ledger_id:
            first_retained = ledger.ledger_id
            break
        if not ledger.offload_complete and not ledger.is_empty and not ledger.is_open:
            chosen.append(ledger.ledger_id)
    return PrefixPlan(chosen, first_retained)


def size_threshold_position(ledgers: Sequence[LedgerView], threshold_bytes: int) -> int | None:
    """The ledger id L of the position ``(L, 0)`` that ``topics offload --size-threshold`` asks
    for, or None for Pulsar's "Nothing to offload" (``findFirstLedgerWithinThreshold``).

    Walks newest to oldest, the current ledger included (its ``size_bytes`` should be the current
    ledger size), summing sizes; at the first ledger where the sum exceeds the threshold, the
    position is the start of the next newer ledger (the newest ledger itself if it alone exceeds).
    """
    ordered = _ascending(ledgers)
    if not ordered:
        return None
    suffix_size = 0
    previous = ordered[-1].ledger_id
    for ledger in reversed(ordered):
        suffix_size += ledger.size_bytes
        if suffix_size > threshold_bytes:
            return previous
        previous = ledger.ledger_id
    return None


def ledgers_due_for_local_deletion(
    ledgers: Sequence[LedgerView], lag_ms: int | None, now_ms: int
) -> list[int]:
    """Ledgers whose local copy may be deleted now, ascending (Pulsar).

    A ledger qualifies when its offload is complete, its local copy is not deleted yet, the lag is
    set (None = never) and ``now - offloaded > lag``.
    """
    if lag_ms is None or lag_ms < 0:
        return []
    due: list[int] = []
    for ledger in _ascending(ledgers):
        if not ledger.offload_complete or ledger.local_deleted or ledger.offloaded_ms is None:
            continue
        if now_ms - ledger.offloaded_ms > lag_ms:
            due.append(ledger.ledger_id)
    return due


def ledgers_to_trim_for_retention(
    ledgers: Sequence[LedgerView], policies: NamespacePolicies, now_ms: int
) -> list[int]:
    """Ledgers retention removes, oldest first (see the module docstring for the semantics).

    Walks oldest to newest over every ledger but the last (the current one) and open ones; a
    ledger goes while the total size of what remains (itself included) is above
    ``retention_size_bytes`` or it closed more than ``retention_time_seconds`` ago. The walk stops
    at the first ledger that may stay, so what is trimmed is always a prefix.
    """
    size_limit = policies.retention_size_bytes
    time_limit = policies.retention_time_seconds
    if size_limit <= 0 and time_limit <= 0:
        return []
    ordered = _ascending(ledgers)
    remaining = sum(ledger.size_bytes for ledger in ordered)
    trimmed: list[int] = []
    for ledger in ordered[:-1]:
        if ledger.closed_ms is None:
            break
        over_size = size_limit > 0 and remaining > size_limit
        expired = time_limit > 0 and now_ms - ledger.closed_ms > time_limit * 1000
        if not (over_size or expired):
            break
        trimmed.append(ledger.ledger_id)
        remaining -= ledger.size_bytes
    return trimmed


def retention_warnings(policies: NamespacePolicies) -> tuple[str, ...]:
    """What is wrong with ``policies``' retention against their automatic offload thresholds:
    a retention size not above the offload size threshold, or a retention time not above the
    offload time threshold, trims ledgers before the threshold offloads them (trimming runs
    first), so they are never offloaded. One sentence per problem; empty when there is none
    (a threshold that is off, or a retention without a limit, compares with nothing)."""
    warnings: list[str] = []
    size, size_threshold = policies.retention_size_bytes, policies.offload_threshold_bytes
    if size > 0 and size_threshold >= 0 and size <= size_threshold:
        warnings.append(
            f"retention size {format_size(size)} ({size} bytes) is not above the offload "
            f"threshold {format_size(size_threshold)} ({size_threshold} bytes): ledgers will "
            "be trimmed by retention before the threshold offloads them (never offloaded)"
        )
    seconds, time_threshold = policies.retention_time_seconds, policies.offload_threshold_seconds
    if seconds > 0 and time_threshold >= 0 and seconds <= time_threshold:
        warnings.append(
            f"retention time {seconds} s is not above the offload time threshold "
            f"{time_threshold} s: ledgers will be trimmed by retention before the threshold "
            "offloads them (never offloaded)"
        )
    return tuple(warnings)
