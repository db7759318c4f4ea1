"""Reading offloaded objects: the index (with Pulsar's version check) and whole blocks (one
streamed ranged GET each, CRC32C summed as the bytes arrive).

Shared by the ReadHandle, the Spark reader and verification. Every function takes an
:class:`~offloader.store.base.ObjectStore`; none keeps state or clients of its own, so
they can run in Spark executors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from formats.block import BlockEntry, PackedEntries, iter_block_entries
from formats.block_packer import BlockPacker
from formats.errors import FormatError
from formats.extension import IndexExtension, crc32c
from formats.index import OffloadIndex, decode_index
from formats.keys import check_format_version, data_key, index_key, parse_user_metadata
from formats.transform import CHUNKED_FORMAT_VERSION
from offloader.errors import (
    AccessDenied,
    ChecksumMismatchError,
    ForeignObjectError,
    IndexInconsistentError,
    ObjectNotFound,
    ReadError,
    StoreError,
    StoreUnavailable,
    UnsupportedVersionError,
)
from offloader.metadata.base import OffloadContext
from offloader.read.prefetch import RangePrefetcher
from offloader.store.base import GetResult, ObjectStore

#: Pulsar retries the index GET and parse three times on I/O errors
INDEX_GET_ATTEMPTS = 3
#: an index larger than this is refused unread when its size was not recorded (ours are a
#: few KB per GB of data: a 640 GB ledger of 64 MiB blocks needs about 160 MB of fine offsets)
MAX_INDEX_BYTES = 256 * 1024 * 1024
#: an index of unrecorded size is fetched with a first GET of this many bytes (most indexes
#: fit), which also tells its size: a larger one is refused above MAX_INDEX_BYTES unread
INDEX_FIRST_GET = 1024 * 1024
DEFAULT_READ_BUFFER = 1024 * 1024
#: chunks a block fetch reads ahead of the caller (which keeps the whole block anyway)
BLOCK_PREFETCH_DEPTH = 16


@dataclass(frozen=True)
class RecordedOffload:
    """What the metadata recorded about an offload when it completed: the index object's size
    and CRC32C and the block CRC32Cs. A read compares the fetched index with them, so a
    replaced or swapped index is refused, and uses the block CRC32Cs when the index has no
    extension (a stripped extension must not switch the checks off)."""

    index_size: int | None = None
    index_crc32c: int | None = None
    block_crc32c: tuple[int, ...] = ()

    @classmethod
    def of(cls, context: OffloadContext | None) -> RecordedOffload | None:
        if context is None or not context.complete:
            return None
        return cls(context.index_size, context.index_crc32c, tuple(context.block_crc32c))


def load_index(
    store: ObjectStore,
    ledger_id: int,
    uuid: str,
    *,
    check_version: bool = True,
    recorded: RecordedOffload | None = None,
) -> OffloadIndex:
    """GET and decode a ledger's index; refuses objects that are not format version 1.

    The GET asks for at most the recorded size (else :data:`MAX_INDEX_BYTES`) plus one byte,
    so an index larger than that is refused before it is read (``IndexInconsistentError``);
    with ``recorded``, a size or CRC32C other than the recorded one is refused too, and the
    recorded block CRC32Cs stand in for a missing extension. Errors name the object and the
    ledger."""
    key = index_key(uuid, ledger_id)
    what = f"index object {key} of ledger {ledger_id} in {store.url}"
    first = INDEX_FIRST_GET
    if recorded is not None and recorded.index_size is not None:
        first = recorded.index_size + 1  # one byte more shows a longer object
    result = _get_index_range(store, key, what, 0, first)
    _check_recorded_size(what, result.size, recorded)
    if len(result.data) < result.size:  # size unrecorded, and below the bound: the rest
        rest = _get_index_range(store, key, what, len(result.data), result.size)
        result = dataclasses.replace(result, data=result.data + rest.data)
    if check_version:
        try:
            check_object_version(result.metadata, key)
        except UnsupportedVersionError as exc:
            raise ForeignObjectError(str(exc)) from exc
    if recorded is not None and recorded.index_crc32c is not None:
        actual = crc32c(result.data)
        if actual != recorded.index_crc32c:
            raise ChecksumMismatchError(
                f"{what}: CRC32C is 0x{actual:08x}, the metadata recorded "
                f"0x{recorded.index_crc32c:08x}: not the index this ledger was offloaded with"
            )
    try:
        index = decode_index(result.data)
    except FormatError as exc:
        raise _named(exc, what) from exc
    if index.extension is None and recorded is not None and recorded.block_crc32c:
        if len(recorded.block_crc32c) != index.block_count:
            raise IndexInconsistentError(
                f"{what} has {index.block_count} blocks, the metadata recorded "
                f"{len(recorded.block_crc32c)} block CRC32Cs"
            )
        index = dataclasses.replace(index, extension=IndexExtension(recorded.block_crc32c))
    return index


def _get_index_range(store: ObjectStore, key: str, what: str, start: int, end: int) -> GetResult:
    last_error: StoreUnavailable | None = None
    for _attempt in range(INDEX_GET_ATTEMPTS):
        try:
            return store.get_range(key, start, end)
        except StoreUnavailable as exc:
            last_error = exc
        except (ObjectNotFound, AccessDenied):
            raise
        except StoreError as exc:  # an empty object: no range of it can be read
            raise IndexInconsistentError(f"{what} cannot be read as an index: {exc}") from exc
    assert last_error is not None
    raise last_error


def _check_recorded_size(what: str, size: int, recorded: RecordedOffload | None) -> None:
    expected = None if recorded is None else recorded.index_size
    if expected is not None and size != expected:
        raise IndexInconsistentError(
            f"{what} is {size} bytes, the metadata recorded {expected}: not the index this "
            "ledger was offloaded with (replaced or swapped?); refused before reading it"
        )
    if size > MAX_INDEX_BYTES:
        raise IndexInconsistentError(
            f"{what} is {size} bytes, more than the {MAX_INDEX_BYTES} any index needs; "
            "refused before reading it"
        )


def _named(exc: FormatError, what: str) -> FormatError:
    """The same typed error, its message prefixed with the object it was found in."""
    try:
        named = type(exc)(f"{what}: {exc}")
    except TypeError:  # pragma: no cover - every format error takes a message
        return exc
    named.offset = exc.offset
    return named


def check_object_version(metadata: Mapping[str, str], key: str) -> None:
    """Pulsar's format version ``1``, or ours for transformed objects (spec/transforms.md §4);
    anything else is refused with Pulsar's message (``UnsupportedVersionError``)."""
    if parse_user_metadata(metadata).format_version != CHUNKED_FORMAT_VERSION:
        check_format_version(metadata, key)


