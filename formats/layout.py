"""Which entries go in which block: Pulsar's block-size rule (spec/block-format.md §4).

For the block starting at entry ``s`` with ``w`` payload bytes already written::

    block_size = min(max_block, 12 * (last_entry_id - s + 1) + (length - w) + 128)

so every block but the last is exactly ``max_block`` bytes (padded) and the last is sized
exactly. Entries never straddle blocks. Unlike Pulsar, an entry bigger than
``max_block - 140`` is refused up front (:class:`EntryTooLargeError`) instead of silently
truncating the offload, and ``length`` is the sum of the entries' real lengths.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from formats.errors import EmptyLedgerError, EntryTooLargeError, FormatError
from formats.framing import framed_prefix
from formats.wire import BLOCK_HEADER_LEN, BLOCK_OVERHEAD, ENTRY_HEADER_LEN, S3_MAX_PARTS


@dataclass(frozen=True)
class BlockPlan:
    """One block of the data object (one multipart part)."""

    part_number: int  # 1-based
    first_entry_id: int
    last_entry_id: int
    offset: int  # of the block's header in the data object
    size: int  # bytes, header and padding included
    payload_bytes: int

    @property
    def entry_count(self) -> int:
        return self.last_entry_id - self.first_entry_id + 1

    @property
    def padding_bytes(self) -> int:
        return (
            self.size - BLOCK_HEADER_LEN - ENTRY_HEADER_LEN * self.entry_count - self.payload_bytes
        )


def max_entry_size(max_block_size: int) -> int:
    """The largest payload a block of ``max_block_size`` bytes can hold."""
    return max_block_size - BLOCK_OVERHEAD


def block_size_for(remaining_entries: int, remaining_payload: int, max_block_size: int) -> int:
    """Pulsar's ``calculateBlockSize``."""
    return min(
        max_block_size,
        ENTRY_HEADER_LEN * remaining_entries + remaining_payload + BLOCK_HEADER_LEN,
    )


def check_entry_sizes(
    entry_lengths: Sequence[int], max_block_size: int, *, bounds: tuple[int, int] | None = None
) -> None:
    """Refuse negative lengths and entries too big for one block, naming the first culprit.
    ``bounds``: the smallest and largest length, when the caller already has them."""
    limit = max_entry_size(max_block_size)
    if not entry_lengths:
        return
    smallest, largest = bounds if bounds is not None else (min(entry_lengths), max(entry_lengths))
    if smallest >= 0 and largest <= limit:
        return
    for entry_id, length in enumerate(entry_lengths):
        if length < 0:
            raise FormatError(f"entry {entry_id} has a negative length {length}")
        if length > limit:
            raise EntryTooLargeError(
                f"entry {entry_id} is {length} bytes; a block of {max_block_size} bytes holds at "
                f"most {limit} (max block size - 140). Raise the max block size to at least "
                f"{length + BLOCK_OVERHEAD} bytes to offload this ledger"
            )


def framed_prefix_sums(entry_lengths: Sequence[int]) -> tuple[array[int], int, int]:
    """``F[i]``: the framed bytes (12-byte header + payload) of entries ``0..i-1`` (``F[0]``
    is 0), one pass in C when built; with the smallest and largest length. F is strictly
    increasing, so where entries end is a binary search."""
    raw, smallest, largest = framed_prefix(entry_lengths)
    prefix = array("q")
    prefix.frombytes(raw)
    return prefix, smallest, largest


def plan_blocks(entry_lengths: Sequence[int], max_block_size: int) -> list[BlockPlan]:
    """Plan every block of a closed ledger whose entries (ids 0..n-1) have these lengths.

    An empty ledger has nothing to offload: :class:`EmptyLedgerError` (spec/block-format.md).
    Each block takes entries while they fit (Pulsar's loop), found by a binary search over the
    framed prefix sums instead of one step per entry.
    """
    if max_block_size <= BLOCK_OVERHEAD:
        raise FormatError(f"max block size {max_block_size} cannot hold any entry")
    count = len(entry_lengths)
    if count == 0:
        raise EmptyLedgerError("the ledger has no entries: there is nothing to offload")
    framed, smallest, largest = framed_prefix_sums(entry_lengths)
    check_entry_sizes(entry_lengths, max_block_size, bounds=(smallest, largest))
    total = framed[count] - ENTRY_HEADER_LEN * count
    plans: list[BlockPlan] = []
    start = 0
    written = 0
    offset = 0
    while start < count:
        size = block_size_for(count - start, total - written, max_block_size)
        # the entries start..end-1 whose framed bytes fit after the header
        end = bisect_right(framed, framed[start] + size - BLOCK_HEADER_LEN, start, count + 1) - 1
        # cannot be empty: every entry fits in an empty block (checked above)
        payload = framed[end] - framed[start] - ENTRY_HEADER_LEN * (end - start)
        plans.append(BlockPlan(len(plans) + 1, start, end - 1, offset, size, payload))
        offset += size
        written += payload
        start = end
    if len(plans) > S3_MAX_PARTS:
        raise FormatError(
            f"the ledger needs {len(plans)} blocks, above S3's limit of {S3_MAX_PARTS} parts: "
            "raise the max block size"
        )
    return plans


def data_object_length(plans: Sequence[BlockPlan]) -> int:
    return sum(p.size for p in plans)
