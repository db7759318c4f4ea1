"""The background service: one pass (tick) over every topic, and the loop around it.

A tick does, per topic: rollover by age (and repair of a tail a crash left), retention trim,
auto-offload (namespace thresholds, evaluated with Pulsar's algorithm, plus retries of failed
or interrupted offloads after their backoff), the deletion lag (verify, mark, delete), and the
leftover sweep; then, at most every ``orphan_sweep_interval_seconds``, the orphan audit with
garbage collection (objects older than ``orphan_min_age_seconds`` only). ``should_stop`` is
polled between steps, so a SIGTERM stops the service at the next step boundary; a step that
fails is logged and the tick carries on with the next topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from offloader.errors import NotFound, OffloaderError, TopicBusy
from offloader.logs import get_logger
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


def tick(rt: Runtime, state: ServiceState, should_stop: StopCheck | None = None) -> TickWork:
    """One pass over every topic, then (when due) the orphan sweep."""
    stop = should_stop or (lambda: False)
    work = TickWork()
    for topic in rt.meta.list_topics():
        if stop():
            return work
        ml = ManagedLedger(rt, topic.name)
        try:
            topic_pass(ml, work, stop)
        except NotFound:
            continue  # deleted while we worked on it
        except OffloaderError as exc:
            work.errors.append(f"{topic.name}: {type(exc).__name__}: {exc}")
            log.error("service step failed", topic=topic.name, error=str(exc))
    interval = rt.broker.orphan_sweep_interval_seconds
    due = state.last_orphan_sweep is None or (
        time.monotonic() - state.last_orphan_sweep >= interval
    )
    if due and not stop():
        try:
            audit = find_orphans(rt, rt.broker.orphan_min_age_seconds * 1000)
            work.orphans_removed = collect_garbage(rt, audit, dry_run=False)
            state.last_orphan_sweep = time.monotonic()
        except OffloaderError as exc:
            work.errors.append(f"orphan sweep: {type(exc).__name__}: {exc}")
            log.error("orphan sweep failed", error=str(exc))
    return work


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