@dataclass(frozen=True)
class BlockRef:
    """Everything needed to read one block, picklable (Spark partitions carry these)."""

    ledger_id: int
    uuid: str
    block: int
    start: int
    end: int
    first_entry_id: int
    last_entry_id: int
    crc32c: int | None

    @property
    def data_key(self) -> str:
        return data_key(self.uuid, self.ledger_id)


def block_refs(index: OffloadIndex, ledger_id: int, uuid: str) -> list[BlockRef]:
    """One :class:`BlockRef` per block of an index."""
    refs = []
    crcs = index.extension.block_crc32c if index.extension is not None else None
    for i, row in enumerate(index.entries):
        start, end = index.block_span(i)
        refs.append(
            BlockRef(
                ledger_id=ledger_id,
                uuid=uuid,
                block=i,
                start=start,
                end=end,
                first_entry_id=row.entry_id,
                last_entry_id=index.block_last_entry_id(i),
                crc32c=None if crcs is None else crcs[i],
            )
        )
    return refs


def fetch_block(
    store: ObjectStore,
    ref: BlockRef,
    *,
    read_buffer: int = DEFAULT_READ_BUFFER,
    out: memoryview | None = None,
    prefetch: bool = True,
) -> bytes | memoryview:
    """One block's bytes, checked against the index: its length and (when recorded) its
    CRC32C (:class:`ChecksumMismatchError`).

    The block is one ranged GET (:meth:`ObjectStore.open_range`) whose body a
    :class:`~offloader.read.prefetch.RangePrefetcher` thread reads ``read_buffer`` bytes at a time,
    summing the CRC32C as the bytes arrive; S3's per-request cost is paid once per block and
    a dropped connection resumes where it stopped (on S3, on the same object version).

    With ``out`` (a writable buffer of at least the block's size, e.g. from
    :class:`offloader.spark.buffers.ReusableBuffers`) the chunks are copied into it and the
    block is returned as a view of its first bytes; otherwise as new bytes. ``prefetch=False``
    reads on the caller's thread (:func:`_fetch_chunks_inline`).
    """
    if out is None:
        chunks: list[bytes] = []
        _fetch_chunks(store, ref, read_buffer, chunks.append, prefetch=prefetch)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    size = ref.end - ref.start
    if len(out) < size:
        raise ValueError(f"fetch_block: out holds {len(out)} bytes, block {ref.block} is {size}")
    filled = 0

    def copy(chunk: bytes) -> None:
        nonlocal filled
        end = filled + len(chunk)
        if end > size:
            raise IndexInconsistentError(
                f"{ref.data_key}: block {ref.block} runs past the {size} bytes the index says"
            )
        out[filled:end] = chunk
        filled = end

    _fetch_chunks(store, ref, read_buffer, copy, prefetch=prefetch)
    return out[:size]


