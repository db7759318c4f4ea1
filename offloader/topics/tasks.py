"""What happens to a topic's closed ledgers: offload, deletion lag, retention, deletion.

Functions over a :class:`~offloader.topics.managed_ledger.ManagedLedger`, each one pass over the
ledger list, deciding with the pure algorithms of :mod:`offloader.policies`:

* :func:`offload_prefix`: Pulsar's ``ManagedLedgerImpl.offloadPrefix`` by position or by
  ``--size-threshold``, in the foreground, under the topic's offload lock (a second
  request fails with :class:`OffloadInProgress` "Offload operation already running");
* :func:`auto_offload`: the namespace thresholds plus retries of failed or interrupted
  attempts after their backoff; skipped quietly while another process offloads the topic;
* :func:`delete_local_copies`: the deletion lag: verify both objects, mark
  ``local_deleted`` (CAS), *then* delete the local file;
* :func:`trim_for_retention` and :func:`delete_topic`: remove ledgers with their local files and
  the objects of every UUID they ever had (nothing orphaned);
* :func:`sweep_leftovers`: files and attempts a crash left behind.

Offload status (NOT_RUN / RUNNING / SUCCESS / ERROR with the first error) is recorded for every
run that offloads something.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from offloader.crashpoints import crash_point
from offloader.errors import (
    MetadataError,
    NotFound,
    OffloadAlreadyComplete,
    OffloadConflict,
    OffloaderError,
    OffloadError,
    OffloadInProgress,
    StoreError,
)
from offloader.logs import get_logger
from offloader.metadata.base import AttemptState, LedgerRecord, OffloadContext, TopicOffloadStatus
from offloader.offload.commit import (
    clean_attempt,
    delete_ledger_objects,
    finish_attempt,
    retry_due,
    upload_attempt,
)
from offloader.offload.manifests import LEDGERS_KIND, delete_watermarks
from offloader.offload.verification import check_offload
from offloader.policies import (
    ledgers_due_for_local_deletion,
    ledgers_to_trim_for_retention,
    offload_prefix_candidates,
    select_ledgers_for_auto_offload,
    size_threshold_position,
)
from offloader.topics.managed_ledger import ManagedLedger

log = get_logger(__name__)

ProgressCallback = Callable[[int, int], None]
HEARTBEAT_SECONDS = 5.0
#: attempt states that can leave objects behind once their ledger stops claiming them
_LEFTOVER_STATES: tuple[AttemptState, ...] = ("STARTED", "FAILED", "SUPERSEDED")


@dataclass(frozen=True)
class OffloadRun:
    """What one offload run did. ``first_retained`` is Pulsar's ``firstUnoffloaded`` ledger
    (``offload-prefix`` only); ``nothing`` means "Nothing to offload" (size threshold)."""

    ledgers: tuple[int, ...] = ()
    offloaded: tuple[int, ...] = ()
    failed: tuple[tuple[int, str], ...] = ()
    first_retained: int | None = None
    nothing: bool = False


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` (``host:pid:random``, see :func:`offloader.runtime.make_owner_id`)
    is a process of this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def offload_status(ml: ManagedLedger) -> TopicOffloadStatus:
    """The topic's offload status. A RUNNING status whose offload lock is gone, or held by a
    process of this host that died (``kill -9``) or by an owner whose heartbeat went stale, is
    reported as ERROR: that offload ended without finishing (the next run takes over)."""
    meta, name = ml.rt.meta, ml.name
    status = meta.get_offload_status(name)
    if status.status != "RUNNING":
        return status
    holder = meta.get_offload_lock(name)
    if holder is not None:
        stale = ml.rt.now_ms() - holder.heartbeat_ms > ml.rt.lock_stale_ms
        if not stale and not owner_is_dead(holder.owner):
            return status
    again = meta.get_offload_status(name)
    if again != status:  # it finished (or restarted) while we looked
        return again
    who = f" ({holder.owner})" if holder is not None else ""
    return TopicOffloadStatus(
        name,
        "ERROR",
        f"the offload process{who} ended without finishing; run offload-prefix again",
        status.updated_ms,
    )


@contextlib.contextmanager
def offload_lock(ml: ManagedLedger) -> Iterator[Callable[[], None]]:
    """Hold the topic's offload lock (metadata store, across processes); yields a heartbeat
    function. :class:`OffloadInProgress` if another owner holds it."""
    rt = ml.rt
    if not rt.meta.try_acquire_offload_lock(ml.name, rt.owner, rt.now_ms(), rt.lock_stale_ms):
        holder = rt.meta.get_offload_lock(ml.name)
        dead = holder is not None and owner_is_dead(holder.owner)
        # a holder that died on this host (kill -9) is taken over at once, not after the
        # stale timeout; a racing taker-over loses at its next heartbeat
        if not dead or not rt.meta.try_acquire_offload_lock(ml.name, rt.owner, rt.now_ms(), -1):
            raise OffloadInProgress(f"Offload operation already running for {ml.name}")
        log.warning(
            "offload lock of a dead process taken over",
            topic=ml.name,
            previous_owner=holder.owner if holder else None,
        )
    last = time.monotonic()

    def heartbeat() -> None:
        nonlocal last
        if time.monotonic() - last >= HEARTBEAT_SECONDS:
            last = time.monotonic()
            if not rt.meta.refresh_offload_lock(ml.name, rt.owner, rt.now_ms()):
                raise OffloadInProgress(f"offload lock of {ml.name} was taken over")

    try:
        yield heartbeat
    finally:
        with contextlib.suppress(MetadataError):
            rt.meta.release_offload_lock(ml.name, rt.owner)


def _offload_ledgers(
    ml: ManagedLedger,
    ledger_ids: list[int],
    heartbeat: Callable[[], None],
    progress: ProgressCallback | None,
) -> tuple[list[int], list[tuple[int, str]]]:
    """Offload ledgers one at a time, oldest first; the first error does not stop the rest.
    Each ledger's manifests and completion (``finish_attempt``) run on one thread beside, in
    ledger order, overlapping the next ledger's upload; all are done before this returns.
    Status RUNNING, then SUCCESS or ERROR (first error, by ledger id)."""
    rt = ml.rt
    if not ledger_ids:
        return [], []
    rt.meta.set_offload_status(ml.name, "RUNNING", rt.now_ms())
    records = {r.ledger_id: r for r in ml.ledgers()}
    grand_total = max(sum(records[i].size_bytes for i in ledger_ids if i in records), 1)
    offloaded: list[int] = []
    failed: list[tuple[int, str]] = []
    done_before = 0

    def outcome(ledger_id: int, step: Callable[[], object]) -> bool:
        """Run one step of a ledger's offload; False if it failed (recorded in ``failed``)."""
        try:
            step()
            return True
        except (OffloadAlreadyComplete, NotFound):
            return False  # completed by someone else, or the ledger disappeared (as Pulsar)
        except OffloadInProgress:
            raise
        except OffloaderError as exc:
            failed.append((ledger_id, f"{type(exc).__name__}: {exc}"))
            log.warning(
                "ledger offload failed", topic=ml.name, ledger_id=ledger_id, error=failed[-1][1]
            )
            return False

    # each ledger's manifests and completion (finish_attempt) on a thread of their own, in
    # ledger order, while the next ledger uploads: their small requests cost no throughput
    with ThreadPoolExecutor(1, thread_name_prefix="offload-finish") as finisher:
        finishing: list[tuple[int, Future[OffloadContext]]] = []
        for ledger_id in ledger_ids:
            record = records.get(ledger_id)
            if record is None or record.state != "CLOSED" or record.offload_complete:
                continue  # trimmed, or offloaded meanwhile
            share = record.size_bytes

            def ledger_progress(
                done: int, total: int, _base: int = done_before, _share: int = share
            ) -> None:
                heartbeat()
                if progress is not None and total > 0:
                    progress(_base + done * _share // total, grand_total)

            def upload(
                record: LedgerRecord = record, report: ProgressCallback = ledger_progress
            ) -> None:
                heartbeat()
                up = upload_attempt(rt, record, ml.managed_ledger_name, progress=report)
                finishing.append((up.ledger.ledger_id, finisher.submit(finish_attempt, rt, up)))

            outcome(ledger_id, upload)
            done_before += share
            if progress is not None:
                progress(done_before, grand_total)
        for ledger_id, future in finishing:
            if outcome(ledger_id, future.result):
                offloaded.append(ledger_id)
    failed.sort()
    if failed:
        rt.meta.set_offload_status(
            ml.name, "ERROR", rt.now_ms(), f"ledger {failed[0][0]}: {failed[0][1]}"
        )
    else:
        rt.meta.set_offload_status(ml.name, "SUCCESS", rt.now_ms())
    return offloaded, failed


def offload_prefix(
    ml: ManagedLedger,
    *,
    position: tuple[int, int] | None = None,
    size_threshold: int | None = None,
    progress: ProgressCallback | None = None,
) -> OffloadRun:
    """Offload every closed, non-empty, not yet offloaded ledger before ``position`` (or
    before the position ``size_threshold`` gives); see the module docstring."""
    if (position is None) == (size_threshold is None):
        raise OffloadError("give exactly one of a position or a size threshold")
    ml.check_owner()
    records = ml.ledgers()
    if size_threshold is not None:
        target = size_threshold_position([r.view() for r in records], size_threshold)
        if target is None:
            return OffloadRun(nothing=True)
        position = (target, 0)
    assert position is not None
    _check_position(ml, records, position)
    with offload_lock(ml) as heartbeat:
        records = ml.ledgers()  # again, under the lock (Pulsar: under the ML lock)
        plan = offload_prefix_candidates([r.view() for r in records], position[0])
        offloaded, failed = _offload_ledgers(ml, plan.ledger_ids, heartbeat, progress)
        if not plan.ledger_ids:
            ml.rt.meta.set_offload_status(ml.name, "SUCCESS", ml.rt.now_ms())
    return OffloadRun(
        tuple(plan.ledger_ids), tuple(offloaded), tuple(failed), plan.first_retained_ledger_id
    )


def _check_position(
    ml: ManagedLedger, records: list[LedgerRecord], position: tuple[int, int]
) -> None:
    """Pulsar refuses a position that is not in the topic, except ``(current ledger, 0)``."""
    ledger_id, entry_id = position
    by_id = {r.ledger_id: r for r in records}
    record = by_id.get(ledger_id)
    current = records[-1].ledger_id if records else None
    valid = record is not None and 0 <= entry_id < max(
        record.entries, 1 if (ledger_id == current) else 0
    )
    if not valid:
        raise OffloadError(f"invalid position {ledger_id}:{entry_id} for {ml.name}")


def auto_offload(ml: ManagedLedger, now_ms: int) -> OffloadRun:
    """The namespace thresholds plus due retries; nothing while another process offloads."""
    rt = ml.rt
    ml.check_owner()

    def candidates() -> list[int]:
        records = ml.ledgers()
        policies = rt.policies(ml.namespace, ml.name)
        chosen = set(select_ledgers_for_auto_offload([r.view() for r in records], policies, now_ms))
        chosen |= {
            r.ledger_id
            for r in records
            if r.state == "CLOSED" and r.offload is not None and not r.offload.complete
        }
        by_id = {r.ledger_id: r for r in records}
        return sorted(i for i in chosen if retry_due(rt, by_id[i], now_ms))

    if not candidates():
        return OffloadRun()
    try:
        with offload_lock(ml) as heartbeat:
            chosen = candidates()
            offloaded, failed = _offload_ledgers(ml, chosen, heartbeat, None)
    except OffloadInProgress:
        log.debug("auto-offload skipped: an offload is running", topic=ml.name)
        return OffloadRun()
    return OffloadRun(tuple(chosen), tuple(offloaded), tuple(failed))


def delete_local_copies(ml: ManagedLedger, now_ms: int) -> tuple[list[int], list[tuple[int, str]]]:
    """The deletion lag: ``(deleted, problems)``; a ledger whose objects fail verification
    keeps its local copy and is listed in ``problems``."""
    rt = ml.rt
    ml.check_owner()
    records = ml.ledgers()
    lag = rt.deletion_lag_ms(rt.policies(ml.namespace, ml.name))
    due = ledgers_due_for_local_deletion([r.view() for r in records], lag, now_ms)
    by_id = {r.ledger_id: r for r in records}
    deleted: list[int] = []
    problems: list[tuple[int, str]] = []
    for ledger_id in due:
        record = by_id[ledger_id]
        assert record.offload is not None
        check = check_offload(
            rt.store,
            record,
            checksums=rt.broker.verify_checksums,
            read_buffer=rt.broker.offload.read_buffer_size,
            key_ring=rt.broker.offload.key_ring,
        )
        if not check.ok:
            problems.append((ledger_id, check.problem or "verification failed"))
            log.error(
                "offloaded objects failed verification; local copy kept",
                topic=ml.name,
                ledger_id=ledger_id,
                uuid=record.offload.uuid,
                problem=check.problem,
            )
            continue
        crash_point("deletion.before_mark")
        try:
            rt.meta.mark_local_deleted(ledger_id, record.offload.uuid)
        except (OffloadConflict, NotFound, MetadataError) as exc:
            log.warning("local copy kept", topic=ml.name, ledger_id=ledger_id, error=str(exc))
            continue
        crash_point("deletion.after_mark")
        rt.ledgers.delete_ledger(ml.topic, ledger_id)
        crash_point("deletion.after_unlink")
        deleted.append(ledger_id)
        log.info(
            "local copy deleted after the deletion lag",
            topic=ml.name,
            ledger_id=ledger_id,
            uuid=record.offload.uuid,
        )
    return deleted, problems


def trim_for_retention(ml: ManagedLedger, now_ms: int) -> list[int]:
    """Retention: delete the oldest ledgers the policy no longer keeps (metadata first, then
    the local file and every object they ever had). On a topic without an owner (unloaded:
    every ledger is offloaded) any broker may trim; never on another broker's topic."""
    rt = ml.rt
    ml.check_owner(claim=False)
    records = ml.ledgers()
    policies = rt.policies(ml.namespace, ml.name)
    trimmed: list[int] = []
    for ledger_id in ledgers_to_trim_for_retention([r.view() for r in records], policies, now_ms):
        before = rt.meta.mark_ledger_deleted(ledger_id)
        if before.state == "DELETED":
            continue
        rt.ledgers.delete_ledger(ml.topic, ledger_id)
        delete_ledger_objects(rt, before, "Trimming")
        trimmed.append(ledger_id)
        if before.offload_complete or not policies.auto_offload_enabled:
            log.info("ledger trimmed by retention", topic=ml.name, ledger_id=ledger_id)
        else:  # the thresholds never offloaded it: a retention not above them (topics info)
            log.warning(
                "ledger trimmed by retention before it was offloaded",
                topic=ml.name,
                ledger_id=ledger_id,
                entries=before.entries,
            )
    return trimmed


def delete_topic(ml: ManagedLedger) -> list[LedgerRecord]:
    """Delete the topic: metadata (one transaction), local files, then every object of every
    ledger (a crash in between leaves only objects the orphan audit reports)."""
    rt = ml.rt
    ml.check_owner(claim=False)
    with ml._lock():
        records = rt.meta.delete_topic(ml.name)
        rt.ledgers.delete_topic(ml.topic)
    for record in records:
        delete_ledger_objects(rt, record, "Topic deletion")
    with contextlib.suppress(StoreError):  # else the orphan audit reports them
        delete_watermarks(rt.store, LEDGERS_KIND, ml.managed_ledger_name)
    log.info("topic deleted", topic=ml.name, ledgers=len(records))
    return records


def sweep_leftovers(ml: ManagedLedger) -> None:
    """Repair what a crash can leave: local files of ledgers that are gone or whose local copy
    was released (crash between the mark and the unlink), and objects of attempts no ledger
    claims any more (crash during trimming, a conflict, a retry's cleanup)."""
    rt = ml.rt
    files = rt.ledgers.list_ledgers(ml.topic)  # before the metadata: see ManagedLedger
    live = {r.ledger_id: r for r in ml.ledgers()}
    for ledger_id in files:
        record = live.get(ledger_id)
        if record is None or record.local_deleted:
            rt.ledgers.delete_ledger(ml.topic, ledger_id)
            log.info("leftover local ledger file deleted", topic=ml.name, ledger_id=ledger_id)
    claimed = rt.meta.claimed_uuids()
    for attempt in rt.meta.list_attempts(topic=ml.name, states=_LEFTOVER_STATES):
        if attempt.uuid in claimed:
            continue
        with contextlib.suppress(NotFound):
            record = rt.meta.get_ledger(attempt.ledger_id)
            if record.state != "DELETED" and attempt.state == "STARTED":
                continue  # superseded while running elsewhere: it cleans up after itself
        clean_attempt(
            rt,
            attempt.uuid,
            attempt.data_key,
            attempt.index_key,
            "Leftover attempt",
            topic=ml.name,
        )
