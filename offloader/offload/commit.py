"""Offloading one ledger (the commit protocol) and deleting what an offload wrote.

:func:`offload_one` runs one attempt, Pulsar's ``offloadLoop`` body:

1. a fresh UUID4 is made durable with ``begin_offload`` *before* any upload; the previous
   incomplete attempt it hands back has its objects (and any multipart upload it left) deleted,
   and is then marked CLEANED;
2. the writer uploads the data object and the index (it deletes everything it wrote on failure);
3. the completion marker is PUT, then the managed ledger's watermark object is advanced
   (:mod:`offloader.offload.manifests`, spec/bucket-manifests.md): from here on the bucket
   alone says the attempt is finished, and ``offloader metadata rebuild`` can recreate it;
4. ``complete_offload`` is the compare-and-set on the UUID. On :class:`OffloadConflict` (a newer
   attempt, or the ledger was trimmed meanwhile) our new objects are deleted. On any other
   metadata error the outcome is uncertain and nothing is deleted (as Pulsar): the orphan audit
   finds the objects if the completion was lost.

Pulsar's offloader statistics are recorded into ``rt.metrics``: entry bytes of each completed
offload, offload errors (and write-to-storage errors when the object store failed), the time
spent reading the local ledger, and every deletion of offloaded objects.

A failed upload is recorded with ``fail_offload``; the ledger keeps pointing at the failed
attempt so the next ``begin_offload`` returns it for cleanup, and :func:`retry_due` decides
when the automatic paths may try again (bounded exponential backoff).

:func:`delete_ledger_objects` removes the objects of *every* UUID a ledger ever had (its
current context and its attempt history): retention trimming and topic deletion call it.
Every deletion of an attempt's objects deletes its completion marker first.
"""

from __future__ import annotations

import contextlib
import uuid as uuidlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from formats.extension import crc32c
from formats.keys import data_key, index_key, parse_key
from formats.manifest import LedgerMarker
from offloader.crashpoints import crash_point
from offloader.errors import (
    InvalidKeyError,
    InvalidName,
    MetadataError,
    NotFound,
    OffloadConflict,
    StoreError,
)
from offloader.logs import get_logger
from offloader.metadata.base import LedgerRecord, OffloadAttempt, OffloadContext
from offloader.naming import TopicName
from offloader.offload.manifests import (
    LEDGERS_KIND,
    advance_watermark,
    delete_ledger_markers,
    transform_token,
    write_ledger_marker,
)
from offloader.offload.timed_reader import timed_reader
from offloader.offload.transformed import WriteTransform, resolve_write_transform
from offloader.offload.writer import OffloadResult, offload_ledger
from offloader.runtime import Runtime

__all__ = [
    "Uploaded",
    "clean_attempt",
    "delete_ledger_objects",
    "delete_objects",
    "finish_attempt",
    "managed_ledger_of",
    "offload_one",
    "retry_delay_ms",
    "retry_due",
    "upload_attempt",
]

log = get_logger(__name__)

ProgressCallback = Callable[[int, int], None]


def managed_ledger_of(topic: str) -> str | None:
    """The managed-ledger name of ``topic`` (None for no or a malformed name)."""
    if not topic:
        return None
    try:
        return TopicName.parse(topic).managed_ledger_name
    except InvalidName:
        return None


def delete_objects(
    rt: Runtime, data: str, index: str, *, managed_ledger_name: str | None = None
) -> None:
    """Delete an attempt's completion marker (first, when the managed ledger is known), its
    data and index objects, and abort any multipart upload of its data key (a crash mid-upload
    leaves one). Missing objects are fine."""
    if managed_ledger_name is not None:
        with contextlib.suppress(InvalidKeyError):
            parsed = parse_key(data)
            delete_ledger_markers(rt.store, managed_ledger_name, parsed.ledger_id, parsed.uuid)
    for upload in rt.store.list_multipart_uploads(prefix=data):
        if upload.key == data:
            rt.store.abort_multipart_upload(upload.key, upload.upload_id)
    rt.store.delete(index)
    crash_point("cleanup.between_deletes")
    rt.store.delete(data)


def clean_attempt(
    rt: Runtime, attempt_uuid: str, data: str, index: str, reason: str, *, topic: str = ""
) -> bool:
    """Delete an attempt's objects and mark it CLEANED; False (logged) if deleting failed.
    Recorded as Pulsar's ``delete_offload_ops`` of ``topic`` (succeed or failed)."""
    try:
        delete_objects(rt, data, index, managed_ledger_name=managed_ledger_of(topic))
    except StoreError as exc:
        rt.metrics.record_delete_offload_ops(topic, False)
        log.warning(
            "could not delete offloaded objects; the orphan audit will find them",
            uuid=attempt_uuid,
            reason=reason,
            error=str(exc),
        )
        return False
    rt.metrics.record_delete_offload_ops(topic, True)
    with contextlib.suppress(OffloadConflict, NotFound):
        rt.meta.mark_attempt_cleaned(attempt_uuid, rt.now_ms())
    log.info("offloaded objects deleted", uuid=attempt_uuid, reason=reason)
    return True


