"""Writing a transformed data object (spec/transforms.md): the offload writer's path when the
namespace's transform policy is not the identity.

:func:`resolve_write_transform` turns a :class:`~offloader.policies.TransformPolicy` into what
the writer needs (the chunk size, the zstd level, the key-encryption key from the key ring and
its id; a fresh data key is drawn per object). :class:`TransformedUpload` is the
:class:`~offloader.offload.job.UploadStrategy` of such an object, in place of the plain
writer's (:class:`~offloader.offload.writer.PlainUpload`): each block is framed exactly as for a
plain object into one of ``offload_concurrency`` reusable buffers, then transformed chunk by
chunk on the pool's threads (zstd and AES-GCM release the GIL), and the stored blocks are
joined **in order** into parts of at least 5 MiB (S3's minimum; a compressed block may be much
smaller than a part) uploaded on the same pool. Peak memory: ``offload_concurrency`` block
buffers, as many stored blocks waiting to be joined, one part being joined and
``offload_concurrency`` parts uploading.

Chunks whose first entry is a Pulsar message with a compression codec are not compressed again
(:func:`formats.transform.pulsar_compression_codec`, one look per chunk, no zstd attempt).
"""

from __future__ import annotations

import secrets
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from formats.block import BlockWriter
from formats.extension import crc32c
from formats.keys import FORMAT_VERSION_KEY, ROLE_DATA, object_user_metadata
from formats.layout import framed_prefix_sums
from formats.transform import (
    CHUNKED_FORMAT_VERSION,
    ChunkEncoder,
    ObjectIdentity,
    StoredChunk,
    TransformSection,
    pulsar_compression_codec,
    wrap_data_key,
)
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER_LEN, S3_MIN_PART_SIZE
from offloader.crashpoints import crash_point
from offloader.keyring import KeyRing, ring_path
from offloader.logs import get_logger
from offloader.policies import TransformPolicy
from offloader.store.base import UploadedPart

if TYPE_CHECKING:  # the Kafka tier imports WriteTransform from here, not the ledger writer
    from offloader.offload.job import OffloadJob, UploadedData

__all__ = ["TransformedUpload", "WriteTransform", "resolve_write_transform"]

log = get_logger(__name__)


@dataclass(frozen=True)
class WriteTransform:
    """How one offload transforms its data object (``kek`` is never printed)."""

    chunk_size: int
    zstd_level: int | None
    key_id: str | None = None
    kek: bytes | None = field(default=None, repr=False)

    @property
    def encrypted(self) -> bool:
        return self.kek is not None

    def describe(self) -> str:
        parts = (["zstd"] if self.zstd_level is not None else []) + (
            [f"aes-256-gcm(key {self.key_id})"] if self.encrypted else []
        )
        return "+".join(parts)

    def section(
        self, block_lengths: Sequence[int], chunks: Sequence[StoredChunk], data_key: bytes | None
    ) -> TransformSection:
        """The transform section of an object written with this transform: its blocks'
        original lengths, its chunks in order, and ``data_key`` wrapped by the key-encryption
        key (``data_key`` None: not encrypted)."""
        return TransformSection(
            chunk_size=self.chunk_size,
            block_lengths=tuple(block_lengths),
            chunks=tuple(chunks),
            encrypted=self.encrypted,
            compression=self.zstd_level is not None,
            key_id=self.key_id or "",
            wrapped_key=(
                wrap_data_key(self.kek, data_key)
                if self.kek is not None and data_key is not None
                else b""
            ),
        )


def resolve_write_transform(
    policy: TransformPolicy, key_ring: str | None, chunk_size: int
) -> WriteTransform | None:
    """None for the identity policy (a plain Pulsar object); else the transform, with the
    key-encryption key (``MissingKeyError`` naming the id, ``KeyRingError``)."""
    if policy.is_identity:
        return None
    kek = key_id = None
    if policy.encrypted:
        ring = KeyRing(ring_path(key_ring))
        key_id = policy.key_id or ring.active_key_id()
        kek = ring.key(key_id)
    return WriteTransform(chunk_size, policy.zstd_level, key_id, kek)


class _EntryStarts(Sequence[int]):
    """Block offsets of the entry frames of one block, computed on demand (bisect-able)."""

    def __init__(self, framed: Sequence[int], first: int, end: int) -> None:
        self._framed, self._first, self._end = framed, first, end

    def __len__(self) -> int:
        return self._end - self._first

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...
    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        framed = self._framed
        return BLOCK_HEADER_LEN + framed[self._first + i] - framed[self._first]


def _hints(block: memoryview, starts: _EntryStarts, chunk_size: int) -> list[bool]:
    """Per chunk: False when the entry covering its first byte is an already-compressed
    Pulsar message (the block header's chunk looks at the block's first entry)."""
    hints = []
    for chunk_start in range(0, len(block), chunk_size):
        i = max(bisect_right(starts, chunk_start) - 1, 0)
        frame = starts[i]
        length = int.from_bytes(block[frame : frame + 4], "big", signed=True)
        body = block[frame + ENTRY_HEADER_LEN : frame + ENTRY_HEADER_LEN + max(length, 0)]
        hints.append(pulsar_compression_codec(body) == 0)
    return hints