def check_data_version(metadata: Mapping[str, str], key: str, what: str) -> None:
    """Pulsar's ``VERSION_CHECK`` on a data object's GET (its response carries the user
    metadata): :class:`ForeignObjectError` naming the object and the version found."""
    try:
        check_format_version(metadata, key)
    except UnsupportedVersionError as exc:
        raise ForeignObjectError(f"{what}: {exc}") from exc


def _fetch_chunks(
    store: ObjectStore,
    ref: BlockRef,
    read_buffer: int,
    consume: Callable[[bytes], None],
    *,
    prefetch: bool = True,
) -> None:
    """Hand a block's bytes to ``consume`` chunk by chunk as they arrive, then check their
    length and CRC32C (see :func:`fetch_block`). ``prefetch=False`` reads on the caller's
    thread instead of a :class:`RangePrefetcher`'s (same checks, same errors)."""
    if not prefetch:
        _fetch_chunks_inline(store, ref, read_buffer, consume)
        return
    key = ref.data_key
    ahead = RangePrefetcher(
        store,
        key,
        ref.start,
        ref.end,
        chunk=read_buffer,
        depth=BLOCK_PREFETCH_DEPTH,
        crc_boundaries=(ref.start, ref.end) if ref.crc32c is not None else (),
    )
    size = 0
    try:
        while not ahead.exhausted:
            chunk = ahead.take()
            if not isinstance(chunk, bytes):  # pragma: no cover - no pool here: always bytes
                chunk = bytes(chunk)
            if size == 0:  # the first GET's response: the data object's format version
                check_data_version(ahead.object_metadata, key, f"offloaded ledger {ref.ledger_id}")
            size += len(chunk)
            consume(chunk)
    except ReadError as exc:
        total = ahead.object_size
        if total is not None and total < ref.end:
            raise IndexInconsistentError(
                f"{key}: the object ends at {total}, block {ref.block} runs to offset {ref.end}"
            ) from exc
        raise
    finally:
        ahead.close()
    actual = ahead.region_crc(ref.start, ref.end) if ref.crc32c is not None else None
    _check_block(ref, size, actual)