def write_transform_for(rt: Runtime, topic: str) -> WriteTransform | None:
    """The transform the topic's namespace policy asks for (None: a plain Pulsar object).
    Kafka topics get their per-topic policy here later (a TransformPolicy per topic)."""
    namespace = str(TopicName.parse(topic).namespace_name)
    settings = rt.broker.offload
    policy = rt.policies(namespace).transform
    if policy.is_identity:  # none set in the metadata store: offloader.toml's, if any
        policy = dict(rt.broker.namespace_transforms).get(namespace, policy)
    return resolve_write_transform(policy, settings.key_ring, settings.transform_chunk_size)


@dataclass(frozen=True)
class Uploaded:
    """An attempt whose data object and index are in the store (:func:`upload_attempt`):
    what :func:`finish_attempt` needs to write its manifests and complete it."""

    ledger: LedgerRecord
    managed_ledger_name: str
    attempt: str
    result: OffloadResult
    index_crc32c: int
    transform: str


def offload_one(
    rt: Runtime,
    ledger: LedgerRecord,
    managed_ledger_name: str,
    *,
    progress: ProgressCallback | None = None,
) -> OffloadContext:
    """Offload one closed ledger with the commit protocol; returns the completed context.

    Raises what the attempt failed with (after recording it with ``fail_offload``), or
    :class:`OffloadConflict` if the compare-and-set lost (our objects are deleted then)."""
    return finish_attempt(rt, upload_attempt(rt, ledger, managed_ledger_name, progress=progress))


def _failed(rt: Runtime, ledger: LedgerRecord, attempt: str, name: str, exc: BaseException) -> None:
    """Record a failed attempt (``fail_offload``, the error metrics) and, unless the process
    is being interrupted, delete what it wrote."""
    ledger_id = ledger.ledger_id
    error = f"{type(exc).__name__}: {exc}"
    rt.metrics.record_offload_error(ledger.topic)
    if isinstance(exc, StoreError):
        rt.metrics.record_write_to_storage_error(ledger.topic)
    with contextlib.suppress(MetadataError):
        rt.meta.fail_offload(ledger_id, attempt, rt.now_ms(), error)
    if isinstance(exc, Exception):
        # the writer deletes what it wrote on failure; this also covers a failed index GET
        with contextlib.suppress(StoreError):
            delete_objects(
                rt,
                data_key(attempt, ledger_id),
                index_key(attempt, ledger_id),
                managed_ledger_name=name,
            )


def upload_attempt(
    rt: Runtime,
    ledger: LedgerRecord,
    managed_ledger_name: str,
    *,
    progress: ProgressCallback | None = None,
) -> Uploaded:
    """Steps 1 and 2 of the protocol: the attempt made durable, then its data object and
    index uploaded. Raises what it failed with (recorded, its objects deleted)."""
    ledger_id = ledger.ledger_id
    attempt = str(uuidlib.uuid4())
    dkey, ikey = data_key(attempt, ledger_id), index_key(attempt, ledger_id)
    crash_point("offload.before_begin")
    previous = rt.meta.begin_offload(
        ledger_id, attempt, rt.driver, rt.now_ms(), data_key=dkey, index_key=ikey
    )
    crash_point("offload.after_begin")
    if previous is not None:
        clean_attempt(
            rt,
            previous.uuid,
            previous.data_key,
            previous.index_key,
            "Previous failed offload",
            topic=ledger.topic,
        )
    try:
        transform = write_transform_for(rt, ledger.topic)
        with rt.ledgers.open_reader(ledger.topic, ledger_id) as reader:
            result = offload_ledger(
                timed_reader(reader, rt.metrics, ledger.topic),
                rt.store,
                attempt,
                rt.broker.offload,
                managed_ledger_name=managed_ledger_name,
                progress=progress,
                transform=transform,
            )
        index_crc = crc32c(rt.store.get(ikey).data)
    except BaseException as exc:
        _failed(rt, ledger, attempt, managed_ledger_name, exc)
        raise
    return Uploaded(
        ledger, managed_ledger_name, attempt, result, index_crc, transform_token(transform)
    )


