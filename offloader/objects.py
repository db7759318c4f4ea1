"""Reading offloaded objects: the index (with Pulsar's version check) and whole blocks.

Shared by the ReadHandle, the Spark reader and verification. Every function takes an
:class:`~offloader.store.base.ObjectStore`; none keeps state or clients of its own, so
they can run in Spark executors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from formats.block import BlockEntry, iter_block_entries
from formats.extension import crc32c
from formats.index import OffloadIndex, decode_index
from formats.keys import check_format_version, data_key, index_key
from offloader.errors import (
    ChecksumMismatchError,
    ForeignObjectError,
    IndexInconsistentError,
    StoreUnavailable,
    UnsupportedVersionError,
)
from offloader.store.base import ObjectStore

#: Pulsar retries the index GET and parse three times on I/O errors
INDEX_GET_ATTEMPTS = 3
DEFAULT_READ_BUFFER = 1024 * 1024


def load_index(
    store: ObjectStore, ledger_id: int, uuid: str, *, check_version: bool = True
) -> OffloadIndex:
    """GET and decode a ledger's index; refuses objects that are not format version 1."""
    key = index_key(uuid, ledger_id)
    last_error: StoreUnavailable | None = None
    for _attempt in range(INDEX_GET_ATTEMPTS):
        try:
            result = store.get(key)
            break
        except StoreUnavailable as exc:
            last_error = exc
    else:
        assert last_error is not None
        raise last_error
    if check_version:
        try:
            check_format_version(result.metadata, key)
        except UnsupportedVersionError as exc:
            raise ForeignObjectError(str(exc)) from exc
    return decode_index(result.data)


def read_range(
    store: ObjectStore, key: str, start: int, end: int, *, read_buffer: int = DEFAULT_READ_BUFFER
) -> bytes:
    """Bytes ``[start, end)`` of an object, fetched with ranged GETs of ``read_buffer`` bytes."""
    if end <= start:
        return b""
    parts: list[bytes] = []
    pos = start
    while pos < end:
        chunk_end = min(pos + read_buffer, end)
        got = store.get_range(key, pos, chunk_end).data
        if not got:
            raise IndexInconsistentError(
                f"{key}: object ends at {pos}, expected data up to offset {end}"
            )
        parts.append(got)
        pos += len(got)
    return parts[0] if len(parts) == 1 else b"".join(parts)


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


def read_block(
    store: ObjectStore, ref: BlockRef, *, read_buffer: int = DEFAULT_READ_BUFFER
) -> Iterator[BlockEntry]:
    """Fetch one block with ranged GETs, check its CRC32C (if recorded) and its framing,
    and yield its entries; the block must hold exactly the entries the index promises."""
    data = read_range(store, ref.data_key, ref.start, ref.end, read_buffer=read_buffer)
    if len(data) != ref.end - ref.start:
        raise IndexInconsistentError(
            f"{ref.data_key}: block {ref.block} is {len(data)} bytes, index says "
            f"{ref.end - ref.start}"
        )
    if ref.crc32c is not None:
        actual = crc32c(data)
        if actual != ref.crc32c:
            raise ChecksumMismatchError(
                f"{ref.data_key}: block {ref.block} CRC32C is 0x{actual:08x}, the index "
                f"recorded 0x{ref.crc32c:08x}",
                offset=ref.start,
            )
    expected = ref.first_entry_id
    for entry in iter_block_entries(
        data, base_offset=ref.start, expected_first_entry_id=ref.first_entry_id
    ):
        expected = entry.entry_id + 1
        yield entry
    if expected != ref.last_entry_id + 1:
        raise IndexInconsistentError(
            f"{ref.data_key}: block {ref.block} ends at entry {expected - 1}, the index "
            f"expects entries up to {ref.last_entry_id}"
        )