def _fetch_chunks_inline(
    store: ObjectStore, ref: BlockRef, read_buffer: int, consume: Callable[[bytes], None]
) -> None:
    """:func:`_fetch_chunks` without the read-ahead thread: for a caller that has nothing else
    to do while the bytes arrive (a Spark task: the other cores run the other tasks). The
    thread's hand-overs (a queue, its wake-ups, the GIL going back and forth per chunk) cost
    about a third of the CPU a block read adds to the raw download of its bytes."""
    key = ref.data_key
    reader = None
    size = 0
    crc = 0
    summing = ref.crc32c is not None
    try:
        reader = store.open_range(key, ref.start, ref.end)
        check_data_version(reader.metadata, key, f"offloaded ledger {ref.ledger_id}")
        left = min(ref.end, reader.size) - ref.start
        while left > 0:
            chunk = reader.read(min(read_buffer, left))
            if not chunk:
                break
            if summing:
                crc = crc32c(chunk, crc)
            size += len(chunk)
            left -= len(chunk)
            consume(chunk)
    except ReadError as exc:
        if reader is not None and reader.size < ref.end:
            raise IndexInconsistentError(
                f"{key}: the object ends at {reader.size}, block {ref.block} runs to offset "
                f"{ref.end}"
            ) from exc
        raise
    finally:
        if reader is not None:
            reader.close()
    _check_block(ref, size, crc if summing else None)


def _check_block(ref: BlockRef, size: int, actual: int | None) -> None:
    """The fetched block's length, then (when the index records one) its CRC32C."""
    key = ref.data_key
    if size != ref.end - ref.start:
        raise IndexInconsistentError(
            f"{key}: block {ref.block} is {size} bytes, index says {ref.end - ref.start}"
        )
    if ref.crc32c is not None:
        if actual is None:  # pragma: no cover - the thread sums every byte it delivers
            raise ReadError(f"{key}: block {ref.block} was not checksummed")
        if actual != ref.crc32c:
            raise ChecksumMismatchError(
                f"{key}: block {ref.block} CRC32C is 0x{actual:08x}, the index "
                f"recorded 0x{ref.crc32c:08x}",
                offset=ref.start,
            )


def read_block(
    store: ObjectStore,
    ref: BlockRef,
    *,
    read_buffer: int = DEFAULT_READ_BUFFER,
    out: memoryview | None = None,
    prefetch: bool = True,
) -> Iterator[BlockEntry]:
    """Fetch one block (:func:`fetch_block`, into ``out`` when given), check its framing, and
    yield its entries; the block must hold exactly the entries the index promises. The
    entries' payloads are views of the block's bytes."""
    data = fetch_block(store, ref, read_buffer=read_buffer, out=out, prefetch=prefetch)
    expected = ref.first_entry_id
    for entry in iter_block_entries(
        data, base_offset=ref.start, expected_first_entry_id=ref.first_entry_id
    ):
        expected = entry.entry_id + 1
        yield entry
    _check_entry_count(ref, expected - ref.first_entry_id)


def read_block_packed(
    store: ObjectStore,
    ref: BlockRef,
    *,
    read_buffer: int = DEFAULT_READ_BUFFER,
    out: memoryview | None = None,
    prefetch: bool = True,
) -> PackedEntries:
    """Fetch one block and pack its entries as an Arrow-style binary column, chunk by chunk as
    the bytes arrive (:class:`formats.block_packer.BlockPacker`: no copy of the whole block,
    and the packing overlaps the download). The block's length and CRC32C are checked before
    its framing, with the same checks as :func:`read_block`. The payloads go to ``out`` when
    given (a writable buffer of at least the block's size, e.g. from
    :class:`offloader.spark.buffers.ReusableBuffers`). ``prefetch=False`` reads on the
    caller's thread (see :func:`_fetch_chunks_inline`)."""
    packer = BlockPacker(
        ref.end - ref.start,
        base_offset=ref.start,
        expected_first_entry_id=ref.first_entry_id,
        out=out,
    )
    _fetch_chunks(store, ref, read_buffer, packer.feed, prefetch=prefetch)
    packed = packer.finish()
    _check_entry_count(ref, packed.count)
    return packed


def _check_entry_count(ref: BlockRef, count: int) -> None:
    if ref.first_entry_id + count != ref.last_entry_id + 1:
        raise IndexInconsistentError(
            f"{ref.data_key}: block {ref.block} ends at entry {ref.first_entry_id + count - 1}, "
            f"the index expects entries up to {ref.last_entry_id}"
        )
