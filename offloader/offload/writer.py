"""The offload writer: one closed ledger -> a data object (multipart, parts 1..N) and an index.

:func:`offload_ledger` runs one :class:`~offloader.offload.job.OffloadJob` with one of three
upload strategies: :class:`PlainUpload` (here) writes Pulsar's object, and
:class:`~offloader.offload.transformed.TransformedUpload` the chunked one of a namespace with a
transform policy (spec/transforms.md); :class:`OneRequestUpload` (here) writes the same plain
object in one PUT, on stores whose multipart upload is an emulation (GCS, Azure:
``prefers_one_request_upload``) when it is at most ``one_request_upload_max`` bytes. The plain
offload follows Pulsar's ``BlobStoreManagedLedgerOffloader.offload`` (spec/object-keys.md §2)
byte for byte, with three differences: parts are uploaded concurrently (a bounded window), each
part carries its CRC32C, and nothing is left behind when anything fails. Steps:

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
   buffer costs ~30 ms of page faults; one framing call per batch, in C when built), each
   batch's bytes CRC32C'd right after they are framed, while still in the CPU's cache (the
   spans' CRC32Cs, the block's combined from them: one pass,
   :class:`~formats.span_crc.SpanSummer`), and hand the block to a pool of
   ``offload_concurrency`` threads that upload it as part ``n``; a block is framed as soon
   as a buffer is free, while the other uploads go on. Peak buffer memory is therefore
   ``offload_concurrency x max_block_size`` (plus one batch of entries; the last, shorter
   block gets a buffer of its own size in place of a pooled one): 4 x 64 MiB with the
   defaults. When the upload succeeds the buffers go back to the process's pool
   (:data:`~offloader.offload.block_buffers.BLOCK_BUFFERS`), and the next offload takes them
   from there: only the first offload of a process pays the page faults;
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

import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import overload

from formats.block import BlockWriter, Buffer
from formats.extension import fine_offsets_for
from formats.framing import zeroed_bytearray
from formats.keys import ROLE_DATA, object_user_metadata
from formats.layout import BlockPlan, plan_blocks
from formats.span_crc import SpanSummer, span_cuts
from formats.wire import BLOCK_HEADER_LEN
from offloader.config import OffloadSettings
from offloader.crashpoints import crash_point
from offloader.errors import FramingAborted, OffloaderError, OffloadError
from offloader.ledgers.base import LedgerReader
from offloader.logs import get_logger
from offloader.offload.block_buffers import BLOCK_BUFFERS
from offloader.offload.entry_batches import entry_lengths_of
from offloader.offload.job import OffloadJob, ProgressCallback, UploadedData, UploadStrategy
from offloader.offload.transformed import TransformedUpload, WriteTransform
from offloader.store.base import ObjectStore, UploadedPart

__all__ = ["OffloadResult", "OneRequestUpload", "PlainUpload", "offload_ledger", "one_request"]

log = get_logger(__name__)


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
    job = OffloadJob(reader, store, uuid, settings, lengths, plans, progress)
    strategy: UploadStrategy
    if transform is not None:
        strategy = TransformedUpload(transform)
    elif one_request(store, total, settings):
        strategy = OneRequestUpload()
    else:
        strategy = PlainUpload()
    try:
        data = strategy.upload(job, managed_ledger_name)
        index_size = job.put_index(data, managed_ledger_name)
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
        data_key=job.dkey,
        index_key=job.ikey,
        data_size=data.stored_size,
        index_size=index_size,
        block_count=len(plans),
        block_crc32c=tuple(data.block_crc32c),
        entries=len(lengths),
        payload_bytes=data.entries.payload_bytes,
        elapsed=elapsed,
    )
    log.info(
        "offload finished",
        ledger_id=ledger_id,
        uuid=uuid,
        data_size=total,
        stored_size=data.stored_size,
        index_size=index_size,
        blocks=len(plans),
        seconds=round(elapsed, 3),
        mb_per_s=round(total / 1e6 / elapsed, 1),  # of the ledger's bytes, however stored
    )
    return result


def one_request(store: ObjectStore, total: int, settings: OffloadSettings) -> bool:
    """Whether a plain data object of ``total`` bytes goes to ``store`` in one request: the
    store says it prefers that to its multipart emulation (GCS and Azure:
    ``prefers_one_request_upload``) and ``total`` is within ``one_request_upload_max``."""
    prefers = getattr(store, "prefers_one_request_upload", False) is True
    return prefers and 0 < total <= settings.one_request_upload_max


def _upload(
    store: ObjectStore,
    key: str,
    upload_id: str,
    plan: BlockPlan,
    block: memoryview,
    crc: int,
    spans: list[int],
) -> tuple[UploadedPart, int, list[int]]:
    """On an upload thread: the part, with the block's CRC32C as its checksum (summed, with
    its spans', as the block was framed); returns the part and both checksums."""
    part = store.upload_part(key, upload_id, plan.part_number, _part_body(block), crc)
    return part, crc, spans


