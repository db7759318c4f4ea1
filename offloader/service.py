"""The background service: one pass (tick) over every topic, and the loop around it.

A tick does, per topic: rollover by age (and repair of a tail a crash left), retention trim,
auto-offload (namespace thresholds, evaluated with Pulsar's algorithm, plus retries of failed
or interrupted offloads after their backoff), the deletion lag (verify, mark, delete), and the
leftover sweep; then, at most every ``orphan_sweep_interval_seconds``, the orphan audit with
garbage collection (objects older than ``orphan_min_age_seconds`` only).

On a shared metadata store (several brokers) a tick first renews this broker's heartbeat, then
does the per-topic steps only for the topics this broker owns (their local ledgers are in its
home); topics with no owner (unloaded: everything offloaded) get their retention from the
service holding the ``remote-retention`` lease, and the orphan audit and gc run only in the
service holding the ``orphan-gc`` lease (:mod:`offloader.metadata.cluster_base`): one live
service at a time, another once the lease expires. ``should_stop`` is
polled between steps, so a SIGTERM stops the service at the next step boundary; a step that
fails is logged and the tick carries on with the next topic. With metrics on, the end of a
tick publishes every topic's offload lag and deletion backlog and the pass's byte rates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from offloader.errors import NotFound, OffloaderError, TopicBusy
from offloader.logs import get_logger
from offloader.metadata.cluster_base import LEASE_ORPHANS, LEASE_RETENTION, TopicOwner
from offloader.metrics import TopicLag, deletion_backlog, offload_lag
from offloader.offload.orphans import collect_garbage, find_orphans
from offloader.runtime import Runtime
from offloader.topics import tasks as topic_tasks
from offloader.topics.managed_ledger import ManagedLedger

log = get_logger(__name__)

StopCheck = Callable[[], bool]


@dataclass
class TickWork:
    """Mutable accumulator of one tick (the API turns it into a TickReport)."""

    rolled_over: list[int] = field(default_factory=list)
    offloaded: list[int] = field(default_factory=list)
    offload_failures: list[tuple[int, str]] = field(default_factory=list)
    local_deleted: list[int] = field(default_factory=list)
    verification_failures: list[tuple[int, str]] = field(default_factory=list)
    trimmed: list[int] = field(default_factory=list)
    orphans_removed: int = 0
    #: topics skipped because another broker owns them (shared store)
    foreign_topics: list[str] = field(default_factory=list)
    #: the leases this tick held (shared store)
    leases: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class ServiceState:
    """What survives between ticks of one service: when the last orphan sweep ran."""

    last_orphan_sweep: float | None = None


def after_rollover(ml: ManagedLedger, work: TickWork, now_ms: int) -> None:
    """Pulsar's ``ledgerClosed`` housekeeping: trim, deletion lag, then maybe-offload."""
    work.trimmed += topic_tasks.trim_for_retention(ml, now_ms)
    deleted, problems = topic_tasks.delete_local_copies(ml, now_ms)
    work.local_deleted += deleted
    work.verification_failures += problems
    run = topic_tasks.auto_offload(ml, now_ms)
    work.offloaded += run.offloaded
    work.offload_failures += run.failed


def topic_pass(ml: ManagedLedger, work: TickWork, should_stop: StopCheck) -> None:
    """Every step for one topic, stopping early if asked."""
    now_ms = ml.rt.now_ms()
    try:
        closed = ml.roll_over(only_if_due=True, timeout=0)
        if closed is not None:
            work.rolled_over.append(closed)
    except TopicBusy:
        log.debug("rollover skipped: the topic is being written", topic=ml.name)
    steps: list[Callable[[], None]] = [
        lambda: work.trimmed.extend(topic_tasks.trim_for_retention(ml, now_ms)),
        lambda: _offload(ml, work, now_ms),
        lambda: _deletion_lag(ml, work, now_ms),
        lambda: topic_tasks.sweep_leftovers(ml),
    ]
    for step in steps:
        if should_stop():
            return
        step()


def _offload(ml: ManagedLedger, work: TickWork, now_ms: int) -> None:
    run = topic_tasks.auto_offload(ml, now_ms)
    work.offloaded += run.offloaded
    work.offload_failures += run.failed


def _deletion_lag(ml: ManagedLedger, work: TickWork, now_ms: int) -> None:
    deleted, problems = topic_tasks.delete_local_copies(ml, now_ms)
    work.local_deleted += deleted
    work.verification_failures += problems


