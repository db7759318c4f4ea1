"""Key rotation of transformed Kafka segments: ``objects rekey --to-key ID`` (spec/transforms.md
§8).

For every COPY_SEGMENT_FINISHED segment with a ``.chunks`` object whose data key is wrapped with
another key, the data key is unwrapped (with that key from the ring) and wrapped again with
``ID``, and **only the ``.chunks`` object** is rewritten (one PUT replacing it; the ``.log`` and
its chunks do not change, since the data key does not). Safe to interrupt and re-run: each
``.chunks`` object is either old or new, both readable, and a re-run skips those already under
``ID`` (after checking that ``ID`` unwraps them). Key bytes never reach a log.

The segment's record pins its ``.chunks`` object's CRC32Cs (spec/kafka-segments.md §6), so a
re-key moves the pin in three steps: the new object's checksums are recorded as
``next_chunks`` (accepted beside the old), the object is replaced, then they become the pinned
ones. The segment's completion marker body follows each step
(:func:`~offloader.kafka.manifests.rewrite_marker_checks`), so a ``metadata rebuild`` at any
point pins checksums the stored ``.chunks`` matches. Interrupted anywhere, the object in the
store is one the record (and the marker) accepts; the re-run finishes the move.
"""

from __future__ import annotations

import dataclasses

from formats.kafka.names import kafka_uuid_to_uuid
from formats.kafka.spans import ObjectChecksums
from formats.transform import encode_segment_table, unwrap_data_key, wrap_data_key
from offloader.crashpoints import crash_point
from offloader.kafka.context import KafkaContext
from offloader.kafka.integrity import check_object
from offloader.kafka.manifests import rewrite_marker_checks
from offloader.kafka.transform_read import CHUNKS, decode_table, is_transformed
from offloader.keyring import KeyRing, ring_path
from offloader.logs import get_logger
from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord
from offloader.offload.rekey import PLAIN, REKEYED, UNCHANGED, RekeyOutcome

log = get_logger(__name__)


def rekey_segments(ctx: KafkaContext, to_key: str, *, dry_run: bool = False) -> list[RekeyOutcome]:
    """Re-wrap every transformed, encrypted remote segment's data key with ``to_key``. The
    outcomes name the segment as topic ``kafka:<topic>:<partition>``, its base offset as the
    ledger id and its segment id as the uuid."""
    ring = KeyRing(ring_path(ctx.settings.key_ring))
    new_kek = ring.key(to_key)  # MissingKeyError before anything is touched
    outcomes = []
    for record in ctx.meta.list_segments(states=[COPY_FINISHED]):
        if is_transformed(record):
            outcomes.append(_rekey_one(ctx, ring, record, new_kek, to_key, dry_run))
    return outcomes


def _rekey_one(
    ctx: KafkaContext,
    ring: KeyRing,
    record: RemoteSegmentRecord,
    new_kek: bytes,
    to_key: str,
    dry_run: bool,
) -> RekeyOutcome:
    key = record.keys[CHUNKS]
    got = ctx.store.get(key)
    check_object(record, CHUNKS, got.data)  # the pinned (or the next) checksum
    section = decode_table(got.data, record)

    def outcome(action: str) -> RekeyOutcome:
        return RekeyOutcome(
            f"kafka:{record.topic}:{record.partition}",
            record.base_offset,
            record.segment_id,
            section.key_id if section.encrypted else None,
            to_key,
            action,
        )

    if not section.encrypted:
        return outcome(PLAIN)
    if section.key_id == to_key:
        unwrap_data_key(new_kek, section.wrapped_key, to_key)  # WrongKeyError if not ours
        if not dry_run:
            _pin(ctx, record, ObjectChecksums.of(got.data))  # an interrupted re-key's last step
        return outcome(UNCHANGED)
    data_key = unwrap_data_key(ring.key(section.key_id), section.wrapped_key, section.key_id)
    rewrapped = dataclasses.replace(
        section, key_id=to_key, wrapped_key=wrap_data_key(new_kek, data_key)
    )
    body = encode_segment_table(
        str(kafka_uuid_to_uuid(record.segment_id)), record.base_offset, rewrapped
    )
    if dry_run:
        return outcome(REKEYED)
    new = ObjectChecksums.of(body)
    if record.checks is not None:
        moving = dataclasses.replace(record.checks, next_chunks=new)
        ctx.meta.set_segment_checks(record.segment_id, moving, ctx.now_ms())
        # the marker accepts both too: a rebuild from here on pins what the store holds
        rewrite_marker_checks(ctx.store, dataclasses.replace(record, checks=moving))
    ctx.store.put(key, body, got.metadata)
    crash_point("kafka.rekey.after_put")
    _pin(ctx, record, new)
    log.info(
        "Kafka segment rekeyed",
        topic=record.topic,
        partition=record.partition,
        base_offset=record.base_offset,
        segment_id=record.segment_id,
        from_key=section.key_id,
        to_key=to_key,
    )
    return outcome(REKEYED)


def _pin(ctx: KafkaContext, record: RemoteSegmentRecord, chunks: ObjectChecksums) -> None:
    """Make ``chunks`` the pinned checksums of the segment's ``.chunks`` (no next one)."""
    checks = record.checks
    if checks is None:
        return
    pinned = dataclasses.replace(
        checks, objects={**checks.objects, CHUNKS: chunks}, next_chunks=None
    )
    if pinned != checks:
        ctx.meta.set_segment_checks(record.segment_id, pinned, ctx.now_ms())
    # the marker follows (also on a re-run after a crash before its rewrite)
    rewrite_marker_checks(ctx.store, dataclasses.replace(record, checks=pinned))
