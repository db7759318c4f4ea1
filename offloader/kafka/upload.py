"""The Kafka uploader: closed segments of a broker's log directory to the object store.

Per partition, holding its upload lock (``KafkaMetadataStore.partition_lock``: one uploader
per partition, across processes and the homes of a shared store; another one holding it makes
this pass report the partition ``busy`` and leave it alone), in offset order, per closed
segment with offsets past the partition's watermark (one that straddles the watermark, because
another replica rolled its segments elsewhere, is copied whole with its **effective start**,
watermark + 1, recorded: reads answer from there); a range no local segment holds is a gap:

1. open its files (live name, else ``.deleted``; an open file survives Kafka's rename/delete);
   a segment gone under both names is recorded as a **gap** (never skipped silently);
2. find its last batch (the ``.index``'s last entry, then a few header reads; from the start
   when the index does not lead there) for the end offset the copy is recorded with; a header
   that does not parse is a corrupt segment, refused and reported, nothing recorded or uploaded;
3. ``start_copy``: a new segment id and the object keys (in the tier's persisted key scheme,
   :mod:`offloader.kafka.keys`) are durable before any upload; the store refuses a second live
   copy of any offset (``busy``);
4. upload the ``.log`` (a multipart upload of ``part_size`` parts, ``concurrency`` at a time,
   each with its CRC32C; one PUT when small). There is no pass before the first part leaves:
   parts are read in order with positioned reads (never ``mmap``: a segment Kafka truncates
   meanwhile is an error for that segment, not a SIGBUS) into ``concurrency`` reused buffers,
   and every batch is checked as its part is read (CRC32C continued across parts, offsets
   increasing, :class:`~offloader.kafka.segment_file.CheckedReader`) while the parts before it
   upload; a batch that fails its checks aborts the multipart upload (a corrupt segment:
   ``corrupt``, its attempt deleted; the end offset, max timestamp and index entries are the
   checked batches'). Memory is the parts in flight. Then the ``.index`` and ``.timeindex``
   (rebuilt by Kafka's rule if missing), the producer snapshot and transaction index when
   present, and the leader-epoch checkpoint cut at the segment's end. When the topic has a
   transform policy the ``.log`` is stored chunked, compressed and/or encrypted
   (:mod:`offloader.kafka.transform_write`) and its chunk table and wrapped data key go to
   one more object, ``.chunks``, whose key is recorded with the others in step 3
   (spec/transforms.md §8); the index files stay plain.
   Each object's span CRC32Cs are computed from the bytes uploaded, part by part, and the
   ``.log``'s whole CRC32C is combined from them;
5. the file must not have changed meanwhile (its size and modification time, and its last
   batch the one step 2 found): else the attempt fails ("truncated" / "modified while it was
   copied") and is cleaned up;
6. ``finish_copy``: COPY_SEGMENT_FINISHED, the partition watermark and the segment's checks
   (each object's size and span CRC32Cs, the ``.log``'s transform: what every read checks,
   spec/kafka-segments.md §6), in one transaction.

Any failure in 4-6 deletes what the attempt wrote (DELETE_SEGMENT_STARTED -> FINISHED) and stops
the partition (later segments wait: the watermark never skips a segment that is still local).
Abandoned attempts of a crashed run are cleaned at the start of the next one (under the lock,
whatever their age). Kafka's files are never modified.

With the cluster's metadata (``ctx.gate``, :mod:`offloader.kafka.leadership`) a pass refreshes
it first, plans each partition through the gate (only the partitions this broker leads, of
tiered topics, their segments held back by the copy lag) and re-checks it before each segment.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import BinaryIO

from formats.framing import scratch_bytearray
from formats.kafka.batch import BatchHeader
from formats.kafka.errors import KafkaCorruptError, KafkaFormatError
from formats.kafka.index import IndexBuilder
from formats.kafka.names import (
    KafkaKeyScheme,
    encode_leader_epoch_checkpoint,
    kafka_uuid_to_uuid,
    scheme_key,
    segment_leader_epochs,
    uuid_to_kafka,
)
from formats.kafka.spans import SPAN_SIZE, ObjectChecksums, join_crcs, span_size_for
from formats.transform import encode_segment_table
from offloader.crashpoints import crash_point
from offloader.errors import OffloadConflict, OffloaderError, SegmentChangedError, StoreError
from offloader.kafka.context import KafkaContext
from offloader.kafka.keys import resolve_key_scheme
from offloader.kafka.logdir import (
    LocalPartition,
    LocalSegment,
    UnreadablePartition,
    open_segment_file,
    scan_log_dir,
)
from offloader.kafka.manifests import raise_partition_watermark, write_segment_marker
from offloader.kafka.remote import clean_stale_attempts, delete_remote_segment
from offloader.kafka.segment_file import CheckedReader, SegmentFile, index_hint
from offloader.kafka.transform_read import segment_identity
from offloader.kafka.transform_write import (
    TRANSFORM_METADATA_KEY,
    TRANSFORM_METADATA_VALUE,
    upload_transformed_log,
    write_transform_for,
)
from offloader.kafka.types import SegmentOutcome, SegmentOutcomeKind, UploadReport
from offloader.logs import get_logger
from offloader.metadata.kafka_base import (
    PLAIN_TRANSFORM,
    NewRemoteSegment,
    SegmentChecks,
)
from offloader.selection import TopicSelection
from offloader.store.base import UploadedPart

log = get_logger(__name__)

_OPTIONAL_KINDS = ("index", "timeindex", "snapshot", "txnindex")


class _Scan:
    """What the CRC pass learnt about a segment's ``.log``."""

    def __init__(self, base_offset: int) -> None:
        self.builder = IndexBuilder(base_offset)
        self.end_offset = -1
        self.max_timestamp = -1
        self.batches = 0
        #: byte ranges of the batches whose attributes carry a codec (already compressed)
        self.compressed: list[tuple[int, int]] = []

    def add(self, header: BatchHeader, shift: int, source: str) -> None:
        if self.batches == 0 and header.base_offset < self.builder.base_offset:
            raise KafkaFormatError(
                f"first batch at offset {header.base_offset} is below the segment's base offset",
                offset=0,
                source=source,
            )
        if self.batches and header.base_offset <= self.end_offset:
            raise KafkaCorruptError(
                f"batch base offset {header.base_offset} goes back (previous batch ended at "
                f"offset {self.end_offset})",
                offset=header.position + shift,
                source=source,
            )
        self.builder.add(header)
        if header.compression:
            self.compressed.append((header.position + shift, header.end + shift))
        self.end_offset = header.last_offset
        self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        self.batches += 1