def holds_lease(rt: Runtime, name: str, work: TickWork) -> bool:
    """Take or renew the cluster lease ``name`` for this service (always held on the embedded
    store, which one broker uses)."""
    ttl_ms = rt.broker.cluster_lease_seconds * 1000
    if rt.cluster.try_acquire_lease(name, rt.owner, rt.now_ms(), ttl_ms):
        if rt.cluster.shared:
            work.leases.append(name)
        return True
    return False


def _unowned_retention(ml: ManagedLedger, work: TickWork) -> None:
    work.trimmed.extend(topic_tasks.trim_for_retention(ml, ml.rt.now_ms()))


def tick(rt: Runtime, state: ServiceState, should_stop: StopCheck | None = None) -> TickWork:
    """One pass over every topic this broker owns, then (when due) the orphan sweep."""
    stop = should_stop or (lambda: False)
    work = TickWork()
    owners: dict[str, TopicOwner] = {}
    if rt.cluster.shared:
        rt.cluster.broker_heartbeat(rt.me, rt.now_ms())
        owners = rt.cluster.list_topic_owners()
    retention_lease: bool | None = None
    for topic in rt.meta.list_topics():
        if stop():
            return work
        ml = ManagedLedger(rt, topic.name)
        owner = owners.get(topic.name)
        try:
            if not rt.cluster.shared or (owner is not None and owner.broker_id == rt.me):
                topic_pass(ml, work, stop)
            elif owner is not None:
                work.foreign_topics.append(topic.name)
            else:
                if retention_lease is None:
                    retention_lease = holds_lease(rt, LEASE_RETENTION, work)
                if retention_lease:
                    _unowned_retention(ml, work)
        except NotFound:
            continue  # deleted while we worked on it
        except OffloaderError as exc:
            work.errors.append(f"{topic.name}: {type(exc).__name__}: {exc}")
            log.error("service step failed", topic=topic.name, error=str(exc))
    publish_lags(rt)
    interval = rt.broker.orphan_sweep_interval_seconds
    due = state.last_orphan_sweep is None or (
        time.monotonic() - state.last_orphan_sweep >= interval
    )
    # the lease is renewed every tick by its holder, so it moves only when that service stops
    if not stop() and holds_lease(rt, LEASE_ORPHANS, work) and due:
        try:
            audit = find_orphans(rt, rt.broker.orphan_min_age_seconds * 1000)
            work.orphans_removed = collect_garbage(rt, audit, dry_run=False)
            state.last_orphan_sweep = time.monotonic()
        except OffloaderError as exc:
            work.errors.append(f"orphan sweep: {type(exc).__name__}: {exc}")
            log.error("orphan sweep failed", error=str(exc))
    return work


def topic_lag(ml: ManagedLedger, now_ms: int) -> TopicLag:
    """The topic's offload lag and deletion backlog (:mod:`offloader.metrics.lag`)."""
    records = ml.ledgers()
    views = [r.view() for r in records]
    policies = ml.rt.policies(ml.namespace, ml.name)
    incomplete = {
        r.ledger_id
        for r in records
        if r.state == "CLOSED" and r.offload is not None and not r.offload.complete
    }
    pending = offload_lag(views, policies, now_ms, incomplete)
    backlog = deletion_backlog(views, ml.rt.deletion_lag_ms(policies), now_ms)
    return TopicLag(pending.count, pending.bytes, backlog.count, backlog.bytes)


def publish_lags(rt: Runtime) -> None:
    """Every topic's lag into ``rt.metrics`` (nothing is read when metrics are off); then the
    byte rates of the pass."""
    if not rt.metrics.enabled:
        return
    lags: dict[str, TopicLag] = {}
    now_ms = rt.now_ms()
    try:
        for topic in rt.meta.list_topics():
            try:
                lags[topic.name] = topic_lag(ManagedLedger(rt, topic.name), now_ms)
            except NotFound:
                continue
    except OffloaderError as exc:
        log.warning("offload lag not computed", error=str(exc))
        return
    rt.metrics.set_topic_lags(lags)
    rt.metrics.refresh_rates()


def run(
    once_tick: Callable[[], object],
    *,
    interval_seconds: float,
    once: bool,
    should_stop: StopCheck,
    poll_seconds: float = 0.2,
) -> None:
    """Call ``once_tick`` every ``interval_seconds`` until ``should_stop`` (polled while
    waiting) or after one tick with ``once``."""
    while not should_stop():
        started = time.monotonic()
        once_tick()
        if once:
            return
        while not should_stop():
            left = interval_seconds - (time.monotonic() - started)
            if left <= 0:
                break
            time.sleep(min(poll_seconds, left))
