"""Uploading a Kafka segment's ``.log`` transformed (spec/transforms.md §8): chunked, each chunk
zstd-compressed and/or AES-256-GCM encrypted with the chunk codec of ``formats.transform``.

:func:`write_transform_for` chooses the topic's policy (the metadata store's, else
offloader.toml's ``[transform.kafka_topics]``, else none) and resolves its key; None means the
segment is uploaded exactly as before (byte-identical). :func:`upload_transformed_log` reads the
``.log`` in order in blocks of about ``part_size`` original bytes (a whole number of chunks),
every batch checked as its block is read (the uploader's
:class:`~offloader.kafka.segment_file.CheckedReader`: no pass before the first part), transforms
them on ``concurrency`` threads (zstd and AES-GCM release the GIL) under a fresh data key, joins
the stored blocks **in order** into parts of at least ``part_size`` bytes and uploads those on
as many threads (one PUT when the ``.log`` fits in one part). Chunks at least half made of
batches whose attributes carry a codec are not compressed again (decided without trying). The
chunks' associated data binds them to the segment id and base offset (``LOTK``).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import crc32c as crc32c_lib

from formats.kafka.spans import join_crcs
from formats.transform import (
    ChunkEncoder,
    ObjectIdentity,
    StoredChunk,
    TransformSection,
    kafka_compress_hints,
)
from offloader.errors import StoreError
from offloader.kafka.context import KafkaContext
from offloader.kafka.segment_file import CheckedReader
from offloader.logs import get_logger
from offloader.offload.transformed import WriteTransform, resolve_write_transform
from offloader.policies import TransformPolicy
from offloader.store.base import UploadedPart

log = get_logger(__name__)

#: user metadata on a transformed segment's ``.log`` and ``.chunks`` objects
TRANSFORM_METADATA_KEY = "kafka-transform"
TRANSFORM_METADATA_VALUE = "ledger-offloader-chunked-1"

Blocks = tuple[list[bytes], list[StoredChunk]]


def topic_transform(ctx: KafkaContext, topic: str) -> TransformPolicy:
    """The topic's policy: the metadata store's when set (even none), else offloader.toml's,
    else the identity."""
    stored = ctx.meta.get_topic_transform(topic)
    if stored is not None:
        return stored
    return dict(ctx.settings.topic_transforms).get(topic, TransformPolicy())


def write_transform_for(ctx: KafkaContext, topic: str) -> WriteTransform | None:
    """What new segments of ``topic`` are written with (None: plain). ``MissingKeyError``
    names a key the ring lacks, before anything is recorded or uploaded."""
    return resolve_write_transform(
        topic_transform(ctx, topic), ctx.settings.key_ring, ctx.settings.chunk_size
    )


def block_length(part_size: int, chunk_size: int) -> int:
    """Original bytes per block: about a part, a whole number of chunks, below 4 GiB."""
    return max(chunk_size, min(part_size, 1 << 31) // chunk_size * chunk_size)


def upload_transformed_log(
    ctx: KafkaContext,
    key: str,
    reader: CheckedReader,
    size: int,
    metadata: Mapping[str, str],
    transform: WriteTransform,
    identity: ObjectIdentity,
    compressed_spans: Sequence[tuple[int, int]],
) -> tuple[TransformSection, int]:
    """Upload the ``.log`` (``size`` bytes read in order with ``reader``, which checks every
    batch as it reads) transformed; its transform section and the CRC32C of the original bytes
    it read (combined from each block's, computed on the encoding threads).
    ``compressed_spans``: the byte ranges of the batches whose attributes carry a codec, as
    the reader's checks append them (those of a block are known once it is read)."""
    data_key = secrets.token_bytes(32) if transform.encrypted else None
    encoder = ChunkEncoder(
        identity,
        chunk_size=transform.chunk_size,
        zstd_level=transform.zstd_level,
        data_key=data_key,
    )
    block_len = block_length(ctx.settings.part_size, transform.chunk_size)
    starts = list(range(0, size, block_len))
    lengths = [min(block_len, size - s) for s in starts]
    block_crcs = [0] * len(starts)

    def read(n: int) -> tuple[bytearray, list[bool] | None]:
        """Block ``n`` (read on the calling thread, in order) and its compression hints."""
        start, length = starts[n], lengths[n]
        block = reader.read(length)
        hints = None
        if transform.zstd_level is not None:
            spans = list(compressed_spans)
            running = reader.open_batch()  # a batch that goes on into the next block
            if running is not None and running.compression:
                spans.append((running.position, running.end))
            hints = kafka_compress_hints(spans, start, length, transform.chunk_size)
        return block, hints

    def encode(n: int, block: bytearray, hints: list[bool] | None) -> Blocks:
        block_crcs[n] = crc32c_lib.crc32c(block)
        return encoder.encode_block_chunks(n, block, hints)

    if size <= ctx.settings.part_size:
        # one PUT, but maybe two blocks: a block is a whole number of chunks, so a part_size
        # that is not a multiple of the chunk size leaves a short second block
        stored, rows = [], []
        for n in range(len(starts)):
            block_stored, block_rows = encode(n, *read(n))
            stored += block_stored
            rows += block_rows
        reader.finish()
        body = b"".join(stored)
        ctx.store.put(key, body, metadata)
        stored_size = len(body)
    else:
        rows, stored_size = _multipart(ctx, key, metadata, len(starts), read, encode, reader)
    section = transform.section(lengths, rows, data_key)
    log.info(
        "transformed Kafka segment written",
        key=key,
        transform=transform.describe(),
        original_size=size,
        stored_size=stored_size,
        chunks=len(rows),
    )
    return section, join_crcs(block_crcs, lengths)


def _multipart(
    ctx: KafkaContext,
    key: str,
    metadata: Mapping[str, str],
    blocks: int,
    read: Callable[[int], tuple[bytearray, list[bool] | None]],
    encode: Callable[[int, bytearray, list[bool] | None], Blocks],
    reader: CheckedReader,
) -> tuple[list[StoredChunk], int]:
    """Blocks read in order (``read``, checked), transformed ``concurrency`` at a time,
    joined in order into parts."""
    store, window = ctx.store, ctx.settings.concurrency
    upload_id = store.create_multipart_upload(key, metadata)
    rows: list[StoredChunk] = []
    parts: list[UploadedPart] = []
    joined: list[bytes] = []
    joined_size = stored_size = 0
    number = 1
    try:
        with (
            ThreadPoolExecutor(window, "kafka-chunk") as encoders,
            ThreadPoolExecutor(window, "kafka-part") as senders,
        ):
            pending: deque[Future[Blocks]] = deque()
            uploads: set[Future[UploadedPart]] = set()

            def send() -> None:
                nonlocal joined_size, number
                body = joined[0] if len(joined) == 1 else b"".join(joined)
                joined.clear()
                joined_size = 0
                while len(uploads) >= window:
                    done, _ = wait(uploads, return_when=FIRST_COMPLETED)
                    for f in done:
                        uploads.discard(f)
                        parts.append(f.result())
                uploads.add(
                    senders.submit(
                        store.upload_part, key, upload_id, number, body, crc32c_lib.crc32c(body)
                    )
                )
                number += 1

            def take() -> None:
                nonlocal joined_size, stored_size
                stored, block_rows = pending.popleft().result()
                rows.extend(block_rows)
                joined.extend(stored)
                n = sum(len(c) for c in stored)
                joined_size += n
                stored_size += n
                if joined_size >= ctx.settings.part_size:
                    send()

            for n in range(blocks):
                while len(pending) >= window:
                    take()
                pending.append(encoders.submit(encode, n, *read(n)))
            reader.finish()
            while pending:
                take()
            if joined:
                send()
            for f in uploads:
                parts.append(f.result())
        parts.sort(key=lambda p: p.part_number)
        store.complete_multipart_upload(key, upload_id, parts)
    except BaseException:
        try:
            store.abort_multipart_upload(key, upload_id)
        except StoreError as exc:
            log.warning("abort of a failed segment upload failed", key=key, error=str(exc))
        raise
    return rows, stored_size