def upload_log_object(
    ctx: KafkaContext, key: str, reader: CheckedReader, size: int, metadata: Mapping[str, str]
) -> ObjectChecksums:
    """The ``.log`` as one PUT (small) or a parallel multipart upload with per-part CRC32C,
    every batch checked as its part is read (``reader``); the span CRC32Cs of the bytes
    uploaded (``reader``'s span: the span CRC32Cs come from the read that checks the batches),
    part by part (a part is a whole number of spans; each part's CRC32C is joined from its
    spans'). Parts are read into at most ``concurrency`` buffers, reused."""
    store = ctx.store
    span = reader.stream.span or SPAN_SIZE
    part_size = max(ctx.settings.part_size, -(-size // 10_000))
    part_size = -(-part_size // span) * span
    if size <= part_size:
        body = reader.read(size)
        reader.finish()
        checks = ObjectChecksums(size, span, tuple(reader.take_spans(final=True)))
        store.put(key, body, metadata)
        return checks
    upload_id = store.create_multipart_upload(key, metadata)
    parts: list[UploadedPart] = []
    crcs: list[tuple[int, ...]] = []
    window = max(1, ctx.settings.concurrency)
    try:
        with ThreadPoolExecutor(window, "kafka-part") as pool:
            in_flight: dict[Future[UploadedPart], bytearray] = {}
            free: list[bytearray] = []
            for number, start in enumerate(range(0, size, part_size), start=1):
                while len(in_flight) >= window:
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for f in done:
                        parts.append(f.result())
                        free.append(in_flight.pop(f))
                length = min(part_size, size - start)
                if length == part_size:
                    body = free.pop() if free else scratch_bytearray(part_size)
                else:  # the last part: a buffer of its size (a free one is dropped)
                    free.clear()
                    body = scratch_bytearray(length)
                reader.read_into(body)
                spans = tuple(reader.take_spans(final=length < part_size))
                crcs.append(spans)
                lengths = [min(span, length - p) for p in range(0, length, span)]
                part_crc = join_crcs(spans, lengths)
                sent = pool.submit(store.upload_part, key, upload_id, number, body, part_crc)
                in_flight[sent] = body
            reader.finish()
            parts.extend(f.result() for f in in_flight)
        store.complete_multipart_upload(key, upload_id, parts)
    except BaseException:
        try:
            store.abort_multipart_upload(key, upload_id)
        except StoreError as exc:
            log.warning("abort of a failed segment upload failed", key=key, error=str(exc))
        raise
    return ObjectChecksums(size, span, tuple(c for spans in crcs for c in spans))


def _open_files(segment: LocalSegment) -> dict[str, BinaryIO]:
    files: dict[str, BinaryIO] = {}
    log_file = open_segment_file(segment, "log")
    if log_file is None:
        return files
    files["log"] = log_file
    for kind in _OPTIONAL_KINDS:
        handle = open_segment_file(segment, kind)
        if handle is not None:
            files[kind] = handle
    return files


def upload_segment(
    ctx: KafkaContext,
    partition: LocalPartition,
    segment: LocalSegment,
    *,
    start_offset: int | None = None,
    scheme: KafkaKeyScheme | None = None,
    stop_before: int | None = None,
) -> SegmentOutcome:
    """Copy one closed segment (see the module docstring); never raises OffloaderError for
    the segment's own problems: they come back as the outcome's kind. ``start_offset``: the
    first offset this copy answers for, when the segment straddles the watermark (the whole
    ``.log`` is uploaded, the records below it belong to the copy before). ``scheme``: the
    tier's key scheme (resolved here when None). ``stop_before``: the offset where this
    leader's lineage stops agreeing with the segment's (KIP-405's epoch rule): only the prefix
    of batches wholly below it is copied, with offset and time indexes rebuilt for the prefix
    (no producer snapshot: it describes the segment's end)."""
    topic, number = partition.topic, partition.partition
    source = str(segment.path("log"))
    files = _open_files(segment)
    if "log" not in files:
        return SegmentOutcome(
            topic,
            number,
            segment.base_offset,
            "gap",
            detail="segment deleted by Kafka before it was copied",
        )
    try:
        file = SegmentFile(files["log"], source)
        if file.size == 0:
            return SegmentOutcome(topic, number, segment.base_offset, "empty")
        try:
            last = file.last_batch(index_hint(files.get("index"), file.size))
        except KafkaFormatError as exc:
            log.error("corrupt Kafka segment refused", segment=source, error=str(exc))
            return SegmentOutcome(topic, number, segment.base_offset, "corrupt", detail=str(exc))
        except SegmentChangedError as exc:
            log.error("Kafka segment changed while it was read", segment=source, error=str(exc))
            return SegmentOutcome(topic, number, segment.base_offset, "failed", detail=str(exc))
        start = segment.base_offset if start_offset is None else start_offset
        if stop_before is not None and last.last_offset >= stop_before:
            prefix_last = file.cut_before(stop_before)
            if prefix_last is None or prefix_last.last_offset < start:
                return SegmentOutcome(
                    topic,
                    number,
                    segment.base_offset,
                    "empty",
                    detail=f"no batch of the segment lies wholly below offset {stop_before}",
                )
            last = prefix_last
            for kind in ("index", "timeindex", "snapshot"):  # the whole segment's: rebuilt
                handle = files.pop(kind, None)
                if handle is not None:
                    handle.close()
        if last.last_offset < start:
            return SegmentOutcome(
                topic,
                number,
                segment.base_offset,
                "empty",
                end_offset=last.last_offset,
                detail=f"every offset is remote already (watermark {start - 1})",
            )
        if scheme is None:
            scheme = resolve_key_scheme(ctx)
        return _copy(ctx, partition, segment, files, file, last, start, scheme)
    finally:
        for handle in files.values():
            handle.close()


def _small_kinds(files: dict[str, BinaryIO]) -> tuple[str, ...]:
    extra = tuple(kind for kind in ("snapshot", "txnindex") if kind in files)
    return ("index", "timeindex", *extra, "leader-epoch-checkpoint")


def _small_files(
    partition: LocalPartition, files: dict[str, BinaryIO], scan: _Scan
) -> dict[str, bytes]:
    offsets, times = scan.builder.finish(closed=True)
    small: dict[str, bytes] = {
        "index": files["index"].read() if "index" in files else offsets.encode(),
        "timeindex": files["timeindex"].read() if "timeindex" in files else times.encode(),
    }
    for kind in ("snapshot", "txnindex"):
        if kind in files:
            small[kind] = files[kind].read()
    epochs = tuple((e, o) for e, o in partition.leader_epochs if o <= scan.end_offset)
    small["leader-epoch-checkpoint"] = encode_leader_epoch_checkpoint(epochs)
    return small


def _copy(
    ctx: KafkaContext,
    partition: LocalPartition,
    segment: LocalSegment,
    files: dict[str, BinaryIO],
    file: SegmentFile,
    last: BatchHeader,
    start: int,
    scheme: KafkaKeyScheme,
) -> SegmentOutcome:
    topic, number = partition.topic, partition.partition
    size = file.size
    end_offset = last.last_offset
    transform = write_transform_for(ctx, topic)  # a missing key fails before anything is done
    segment_id = uuid_to_kafka(uuid.uuid4())
    small_kinds = _small_kinds(files)
    kinds = ("log", "chunks", *small_kinds) if transform is not None else ("log", *small_kinds)
    keys = {
        kind: scheme_key(
            scheme, topic, partition.topic_id, number, segment.base_offset, segment_id, kind
        )
        for kind in kinds
    }
    try:
        record = ctx.meta.start_copy(
            NewRemoteSegment(
                segment_id=segment_id,
                topic=topic,
                topic_id=partition.topic_id,
                partition=number,
                base_offset=segment.base_offset,
                end_offset=end_offset,
                # the last batch's; the checked maximum of every batch at finish_copy
                max_timestamp=last.max_timestamp,
                size_bytes=size,
                leader_epochs=segment_leader_epochs(partition.leader_epochs, start, end_offset),
                keys=keys,
                start_offset=start if start > segment.base_offset else None,
            ),
            ctx.now_ms(),
        )
    except OffloadConflict as exc:  # another uploader's copy holds these offsets
        log.warning("Kafka segment copied by another uploader", segment=str(segment.path("log")))
        return SegmentOutcome(
            topic, number, segment.base_offset, "busy", end_offset=end_offset, detail=str(exc)
        )
    metadata = {
        "kafka-topic": topic,
        "kafka-topic-id": partition.topic_id,
        "kafka-partition": str(number),
        "kafka-base-offset": str(segment.base_offset),
        "kafka-end-offset": str(end_offset),
        "kafka-segment-id": segment_id,
    }
    if start > segment.base_offset:
        metadata["kafka-start-offset"] = str(start)
    crash_point("kafka.after_start_copy")
    scan = _Scan(segment.base_offset)
    span = span_size_for(ctx.settings.part_size) if transform is None else None
    reader = CheckedReader(file, lambda header: scan.add(header, 0, file.source), span)
    kind: SegmentOutcomeKind = "failed"
    try:
        objects: dict[str, ObjectChecksums] = {}
        try:
            if transform is None:
                objects["log"] = upload_log_object(ctx, keys["log"], reader, size, metadata)
                log_crc = objects["log"].whole_crc32c
                pinned = PLAIN_TRANSFORM
            else:
                chunked = {**metadata, TRANSFORM_METADATA_KEY: TRANSFORM_METADATA_VALUE}
                section, log_crc = upload_transformed_log(
                    ctx,
                    keys["log"],
                    reader,
                    size,
                    chunked,
                    transform,
                    segment_identity(segment_id, segment.base_offset),
                    scan.compressed,
                )
                table = encode_segment_table(
                    str(kafka_uuid_to_uuid(segment_id)), segment.base_offset, section
                )
                ctx.store.put(keys["chunks"], table, chunked)
                objects["chunks"] = ObjectChecksums.of(table)
                pinned = section.describe()
        except KafkaFormatError:  # a batch failed its checks: the upload was aborted
            kind = "corrupt"
            raise
        crash_point("kafka.after_log_upload")
        if scan.end_offset != end_offset:
            raise SegmentChangedError(
                f"{file.source}: modified while it was copied (its batches end at offset "
                f"{scan.end_offset}, the copy started for offset {end_offset})"
            )
        small = _small_files(partition, files, scan)
        for name, payload in small.items():
            ctx.store.put(keys[name], payload, metadata)
            objects[name] = ObjectChecksums.of(payload)
        file.check_unchanged()
        # the copy is complete: its completion marker (spec/kafka-manifests.md)
        # (it carries what finish_copy pins, so a rebuild recreates the same record)
        finished, checks = ctx.now_ms(), SegmentChecks(objects, pinned)
        write_segment_marker(
            ctx.store,
            record,
            log_crc32c=log_crc,
            transform=pinned,
            finished_ms=finished,
            checks=checks,
            max_timestamp=scan.max_timestamp,
        )
        crash_point("kafka.before_finish_copy")
        ctx.meta.finish_copy(
            segment_id,
            finished,
            log_crc32c=log_crc,
            checks=checks,
            max_timestamp=scan.max_timestamp,
        )
    except OffloaderError as exc:
        if kind == "corrupt":
            log.error("corrupt Kafka segment refused", segment=file.source, error=str(exc))
        else:
            log.error("Kafka segment copy failed", segment=file.source, error=str(exc))
        try:
            delete_remote_segment(ctx, record, f"copy failed: {exc}")
        except OffloaderError as cleanup:
            log.warning(
                "cleanup of a failed copy failed; the next run retries",
                segment_id=segment_id,
                error=str(cleanup),
            )
        return SegmentOutcome(
            topic,
            number,
            segment.base_offset,
            kind,
            end_offset=end_offset,
            segment_id=segment_id,
            detail=str(exc),
        )
    raise_partition_watermark(ctx, record)  # the bucket's watermark, after finish_copy
    log.info(
        "Kafka segment copied",
        topic=topic,
        partition=number,
        base_offset=segment.base_offset,
        end_offset=end_offset,
        bytes=size,
        segment_id=segment_id,
        from_deleted=segment.deleted,
    )
    return SegmentOutcome(
        topic,
        number,
        segment.base_offset,
        "uploaded",
        end_offset=end_offset,
        segment_id=segment_id,
        size_bytes=size,
        from_deleted=segment.deleted,
    )


def upload_partition(
    ctx: KafkaContext,
    partition: LocalPartition,
    report: UploadReport,
    scheme: KafkaKeyScheme | None = None,
) -> None:
    """Copy the partition's closed segments that are not remote yet, oldest first, holding the
    partition's upload lock (another uploader holding it: one ``busy`` outcome, nothing done).
    ``scheme``: the tier's key scheme (resolved here when None)."""
    topic, number = partition.topic, partition.partition
    first_local = partition.segments[0].base_offset if partition.segments else 0
    ctx.meta.ensure_partition(
        topic, number, partition.topic_id, ctx.now_ms(), watermark=first_local - 1
    )
    report.partitions += 1
    with ctx.meta.partition_lock(topic, number) as held:
        if not held:
            log.info("Kafka partition skipped: another uploader holds it", partition=partition.name)
            report.segments.append(
                SegmentOutcome(
                    topic,
                    number,
                    first_local,
                    "busy",
                    detail="another uploader holds this partition's lock; it copies the segments",
                )
            )
            return
        if scheme is None:
            scheme = resolve_key_scheme(ctx)
        _upload_locked(ctx, partition, report, scheme)


def _upload_locked(
    ctx: KafkaContext, partition: LocalPartition, report: UploadReport, scheme: KafkaKeyScheme
) -> None:
    topic, number = partition.topic, partition.partition
    # under the lock every COPY_SEGMENT_STARTED attempt of the partition is abandoned
    report.cleaned += clean_stale_attempts(ctx, topic, number, locked=True)
    record = ctx.meta.get_partition(topic, number)
    assert record is not None  # ensured before the lock
    known_gaps = {g.start_offset for g in ctx.meta.list_gaps(topic) if g.partition == number}
    expected = record.watermark + 1
    bases = [s.base_offset for s in partition.segments]
    for segment in partition.closed:
        following = [b for b in bases if b > segment.base_offset]
        next_base = following[0] if following else None
        if next_base is not None and next_base - 1 < expected:
            continue  # every offset the segment can hold is remote already
        stop = ctx.gate and ctx.gate.before_segment(partition, segment, next_base)
        if stop and stop.end_offset is not None and stop.end_offset >= expected:
            # the lineage changed inside this segment: its prefix that agrees, then stop
            prefix = upload_segment(
                ctx,
                partition,
                segment,
                start_offset=max(segment.base_offset, expected),
                scheme=scheme,
                stop_before=stop.end_offset + 1,
            )
            report.segments.append(prefix)
            if prefix.kind in ("corrupt", "failed"):
                ctx.meta.set_partition_error(
                    topic, number, f"segment {segment.base_offset}: {prefix.detail}", ctx.now_ms()
                )
                return
        if stop:  # leadership moved, or the epoch lineage did
            report.segments.append(stop)
            return
        if segment.base_offset > expected and expected not in known_gaps:
            # no local segment holds expected..base-1 (those before this one end below it)
            _gap(
                ctx,
                report,
                topic,
                number,
                expected,
                segment.base_offset - 1,
                "offsets deleted by Kafka before they were copied",
            )
        # a segment straddling the watermark (another replica rolled elsewhere) is copied
        # whole, answering from the watermark on
        start = max(segment.base_offset, expected)
        outcome = upload_segment(ctx, partition, segment, start_offset=start, scheme=scheme)
        if outcome.kind == "gap":
            end = segment.base_offset if next_base is None else next_base - 1
            gap_start = max(segment.base_offset, expected)
            if gap_start not in known_gaps:
                ctx.meta.record_gap(
                    topic,
                    number,
                    gap_start,
                    end,
                    ctx.now_ms(),
                    outcome.detail or "segment gone",
                )
            report.segments.append(
                SegmentOutcome(
                    topic, number, segment.base_offset, "gap", end_offset=end, detail=outcome.detail
                )
            )
            expected = end + 1
            continue
        report.segments.append(outcome)
        if outcome.kind in ("corrupt", "failed"):
            ctx.meta.set_partition_error(
                topic, number, f"segment {segment.base_offset}: {outcome.detail}", ctx.now_ms()
            )
            return
        if outcome.kind == "busy":
            return  # another uploader's copy: it goes on from there
        if outcome.end_offset is not None:
            expected = max(expected, outcome.end_offset + 1)
        elif next_base is not None:
            expected = next_base


def _gap(
    ctx: KafkaContext,
    report: UploadReport,
    topic: str,
    number: int,
    start: int,
    end: int,
    reason: str,
) -> None:
    ctx.meta.record_gap(topic, number, start, end, ctx.now_ms(), reason)
    log.warning("gap in the remote Kafka log", topic=topic, partition=number, start=start, end=end)
    report.segments.append(
        SegmentOutcome(topic, number, start, "gap", end_offset=end, detail=reason)
    )


def upload_log_dir(
    ctx: KafkaContext, log_dir: Path, topics: str | TopicSelection | None = None
) -> UploadReport:
    """One pass over the log directory (``topics``: the topics it copies, in the one selection
    form of :mod:`offloader.selection`; None: all). A partition
    directory that cannot be read is a ``failed`` outcome (and its partition's last error when
    it is known); the others are uploaded all the same."""
    report = UploadReport()
    scheme = resolve_key_scheme(ctx)  # a conflicting key option fails before anything is done
    unreadable: list[UnreadablePartition] = []
    if ctx.gate is not None:
        ctx.gate.begin_pass(log_dir)  # the cluster's metadata, once per pass
    for partition in scan_log_dir(log_dir, topics, unreadable):
        try:
            if ctx.gate is not None:  # only this broker's led, tiered partitions
                partition, refused = ctx.gate.plan(partition, log_dir)
                if refused is not None:
                    report.segments.append(refused)
                    continue
            upload_partition(ctx, partition, report, scheme)
        except OffloaderError as exc:  # this partition only (a re-created topic, a store error)
            log.error("Kafka partition upload failed", partition=partition.name, error=str(exc))
            first = partition.segments[0].base_offset if partition.segments else 0
            report.segments.append(
                SegmentOutcome(
                    partition.topic, partition.partition, first, "failed", detail=str(exc)
                )
            )
    for bad in unreadable:
        report.segments.append(
            SegmentOutcome(bad.topic, bad.partition, 0, "failed", detail=bad.error)
        )
        if ctx.meta.get_partition(bad.topic, bad.partition) is not None:
            ctx.meta.set_partition_error(bad.topic, bad.partition, bad.error, ctx.now_ms())
    return report
