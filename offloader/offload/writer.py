"""The offload writer: one closed ledger -> a data object (multipart, parts 1..N) and an index.

:func:`offload_ledger` follows Pulsar's ``BlobStoreManagedLedgerOffloader.offload``
(spec/object-keys.md §2) byte for byte, with three differences: parts are uploaded
concurrently (a bounded window), each part carries its CRC32C, and nothing is left behind when
anything fails. Steps:

1. entry lengths (``reader.entry_lengths()`` when the reader has it, else a pre-pass reading
   batches, with ``read_spans`` when the reader has it), then the block plan
   (:func:`formats.layout.plan_blocks`): an oversize entry or an empty ledger is refused here,
   before any request reaches the store;
2. create the multipart upload with the data object's user metadata;
3. read entries in batches of ``ledger_read_batch_entries`` (``reader.read_spans`` when the
   reader has it: one buffer and two int64 arrays per batch, no object per entry; else
   ``reader.read``; see :mod:`offloader.ledgers.base`), frame each block into one of
   ``offload_concurrency`` reusable :class:`~formats.block.BlockWriter` buffers (zeroed on
   the pool's threads without the GIL while the first blocks are framed: a fresh 64 MiB
   buffer costs ~30 ms of page faults; one framing call per batch, in C when built), and
   hand it to a pool of
   ``offload_concurrency`` threads that CRC32C it (without the GIL) and upload it as part
   ``n``; a block is framed as soon as a buffer is free, while the other uploads go on. Peak
   buffer memory is therefore ``offload_concurrency x max_block_size`` (plus one batch of
   entries; the last, shorter block gets a buffer of its own size in place of a pooled one):
   4 x 64 MiB with the defaults;
4. check that the entries read have the lengths that were planned (else the ledger changed
   under us: :class:`IndexInconsistentError`), complete the upload;
5. build the index from the entries actually read (``length`` and ``lastEntryId`` computed from
   them) with the extension (block CRC32Cs, fine offsets) unless
   ``settings.write_index_extension`` is False, and PUT it with ``if_none_match``.

Failure contract: on any exception (``KeyboardInterrupt`` included) the upload threads are
drained, the multipart upload is aborted, and if the data object was completed it is deleted,
as is the index unless its PUT was refused because another object already held the key. A
failed cleanup step is logged, never raised over the original error. Errors that are already
part of :mod:`offloader.errors` (``EntryTooLargeError``, ``StoreUnavailable``,
``IndexInconsistentError``...) propagate with their own class, so callers can tell them
apart; any other ``Exception`` (a reader's ``OSError``, a bug) is wrapped in
:class:`OffloadError` with the cause chained; ``KeyboardInterrupt`` and ``SystemExit`` are
re-raised unchanged after the cleanup.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from formats.block import BlockWriter, Buffer, iter_block_entries
from formats.encode import metadata_for_entries
from formats.extension import IndexExtension, crc32c, fine_offsets_for
from formats.framing import zeroed_bytearray
from formats.index import encode_index, index_from_plans
from formats.keys import (
    FORMAT_VERSION_KEY,
    ROLE_DATA,
    ROLE_INDEX,
    data_key,
    index_key,
    object_user_metadata,
)
from formats.layout import BlockPlan, plan_blocks
from formats.pulsar.zone_maps import BlockZone, zone_maps_section, zone_of_entries
from formats.span_crc import block_span_crcs, encode_span_crcs, span_cuts
from formats.transform import CHUNKED_FORMAT_VERSION, TransformSection, transform_extension_section
from formats.wire import BLOCK_HEADER_LEN
from offloader.config import OffloadSettings
from offloader.crashpoints import crash_point
from offloader.errors import (
    IndexInconsistentError,
    OffloaderError,
    OffloadError,
    PreconditionFailed,
)
from offloader.ledgers.base import LedgerReader
from offloader.logs import get_logger
from offloader.offload.entry_batches import LedgerEntries, entry_lengths_of
from offloader.offload.transformed import WriteTransform, upload_transformed
from offloader.store.base import ObjectStore, UploadedPart

__all__ = ["OffloadResult", "ProgressCallback", "entry_lengths_of", "offload_ledger"]

log = get_logger(__name__)

#: ``progress(bytes_done, bytes_total)`` of the data object, called on the caller's thread
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class OffloadResult:
    """What one successful offload wrote."""

    uuid: str
    ledger_id: int
    data_key: str
    index_key: str
    data_size: int
    index_size: int
    block_count: int
    block_crc32c: tuple[int, ...]
    entries: int
    payload_bytes: int
    elapsed: float

    @property
    def mb_per_s(self) -> float:
        return self.data_size / 1e6 / self.elapsed if self.elapsed > 0 else 0.0


def _checksum_and_upload(
    store: ObjectStore,
    key: str,
    upload_id: str,
    plan: BlockPlan,
    block: memoryview,
    cuts: Sequence[tuple[int, int]],
) -> tuple[UploadedPart, int, list[int]]:
    """On an upload thread: the block's CRC32C and its spans' (``cuts``; the GIL is released
    while they are summed), then the part with the block's as its checksum; returns all."""
    crc = crc32c(block)
    spans = block_span_crcs(block, plan.offset, cuts)
    part = store.upload_part(key, upload_id, plan.part_number, _part_body(block), crc)
    return part, crc, spans