def finish_attempt(rt: Runtime, up: Uploaded) -> OffloadContext:
    """Steps 3 and 4: the completion marker (after the data and the index: an attempt is
    finished in the bucket once it exists), the watermark object, then ``complete_offload``.
    :func:`~offloader.topics.tasks` runs it on a thread of its own, overlapping the next
    ledger's upload; every ledger's steps stay in this order."""
    ledger, attempt, result = up.ledger, up.attempt, up.result
    ledger_id = ledger.ledger_id
    try:
        crash_point("offload.before_marker")
        marker = LedgerMarker(
            managed_ledger_name=up.managed_ledger_name,
            ledger_id=ledger_id,
            uuid=attempt,
            entries=ledger.entries,
            entry_bytes=ledger.size_bytes,
            data_size=result.data_size,
            index_size=result.index_size,
            index_crc32c=up.index_crc32c,
            transform=up.transform,
            created_ms=ledger.created_ms,
            closed_ms=ledger.closed_ms if ledger.closed_ms is not None else ledger.created_ms,
            offloaded_ms=rt.now_ms(),
        )
        software = rt.broker.offload.software_version
        write_ledger_marker(rt.store, marker, software)
        advance_watermark(
            rt.store,
            LEDGERS_KIND,
            up.managed_ledger_name,
            ledger_id,
            attempt,
            marker.offloaded_ms,
            software,
        )
    except BaseException as exc:
        _failed(rt, ledger, attempt, up.managed_ledger_name, exc)
        raise
    crash_point("offload.before_complete")
    try:
        completed = rt.meta.complete_offload(
            ledger_id,
            attempt,
            marker.offloaded_ms,
            data_size=result.data_size,
            index_size=result.index_size,
            block_crc32c=result.block_crc32c,
            index_crc32c=up.index_crc32c,
        )
        crash_point("offload.after_complete")
        rt.metrics.record_offload_bytes(ledger.topic, ledger.size_bytes)
        return completed
    except OffloadConflict as exc:
        log.warning(
            "offload lost the compare-and-set; deleting its objects",
            ledger_id=ledger_id,
            uuid=attempt,
            error=str(exc),
        )
        dkey, ikey = data_key(attempt, ledger_id), index_key(attempt, ledger_id)
        clean_attempt(rt, attempt, dkey, ikey, "Offload conflict", topic=ledger.topic)
        raise


def failure_count(attempts: Iterable[OffloadAttempt]) -> int:
    """How many attempts of a ledger failed (their error is kept even once CLEANED)."""
    return sum(1 for a in attempts if a.error is not None and a.state != "COMPLETED")


def retry_delay_ms(failures: int, base_seconds: float, max_seconds: float) -> int:
    """Exponential backoff: ``base * 2**(failures-1)``, capped at ``max`` (0 for no failure)."""
    if failures <= 0:
        return 0
    delay = base_seconds * (2 ** min(failures - 1, 40))
    return int(min(delay, max_seconds) * 1000)


def retry_due(rt: Runtime, ledger: LedgerRecord, now_ms: int) -> bool:
    """Whether an automatic offload may (re)try ``ledger`` now.

    Never for a complete offload; at once for a ledger never tried or whose attempt was left
    STARTED (a crash: the caller holds the topic's offload lock, so nothing else runs it);
    after the backoff for a ledger whose last attempt failed."""
    context = ledger.offload
    if context is None:
        return True
    if context.complete:
        return False
    try:
        current = rt.meta.get_attempt(context.uuid)
    except NotFound:
        return True
    if current.state == "STARTED":
        return True
    attempts = rt.meta.list_attempts(ledger_id=ledger.ledger_id)
    delay = retry_delay_ms(
        failure_count(attempts),
        rt.broker.offload_retry_base_seconds,
        rt.broker.offload_retry_max_seconds,
    )
    return now_ms >= (current.finished_ms or current.started_ms) + delay


def delete_ledger_objects(rt: Runtime, ledger: LedgerRecord, reason: str) -> bool:
    """Delete the objects of every UUID the ledger ever had (current context and attempts);
    attempts become CLEANED. The ledger must no longer claim them (DELETED or gone)."""
    targets: dict[str, tuple[str, str]] = {}
    if ledger.offload is not None:
        targets[ledger.offload.uuid] = (ledger.offload.data_key, ledger.offload.index_key)
    for attempt in rt.meta.list_attempts(ledger_id=ledger.ledger_id):
        if attempt.state != "CLEANED":
            targets[attempt.uuid] = (attempt.data_key, attempt.index_key)
    ok = True
    for attempt_uuid, (dkey, ikey) in targets.items():
        ok = clean_attempt(rt, attempt_uuid, dkey, ikey, reason, topic=ledger.topic) and ok
    return ok