def _span_bounds(plan: BlockPlan, cuts: Sequence[tuple[int, int]]) -> list[int]:
    """The block offsets where the block's spans begin and end (one span from the header's
    end to the block's end when it has no cuts): the :class:`SpanSummer`'s bounds."""
    if not cuts:
        return [BLOCK_HEADER_LEN, plan.size]
    return [cuts[0][0] - plan.offset, *(end - plan.offset for _, end in cuts)]


def _part_body(block: memoryview) -> Buffer:
    """The bytes to send for a part: the writer's whole bytearray when the block fills it (so
    the S3 client needs no copy), else the view."""
    owner = block.obj
    if isinstance(owner, bytearray) and len(owner) == block.nbytes:
        return owner
    return block


def _span_cuts(job: OffloadJob) -> list[list[tuple[int, int]]]:
    """Per block, its fine-offset spans (none without the index extension)."""
    if not (job.settings.write_index_extension and job.settings.write_span_crc32c):
        return [[] for _ in job.plans]
    points = [offset for _, offset in fine_offsets_for(job.plans, job.lengths)]
    return [
        span_cuts(p.offset, p.offset + BLOCK_HEADER_LEN, p.offset + p.size, points)
        for p in job.plans
    ]


class PlainUpload:
    """The :class:`~offloader.offload.job.UploadStrategy` of Pulsar's data object: each block
    is one part (steps 2 to 4 of the module docstring)."""

    def upload(self, job: OffloadJob, managed_ledger_name: str | None) -> UploadedData:
        settings, store, plans = job.settings, job.store, job.plans
        total = job.total
        metadata = object_user_metadata(
            ROLE_DATA,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        upload_id, entries = job.start_upload(metadata)
        window = settings.offload_concurrency
        buffer_size = max(p.size for p in plans)
        # at most `window` pooled buffers; their zeroing (page faults: ~30 ms per 64 MiB) runs
        # on the pool's threads without the GIL while this thread frames the first blocks
        pooled_blocks = len(plans) - (plans[-1].size < buffer_size)
        # buffers an earlier offload of this process gave back: no page faults at all
        kept = BLOCK_BUFFERS.take(buffer_size, min(window, pooled_blocks))
        #: every pooled writer of this upload, whose buffers go back to BLOCK_BUFFERS
        pooled: list[BlockWriter] = [BlockWriter(buffer_size, buf) for buf in kept]
        free: list[BlockWriter] = list(pooled)
        del kept
        in_flight: dict[Future[tuple[UploadedPart, int, list[int]]], tuple[BlockWriter, int]] = {}
        parts: list[UploadedPart] = []
        crc_of_part: dict[int, int] = {}
        #: per part number, the CRC32Cs of its block's spans
        span_crcs_of_part: dict[int, list[int]] = {}
        cuts = _span_cuts(job)
        done_bytes = 0
        job.pool = pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="offload-part")
        prepared = deque(
            pool.submit(zeroed_bytearray, buffer_size)
            for _ in range(min(window, pooled_blocks) - len(pooled))
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
                span_crcs_of_part[part.part_number] = spans
                crash_point("writer.after_part")
                free.append(writer)
                done_bytes += size
                if job.progress is not None:
                    job.progress(done_bytes, total)

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
                    pooled.append(BlockWriter(buffer_size, prepared.popleft().result()))
                    free.append(pooled[-1])
                while not free:
                    harvest(block=True)
                writer = free.pop()
                if last:
                    free.clear()  # no more blocks: let the spare buffers go
            # every run of bytes is summed as soon as it is framed (hot in the cache): one
            # pass; the block's CRC32C is combined from its header's and its spans'
            summer = SpanSummer(_span_bounds(plan, cuts[n]))
            block = writer.write_block_batches(
                plan.first_entry_id, entries.batches(plan.entry_count), plan.size, summer
            )
            crc, spans = summer.finish(block)
            if not cuts[n]:
                spans = []
            while len(in_flight) >= window:
                harvest(block=True)
            future = pool.submit(_upload, store, job.dkey, upload_id, plan, block, crc, spans)
            in_flight[future] = (writer, plan.size)
            job.record_zone(block, plan)  # read-only, while the part uploads
        while in_flight:
            harvest(block=True)
        job.complete_upload(upload_id, entries, parts)
        # every part is sent: the buffers go back for the next offload of this process (one
        # still referred to, by a store that kept it, is let go); after a failure they are
        # not reused
        del block, summer, writer, future
        free.clear()
        buffers = [w.release() for w in pooled]
        pooled.clear()
        BLOCK_BUFFERS.give(buffers, keep=window)
        return UploadedData(
            block_crc32c=[crc_of_part[plan.part_number] for plan in plans],
            entries=entries,
            stored_size=total,
            span_crc32c=[c for p in plans for c in span_crcs_of_part[p.part_number]],
        )


class FramedBlocks(Sequence[memoryview]):
    """The data object's blocks while they are framed on another thread: a sequence of
    ``len(plans)`` blocks whose total ``nbytes`` is known at once (the request's
    Content-Length), each block handed over when it is framed (:class:`PartsBody` takes
    them one by one as the transport sends them). A block kept stays available, so a retried
    request sends the same bytes again."""

    def __init__(self, sizes: Sequence[int]) -> None:
        self.nbytes = sum(sizes)
        self._blocks: list[Future[memoryview]] = [Future() for _ in sizes]
        self.cancelled = threading.Event()

    def __len__(self) -> int:
        return len(self._blocks)

    @overload
    def __getitem__(self, index: int) -> memoryview: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[memoryview]: ...

    def __getitem__(self, index: int | slice) -> memoryview | Sequence[memoryview]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        try:
            return self._blocks[index].result()
        except BaseException as exc:
            raise FramingAborted(f"block {index} not framed: {type(exc).__name__}") from exc

    def __iter__(self) -> Iterator[memoryview]:
        return (self[i] for i in range(len(self)))

    def set_block(self, index: int, block: memoryview) -> None:
        self._blocks[index].set_result(block)

    def fail_from(self, index: int, exc: BaseException) -> None:
        """Blocks ``index`` onwards will never be framed."""
        for future in self._blocks[index:]:
            if not future.done():
                future.set_exception(exc)

    def failure(self) -> BaseException | None:
        """The framing's own error, if it failed (None while it goes on)."""
        for future in self._blocks:
            if future.done() and future.exception() is not None:
                return future.exception()
        return None


class OneRequestUpload:
    """The :class:`~offloader.offload.job.UploadStrategy` of a plain data object sent in one
    PUT: for stores whose multipart upload is an emulation that costs more than the bytes
    (GCS: parts composed by a server-side copy, then deleted; Azure: staged blocks, which
    Azurite checksums at a fraction of its Put Blob's speed), when the object is at most
    ``one_request_upload_max`` bytes. The blocks are framed as planned (same bytes, CRC32Cs,
    spans and zone maps as :class:`PlainUpload`), each into a buffer of its own size, on a
    thread of their own while the PUT is sent: its body is the blocks one after the other
    (:class:`FramedBlocks`; ``put_parts`` of GCS and Azure; a store without it gets them
    joined, for ``put``), so the request starts after the first block is framed, not after
    the last one (Azure sends each block as it comes; GCS first sums every block's CRC32C).
    The framing checks that every planned entry was read before it hands over the last
    block, so the object can never exist without that check, then builds the index object
    while the store is still storing the data (:meth:`OffloadJob.prepare_index`). Peak
    memory the object (``one_request_upload_max`` at most), and nothing but the whole
    object can ever exist (no marker, no parts)."""

    def upload(self, job: OffloadJob, managed_ledger_name: str | None) -> UploadedData:
        settings, plans = job.settings, job.plans
        metadata = object_user_metadata(
            ROLE_DATA,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        entries = job.read_entries()
        cuts = _span_cuts(job)
        framed = FramedBlocks([p.size for p in plans])
        block_crcs: list[int] = []
        span_crcs: list[int] = []
        uploaded: list[UploadedData] = []

        def frame() -> None:
            n = 0
            try:
                for n, plan in enumerate(plans):
                    if framed.cancelled.is_set():
                        raise OffloadError("offload abandoned: the data request failed")
                    writer = BlockWriter(plan.size)
                    summer = SpanSummer(_span_bounds(plan, cuts[n]))
                    block = writer.write_block_batches(
                        plan.first_entry_id, entries.batches(plan.entry_count), plan.size, summer
                    )
                    crc, spans = summer.finish(block)
                    block_crcs.append(crc)
                    if cuts[n]:
                        span_crcs.extend(spans)
                    job.record_zone(block, plan)
                    if n == len(plans) - 1:
                        job.check_all_read(entries)  # before the body can be complete
                    framed.set_block(n, block)
                data = UploadedData(
                    block_crc32c=block_crcs,
                    entries=entries,
                    stored_size=job.total,
                    span_crc32c=span_crcs,
                )
                uploaded.append(data)
                job.prepare_index(data, managed_ledger_name)  # while the store stores the data
            except BaseException as exc:
                framed.fail_from(n, exc)
                if not uploaded:
                    raise

        job.pool = pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offload-frame")
        framing = pool.submit(frame)
        try:
            job.put_data(entries, framed, metadata, checked_by_body=True)
        except BaseException as exc:
            framed.cancelled.set()
            failure = framed.failure()
            if failure is not None and failure is not exc:
                raise failure from None  # the framing's own error, not the aborted request's
            raise
        framing.result()
        pool.shutdown(wait=True)
        job.pool = None
        if job.progress is not None:
            job.progress(job.total, job.total)
        return uploaded[0]