def _transform_block(
    encoder: ChunkEncoder, index: int, block: memoryview, hints: list[bool] | None
) -> tuple[list[bytes], list[StoredChunk], int]:
    """On a pool thread: the block's CRC32C (of its original bytes) and its stored chunks."""
    crc = crc32c(block)
    stored, rows = encoder.encode_block_chunks(index, block, hints)
    return stored, rows, crc


def _upload_part(job: OffloadJob, upload_id: str, number: int, body: bytes) -> UploadedPart:
    """On a pool thread: one part of joined stored blocks, with its CRC32C."""
    return job.store.upload_part(job.dkey, upload_id, number, body, crc32c(body))


class TransformedUpload:
    """The :class:`~offloader.offload.job.UploadStrategy` of a transformed data object (see
    the module docstring); records the upload on the job so that its ``clean_up`` removes
    everything on failure."""

    def __init__(self, transform: WriteTransform) -> None:
        self.transform = transform

    def upload(self, job: OffloadJob, managed_ledger_name: str | None) -> UploadedData:
        from offloader.offload.job import UploadedData  # the ledger writer: on first use

        transform = self.transform
        settings, plans = job.settings, job.plans
        total = job.total
        data_key = secrets.token_bytes(32) if transform.encrypted else None
        identity = ObjectIdentity(job.uuid, job.reader.ledger_id)
        encoder = ChunkEncoder(
            identity,
            chunk_size=transform.chunk_size,
            zstd_level=transform.zstd_level,
            data_key=data_key,
        )
        metadata = object_user_metadata(
            ROLE_DATA,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        metadata[FORMAT_VERSION_KEY] = CHUNKED_FORMAT_VERSION
        upload_id, entries = job.start_upload(metadata)
        framed = framed_prefix_sums(job.lengths)[0] if transform.zstd_level is not None else None
        window = settings.offload_concurrency
        buffer_size = max(p.size for p in plans)
        job.pool = pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="offload-chunk")
        free: list[BlockWriter] = []
        made = 0
        pending: deque[
            tuple[Future[tuple[list[bytes], list[StoredChunk], int]], BlockWriter, int]
        ] = deque()
        uploads: dict[Future[UploadedPart], int] = {}
        parts: list[UploadedPart] = []
        crcs: list[int] = []
        rows: list[StoredChunk] = []
        joined: list[bytes] = []
        joined_size = stored_size = done = 0
        part_number = 1

        def collect(block: bool) -> None:
            if not uploads:
                return
            finished, _ = wait(
                list(uploads), timeout=None if block else 0, return_when=FIRST_COMPLETED
            )
            for future in finished:
                uploads.pop(future)
                parts.append(future.result())
                crash_point("writer.after_part")

        def send_part() -> None:
            nonlocal joined_size, part_number
            body = joined[0] if len(joined) == 1 else b"".join(joined)
            joined.clear()
            joined_size = 0
            while len(uploads) >= window:
                collect(block=True)
            future = pool.submit(_upload_part, job, upload_id, part_number, body)
            uploads[future] = len(body)
            part_number += 1

        def take_transformed() -> None:
            nonlocal joined_size, stored_size, done
            future, writer, size = pending.popleft()
            stored, block_rows, crc = future.result()
            free.append(writer)
            crcs.append(crc)
            rows.extend(block_rows)
            size_stored = sum(len(c) for c in stored)
            joined.extend(stored)
            joined_size += size_stored
            stored_size += size_stored
            done += size
            if job.progress is not None:
                job.progress(done, total)
            if joined_size >= S3_MIN_PART_SIZE:
                send_part()

        for n, plan in enumerate(plans):
            while pending and pending[0][0].done():
                take_transformed()
            collect(block=False)
            if not free and made < window:
                free.append(BlockWriter(buffer_size))
                made += 1
            while not free:
                take_transformed()
            writer = free.pop()
            block = writer.write_block_batches(
                plan.first_entry_id, entries.batches(plan.entry_count), plan.size
            )
            hints = None
            if framed is not None:
                starts = _EntryStarts(framed, plan.first_entry_id, plan.last_entry_id + 1)
                hints = _hints(block, starts, transform.chunk_size)
            pending.append(
                (pool.submit(_transform_block, encoder, n, block, hints), writer, plan.size)
            )
            job.record_zone(block, plan)  # read-only, while the block is transformed
        while pending:
            take_transformed()
        if joined:
            send_part()
        while uploads:
            collect(block=True)
        job.complete_upload(upload_id, entries, parts)
        section = transform.section([p.size for p in plans], rows, data_key)
        log.info(
            "transformed data object written",
            ledger_id=job.reader.ledger_id,
            uuid=job.uuid,
            transform=transform.describe(),
            original_size=total,
            stored_size=stored_size,
            chunks=len(rows),
            parts=len(parts),
        )
        return UploadedData(crcs, entries, stored_size, [], section)