def _part_body(block: memoryview) -> Buffer:
    """The bytes to send for a part: the writer's whole bytearray when the block fills it (so
    the S3 client needs no copy), else the view."""
    owner = block.obj
    if isinstance(owner, bytearray) and len(owner) == block.nbytes:
        return owner
    return block


def offload_ledger(
    reader: LedgerReader,
    store: ObjectStore,
    uuid: str,
    settings: OffloadSettings,
    *,
    managed_ledger_name: str | None = None,
    progress: ProgressCallback | None = None,
    transform: WriteTransform | None = None,
) -> OffloadResult:
    """Offload one closed ledger under ``uuid``; see the module docstring for the steps, the
    memory bound and the failure contract. With ``transform`` the data object is chunked,
    compressed and/or encrypted (:mod:`offloader.offload.transformed`, spec/transforms.md) and
    ``data_size`` is its stored size."""
    started = time.monotonic()
    ledger_id = reader.ledger_id
    dkey, ikey = data_key(uuid, ledger_id), index_key(uuid, ledger_id)
    lengths = entry_lengths_of(reader, settings.ledger_read_batch_entries)
    plans = plan_blocks(lengths, settings.max_block_size)  # refuses before any upload
    total = plans[-1].offset + plans[-1].size
    payload_total = sum(lengths)
    if reader.length != payload_total:
        log.warning(
            "ledger metadata length differs from its entries; using the entries",
            ledger_id=ledger_id,
            metadata_length=reader.length,
            entries=payload_total,
        )
    log.info(
        "offload start",
        ledger_id=ledger_id,
        uuid=uuid,
        store=store.url,
        entries=len(lengths),
        data_size=total,
        blocks=len(plans),
        block_size=settings.max_block_size,
        concurrency=settings.offload_concurrency,
    )
    job = _Offload(reader, store, dkey, ikey, settings, lengths, plans, progress)
    stored_size = total
    try:
        if transform is None:
            crcs, entries = job.upload_data(managed_ledger_name)
            index_size = job.put_index(crcs, managed_ledger_name)
        else:
            up = upload_transformed(job, transform, uuid, managed_ledger_name)
            crcs, entries, stored_size = up.block_crc32c, up.entries, up.stored_size
            index_size = job.put_index(crcs, managed_ledger_name, up.section)
    except BaseException as exc:
        job.clean_up()
        log.warning(
            "offload failed", ledger_id=ledger_id, uuid=uuid, error=f"{type(exc).__name__}: {exc}"
        )
        if isinstance(exc, OffloaderError) or not isinstance(exc, Exception):
            raise
        raise OffloadError(
            f"offload of ledger {ledger_id} ({uuid}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    elapsed = max(time.monotonic() - started, 1e-9)
    result = OffloadResult(
        uuid=uuid,
        ledger_id=ledger_id,
        data_key=dkey,
        index_key=ikey,
        data_size=stored_size,
        index_size=index_size,
        block_count=len(plans),
        block_crc32c=tuple(crcs),
        entries=len(lengths),
        payload_bytes=entries.payload_bytes,
        elapsed=elapsed,
    )
    log.info(
        "offload finished",
        ledger_id=ledger_id,
        uuid=uuid,
        data_size=total,
        stored_size=stored_size,
        index_size=index_size,
        blocks=len(plans),
        seconds=round(elapsed, 3),
        mb_per_s=round(total / 1e6 / elapsed, 1),  # of the ledger's bytes, however stored
    )
    return result


class _Offload:
    """State of one attempt, so that :meth:`clean_up` knows what exists."""

    def __init__(
        self,
        reader: LedgerReader,
        store: ObjectStore,
        dkey: str,
        ikey: str,
        settings: OffloadSettings,
        lengths: Sequence[int],
        plans: Sequence[BlockPlan],
        progress: ProgressCallback | None,
    ) -> None:
        self.reader = reader
        self.store = store
        self.dkey = dkey
        self.ikey = ikey
        self.settings = settings
        self.lengths = lengths
        self.plans = plans
        self.progress = progress
        self.upload_id: str | None = None
        self.completed = False
        self.complete_attempted = False
        self.index_attempted = False
        self.index_refused = False
        self.pool: ThreadPoolExecutor | None = None
        self.entries: LedgerEntries | None = None
        #: per part number, the CRC32Cs of its block's spans
        self.span_crcs_of_part: dict[int, list[int]] = {}
        #: per-block zone maps while the entries look like Pulsar messages (None: not written)
        self.zones: list[BlockZone | None] | None = [] if settings.write_index_extension else None

    def upload_data(self, managed_ledger_name: str | None) -> tuple[list[int], LedgerEntries]:
        settings, store, plans = self.settings, self.store, self.plans
        total = plans[-1].offset + plans[-1].size
        metadata = object_user_metadata(
            ROLE_DATA,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        self.upload_id = store.create_multipart_upload(self.dkey, metadata)
        crash_point("writer.after_create_upload")
        upload_id = self.upload_id
        entries = LedgerEntries(self.reader, self.lengths, settings.ledger_read_batch_entries)
        self.entries = entries
        window = settings.offload_concurrency
        buffer_size = max(p.size for p in plans)
        # at most `window` pooled buffers; their zeroing (page faults: ~30 ms per 64 MiB) runs
        # on the pool's threads without the GIL while this thread frames the first blocks
        pooled_blocks = len(plans) - (plans[-1].size < buffer_size)
        free: list[BlockWriter] = []
        in_flight: dict[Future[tuple[UploadedPart, int, list[int]]], tuple[BlockWriter, int]] = {}
        parts: list[UploadedPart] = []
        crc_of_part: dict[int, int] = {}
        cuts = self._span_cuts()
        done_bytes = 0
        self.pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="offload-part")
        prepared = deque(
            self.pool.submit(zeroed_bytearray, buffer_size)
            for _ in range(min(window, pooled_blocks))
        )

        def harvest(block: bool) -> None:
            nonlocal done_bytes
            if not in_flight:
                return
            finished, _ = wait(
                list(in_flight), timeout=None if block else 0, return_when=FIRST_COMPLETED
            )
            for future in finished:
                writer, size = in_flight.pop(future)
                part, crc, spans = future.result()  # raises the part's error
                parts.append(part)
                crc_of_part[part.part_number] = crc
                self.span_crcs_of_part[part.part_number] = spans
                crash_point("writer.after_part")
                free.append(writer)
                done_bytes += size
                if self.progress is not None:
                    self.progress(done_bytes, total)

        for n, plan in enumerate(plans):
            harvest(block=False)
            last = n == len(plans) - 1
            if last and plan.size < buffer_size:
                # a buffer of the exact size (the S3 client then sends it without a copy), in
                # place of a pooled one: at most window - 1 uploads hold theirs meanwhile
                while len(in_flight) >= window:
                    harvest(block=True)
                free.clear()
                writer = BlockWriter(plan.size)
            else:
                if not free and prepared:
                    free.append(BlockWriter(buffer_size, prepared.popleft().result()))
                while not free:
                    harvest(block=True)
                writer = free.pop()
                if last:
                    free.clear()  # no more blocks: let the spare buffers go
            block = writer.write_block_batches(
                plan.first_entry_id, entries.batches(plan.entry_count), plan.size
            )
            while len(in_flight) >= window:
                harvest(block=True)
            future = self.pool.submit(
                _checksum_and_upload, store, self.dkey, upload_id, plan, block, cuts[n]
            )
            in_flight[future] = (writer, plan.size)
            self.record_zone(block, plan)  # read-only, while the part uploads
        while in_flight:
            harvest(block=True)
        self.pool.shutdown(wait=True)
        self.pool = None
        if entries.next_id != len(self.lengths):
            raise IndexInconsistentError(
                f"ledger {self.reader.ledger_id}: {entries.next_id} entries read, "
                f"{len(self.lengths)} planned"
            )
        parts.sort(key=lambda p: p.part_number)
        crcs = [crc_of_part[plan.part_number] for plan in plans]
        self.complete_attempted = True  # from here on the object may exist
        crash_point("writer.before_complete_upload")
        store.complete_multipart_upload(self.dkey, upload_id, parts)
        crash_point("writer.after_complete_upload")
        self.completed = True
        return crcs, entries

    def _span_cuts(self) -> list[list[tuple[int, int]]]:
        """Per block, its fine-offset spans (none without the index extension)."""
        if not (self.settings.write_index_extension and self.settings.write_span_crc32c):
            return [[] for _ in self.plans]
        points = [offset for _, offset in fine_offsets_for(self.plans, self.lengths)]
        return [
            span_cuts(p.offset, p.offset + BLOCK_HEADER_LEN, p.offset + p.size, points)
            for p in self.plans
        ]

    def record_zone(self, block: memoryview, plan: BlockPlan) -> None:
        """The block's zone map (min/max publish and event time of its Pulsar messages); the
        ledger gets none when its first block's entries are not Pulsar message entries."""
        if self.zones is None:
            return
        entries = iter_block_entries(block, expected_first_entry_id=plan.first_entry_id)
        zone = zone_of_entries(e.payload for e in entries)
        if zone is None and not self.zones:
            self.zones = None
            return
        self.zones.append(zone)

    def put_index(
        self,
        crcs: Sequence[int],
        managed_ledger_name: str | None,
        transform: TransformSection | None = None,
    ) -> int:
        settings = self.settings
        extension = None
        with_extension = settings.write_index_extension or transform is not None
        if with_extension:
            extension = IndexExtension(
                tuple(crcs), tuple(fine_offsets_for(self.plans, self.lengths))
            )
            if self.zones is not None and len(self.zones) == len(self.plans):
                extension = extension.with_section(zone_maps_section(self.zones))
            # a transformed object's chunks carry their own CRC32Cs (and GCM tags), checked
            # before any of their bytes are used: span CRC32Cs are for plain objects
            if settings.write_span_crc32c and transform is None:
                spans = [c for p in self.plans for c in self.span_crcs_of_part[p.part_number]]
                extension = extension.with_section(encode_span_crcs(spans))
            if transform is not None:
                extension = extension.with_section(transform_extension_section(transform))
        index = index_from_plans(
            metadata_for_entries(self.reader.metadata, self.lengths), self.plans, extension
        )
        body = encode_index(index, with_extension=with_extension)
        metadata = object_user_metadata(
            ROLE_INDEX,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        if transform is not None:
            metadata[FORMAT_VERSION_KEY] = CHUNKED_FORMAT_VERSION
        self.index_attempted = True
        try:
            self.store.put(self.ikey, body, metadata, if_none_match=True)
            crash_point("writer.after_index_put")
        except PreconditionFailed:
            self.index_refused = True  # someone else's object: never delete it
            raise
        return len(body)

    def clean_up(self) -> None:
        """Remove everything this attempt created; log (never raise) failures."""
        if self.pool is not None:
            try:
                self.pool.shutdown(wait=True, cancel_futures=True)
            except BaseException as exc:  # pragma: no cover - interrupted while draining
                log.error(
                    "offload cleanup: upload threads not drained",
                    key=self.dkey,
                    error=type(exc).__name__,
                )
            self.pool = None
        store = self.store
        if self.upload_id is not None and not self.completed:
            try:
                store.abort_multipart_upload(self.dkey, self.upload_id)
            except BaseException as exc:
                log.error(
                    "offload cleanup: abort of the multipart upload failed; an "
                    "incomplete upload may remain",
                    key=self.dkey,
                    upload_id=self.upload_id,
                    error=f"{type(exc).__name__}: {exc}",
                )
        if self.complete_attempted:  # a lost answer to complete may have created it
            self._delete(self.dkey)
        if self.index_attempted and not self.index_refused:
            self._delete(self.ikey)

    def _delete(self, key: str) -> None:
        try:
            self.store.delete(key)
        except BaseException as exc:
            log.error(
                "offload cleanup: delete failed; the object may remain",
                key=key,
                error=f"{type(exc).__name__}: {exc}",
            )
