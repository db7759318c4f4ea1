"""Chunked messages (a message larger than the broker's max_message_size) put back together,
and :func:`iter_messages`: a stream of entries -> its messages.

The producer compresses (and encrypts) the whole message, then cuts the result into chunks,
one entry each, in order, with the same ``uuid`` ("<producer>-<sequence_id>"), ``chunk_id``
0..n-1, ``num_chunks_from_msg`` n and ``total_chunk_msg_size`` (the size of the compressed
whole). The chunks may span entries, blocks and ledgers, and may interleave with other
producers' messages. A reassembled message takes the id of its last chunk (as Pulsar's
``ChunkMessageIdImpl`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from formats.pulsar.compression import DEFAULT_LIMIT
from formats.pulsar.entry import Message, ParsedEntry, entry_messages, parse_entry
from formats.pulsar.errors import ChunkError

if TYPE_CHECKING:
    from formats.pulsar.crypto import Decryptor


@dataclass
class _Pending:
    first: ParsedEntry
    count: int
    total: int
    next_id: int = 1
    size: int = 0
    parts: list[bytes] = field(default_factory=list)


class ChunkAssembler:
    """Collects chunks in entry order; :meth:`add` returns the whole entry when complete.

    ``skip_orphans``: a chunk whose start was never seen (a reader that began mid-message,
    e.g. a Spark task that starts at a block boundary) is ignored instead of an error.
    """

    def __init__(self, *, limit: int = DEFAULT_LIMIT, skip_orphans: bool = False) -> None:
        self.limit = limit
        self.skip_orphans = skip_orphans
        self._pending: dict[str, _Pending] = {}
        #: orphan chunks skipped so far
        self.skipped = 0

    @property
    def incomplete(self) -> int:
        """Messages whose chunks began but did not all arrive (yet)."""
        return len(self._pending)

    def add(self, parsed: ParsedEntry, ledger_id: int, entry_id: int) -> ParsedEntry | None:
        md = parsed.metadata
        uuid = md.uuid or ""
        count = md.num_chunks_from_msg or 0
        total = md.total_chunk_msg_size if md.total_chunk_msg_size is not None else -1
        chunk_id = md.chunk_id if md.chunk_id is not None else -1

        def fail(reason: str) -> ChunkError:
            self._pending.pop(uuid, None)
            return ChunkError(
                f"chunk {chunk_id} of {uuid!r}: {reason}", ledger_id=ledger_id, entry_id=entry_id
            )

        if count < 2 or not 0 <= chunk_id < count or not 0 <= total <= self.limit:
            raise fail(f"inconsistent chunk fields (num_chunks {count}, total size {total})")
        if chunk_id == 0:
            pending = _Pending(parsed, count, total)
            self._pending[uuid] = pending
        else:
            got = self._pending.get(uuid)
            if got is None:
                if self.skip_orphans:
                    self.skipped += 1
                    return None
                raise fail("its first chunk was never seen")
            pending = got
            if chunk_id != pending.next_id:
                raise fail(f"expected chunk {pending.next_id}")
            if count != pending.count or total != pending.total:
                raise fail("num_chunks or total size differs from the first chunk")
            pending.next_id += 1
        pending.size += len(parsed.payload)
        if pending.size > pending.total:
            raise fail(f"chunks hold more than total_chunk_msg_size {pending.total} bytes")
        pending.parts.append(parsed.payload)
        if chunk_id < count - 1:
            return None
        del self._pending[uuid]
        if pending.size != pending.total:
            raise fail(f"chunks hold {pending.size} bytes, total_chunk_msg_size {pending.total}")
        return replace(pending.first, payload=b"".join(pending.parts))


def iter_messages(
    entries: Iterable[tuple[int, int, bytes | bytearray | memoryview]],
    *,
    partition: int = -1,
    decryptor: Decryptor | None = None,
    verify_checksum: bool = True,
    limit: int = DEFAULT_LIMIT,
    assembler: ChunkAssembler | None = None,
    include_markers: bool = False,
) -> Iterator[Message]:
    """Messages of ``(ledger_id, entry_id, payload)`` entries in order, chunks reassembled
    across entries and ledgers; chunks left incomplete at the end are not yielded (the
    assembler's ``incomplete`` counts them)."""
    chunks = assembler if assembler is not None else ChunkAssembler(limit=limit)
    for ledger_id, entry_id, data in entries:
        parsed = parse_entry(
            data, ledger_id=ledger_id, entry_id=entry_id, verify_checksum=verify_checksum
        )
        if parsed.metadata.is_chunk:
            whole = chunks.add(parsed, ledger_id, entry_id)
            if whole is None:
                continue
            parsed = whole
        yield from entry_messages(
            parsed,
            ledger_id=ledger_id,
            entry_id=entry_id,
            partition=partition,
            decryptor=decryptor,
            limit=limit,
            include_markers=include_markers,
        )
