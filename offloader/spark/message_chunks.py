"""Chunked Pulsar messages in the ``pulsar-messages`` source: each one read exactly once.

A chunked message is one entry per chunk, in order, and its chunks may cross a block's end and
a ledger rollover (the producer's next chunk lands in the topic's next ledger). The task that
holds a message's FIRST chunk owns it: after its own block it reads on (:func:`continuation`)
through the rest of its ledger and then the topic's next ledgers, as the plan knows them in
ledger-id order, until every message it began is complete; the task whose block starts in the
middle of a message skips that orphan tail (``ChunkAssembler(skip_orphans=True)``).

While reading on, only the chunks of the messages the task began are used (every other entry
belongs to another task). A message that cannot complete is dropped, as a Pulsar consumer drops
a chunked message whose chunks do not all arrive in order: its next chunk is not where the next
ledger resumes (a ledger between them is not offloaded or was deleted), its producer is seen
sending a later sequence id, or the topic's known ledgers end first. Within one ledger a chunk
out of order is corrupt data: the typed :class:`~formats.pulsar.errors.ChunkError`.

:func:`following_ledgers` (driver) gives each task the ledgers it may have to read on into:
at most :data:`MAX_FOLLOWING_LEDGERS` of its topic's next ledgers (tasks whose topic is unknown
read on within their own ledger only).

The export (spec/export.md §5) places each message at its FIRST chunk's position
(:attr:`ChunkFollower.completed_from`), and asks ``wait_at_end``: a message still incomplete
when the known ledgers end is not dropped but kept in :attr:`ChunkFollower.waiting` (its last
chunk may be in a ledger that is not closed yet; the export's watermark stops before it),
unless it has expired: the entries read on reach a publish time more than
:data:`CHUNK_EXPIRY_MS` after its last chunk's (its producer stopped mid-message, e.g. crashed;
a Pulsar consumer expires such a message after the same time,
``expireTimeOfIncompleteChunkedMessage``), so a dead producer never holds an export back. The
decision depends only on entries of closed ledgers, so every re-run makes the same one.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from formats.pulsar.chunks import ChunkAssembler
from formats.pulsar.entry import ParsedEntry
from formats.pulsar.errors import ChunkError
from formats.transform import transform_of
from offloader.logs import get_logger
from offloader.read.objects import block_refs, load_index, read_block
from offloader.spark.plan import BlockTask, LocalLedgerTask, Task
from offloader.spark.tasks import executor_store, read_local_task, task_store

__all__ = [
    "CHUNK_EXPIRY_MS",
    "MAX_FOLLOWING_LEDGERS",
    "ChunkFollower",
    "continuation",
    "following_ledgers",
]

log = get_logger(__name__)

#: how many of its topic's next ledgers a task may read on into for a chunked message
MAX_FOLLOWING_LEDGERS = 16
#: a waiting chunked message expires once entries published this long after its last chunk are
#: read (the default of a Pulsar consumer's ``expireTimeOfIncompleteChunkedMessage``)
CHUNK_EXPIRY_MS = 60_000


@dataclass
class _Begun:
    producer: str
    sequence_id: int
    #: the ledger of its last chunk seen
    ledger_id: int
    #: ``(ledger_id, entry_id)`` of its first chunk
    first: tuple[int, int]
    #: publish time (ms) of its last chunk seen
    published: int = 0


class ChunkFollower:
    """The chunks of one task: :meth:`own` for its block's entries, :meth:`follow` for the
    entries read on after it; :attr:`begun` says whether reading on is still needed.

    ``wait_at_end``: :meth:`give_up` keeps the first chunks' positions of the messages still
    incomplete in :attr:`waiting` (they may complete later) instead of dropping them."""

    def __init__(self, *, wait_at_end: bool = False) -> None:
        self.assembler = ChunkAssembler(skip_orphans=True)
        self._begun: dict[str, _Begun] = {}
        self.wait_at_end = wait_at_end
        #: messages begun in the task and dropped as incomplete
        self.dropped = 0
        #: ``(ledger_id, entry_id)`` of the first chunk of the message :meth:`own` or
        #: :meth:`follow` returned last
        self.completed_from: tuple[int, int] = (-1, -1)
        #: first chunks' positions of the messages :meth:`give_up` left waiting
        self.waiting: list[tuple[int, int]] = []
        #: the latest publish time (ms) of the entries :meth:`follow` was given
        self.latest_published = 0

    @property
    def begun(self) -> bool:
        """Whether a chunked message begun in the task is still incomplete."""
        return bool(self._begun)

    def own(self, parsed: ParsedEntry, ledger_id: int, entry_id: int) -> ParsedEntry | None:
        """A chunk of the task's own entries: the whole message when this completes it."""
        md = parsed.metadata
        uuid = md.uuid or ""
        whole = self.assembler.add(parsed, ledger_id, entry_id)
        if whole is not None:
            begun = self._begun.pop(uuid, None)
            self.completed_from = begun.first if begun is not None else (ledger_id, entry_id)
        elif md.chunk_id == 0:
            self._begun[uuid] = _Begun(
                md.producer_name, md.sequence_id, ledger_id, (ledger_id, entry_id), md.publish_time
            )
        elif uuid in self._begun:
            self._begun[uuid].ledger_id = ledger_id
            self._begun[uuid].published = md.publish_time
        return whole

    def follow(self, parsed: ParsedEntry, ledger_id: int, entry_id: int) -> ParsedEntry | None:
        """An entry read on after the task's block: the whole message when it completes one the
        task began; any other entry is someone else's and only tells which can never complete."""
        md = parsed.metadata
        uuid = md.uuid or ""
        self.latest_published = max(self.latest_published, md.publish_time)
        begun = self._begun.get(uuid) if md.is_chunk else None
        if begun is None:
            for other, b in list(self._begun.items()):
                if md.producer_name == b.producer and md.sequence_id > b.sequence_id:
                    self._drop(other, "its producer sent a later message", ledger_id, entry_id)
            return None
        if md.chunk_id == 0:  # sent again from its start: the task holding that chunk owns it
            self._drop(uuid, "its producer sent it again", ledger_id, entry_id)
            return None
        try:
            whole = self.assembler.add(parsed, ledger_id, entry_id)
        except ChunkError:
            if ledger_id == begun.ledger_id:
                raise
            self._drop(uuid, "a chunk is missing across the ledger rollover", ledger_id, entry_id)
            return None
        if whole is not None:
            self.completed_from = begun.first
            del self._begun[uuid]
        else:
            begun.ledger_id = ledger_id
            begun.published = md.publish_time
        return whole

    def give_up(self) -> None:
        """The known entries ended: what is still incomplete is dropped (``wait_at_end``:
        left waiting)."""
        if self.wait_at_end:
            for uuid, begun in list(self._begun.items()):
                if self.latest_published - begun.published > CHUNK_EXPIRY_MS:
                    self._drop(
                        uuid,
                        f"expired: entries published more than {CHUNK_EXPIRY_MS} ms after its "
                        "last chunk were read (its producer stopped mid-message)",
                        *begun.first,
                    )
                    continue
                self.waiting.append(begun.first)
                log.info(
                    "chunked message waits for a later ledger",
                    uuid=uuid,
                    ledger_id=begun.first[0],
                    entry_id=begun.first[1],
                )
            self._begun.clear()
            return
        for uuid in list(self._begun):
            self._drop(uuid, "the topic's known ledgers end before its last chunk", None, None)

    def _drop(self, uuid: str, why: str, ledger_id: int | None, entry_id: int | None) -> None:
        del self._begun[uuid]
        self.dropped += 1
        log.warning(
            "incomplete chunked message dropped",
            uuid=uuid,
            reason=why,
            ledger_id=ledger_id,
            entry_id=entry_id,
        )


def _blocks_after(task: BlockTask, block: int) -> Iterator[tuple[int, int, bytes]]:
    """``(ledger_id, entry_id, payload)`` of the blocks of ``task``'s ledger after ``block``
    (-1: all of them), through the ledger's index (a transformed ledger through its view, its
    transform taken from that index)."""
    store = executor_store(task.store)
    ref = task.ref
    index = load_index(store, ref.ledger_id, ref.uuid)
    transform = transform_of(index.extension, index.data_object_length)
    blocks = task_store(dataclasses.replace(task, transform=transform), store)
    for later in block_refs(index, ref.ledger_id, ref.uuid)[block + 1 :]:
        for entry in read_block(blocks, later, read_buffer=task.store.settings.read_buffer_size):
            yield (later.ledger_id, entry.entry_id, bytes(entry.payload))


def continuation(task: Task, following: Sequence[Task]) -> Iterator[tuple[int, int, bytes]]:
    """The entries after ``task``: the rest of its ledger (``following`` starts with the rest
    of a local ledger), then each following ledger whole, read lazily."""
    if isinstance(task, BlockTask):
        yield from _blocks_after(task, task.ref.block)
    for later in following:
        if isinstance(later, BlockTask):
            yield from _blocks_after(later, -1)
        else:
            for _topic, ledger_id, entry_id, payload in read_local_task(later):
                yield ledger_id, entry_id, payload


def following_ledgers(tasks: Sequence[Task]) -> list[tuple[Task, ...]]:
    """For each task (same order), what :func:`continuation` reads after its own ledger's
    blocks: the rest of a local ledger, then the next ledgers of its topic (a block task of each,
    read whole; a local ledger as one task), at most :data:`MAX_FOLLOWING_LEDGERS`."""
    by_topic: dict[str, dict[int, list[Task]]] = {}
    for task in tasks:
        if task.topic is not None:
            by_topic.setdefault(task.topic, {}).setdefault(task.ledger_id, []).append(task)
    heads: dict[str, list[tuple[int, Task]]] = {}
    ends: dict[tuple[str, int], int] = {}
    for topic, ledgers in by_topic.items():
        for ledger_id in sorted(ledgers):
            group = ledgers[ledger_id]
            head = group[0]
            if isinstance(head, LocalLedgerTask):
                last = max(t.last_entry_id for t in group)
                ends[(topic, ledger_id)] = last
                head = dataclasses.replace(head, first_entry_id=0, last_entry_id=last)
            else:  # small to pickle: the transform is read again from the index if needed
                head = dataclasses.replace(head, transform=None, zone=None)
            heads.setdefault(topic, []).append((ledger_id, head))
    out: list[tuple[Task, ...]] = []
    for task in tasks:
        if task.topic is None:
            out.append(())
            continue
        topic_heads = heads[task.topic]
        at = bisect_right(topic_heads, task.ledger_id, key=lambda h: h[0])
        nxt = [h for _lid, h in topic_heads[at : at + MAX_FOLLOWING_LEDGERS]]
        rest: list[Task] = []
        end = ends.get((task.topic, task.ledger_id))
        if isinstance(task, LocalLedgerTask) and end is not None and task.last_entry_id < end:
            rest.append(
                dataclasses.replace(task, first_entry_id=task.last_entry_id + 1, last_entry_id=end)
            )
        out.append((*rest, *nxt))
    return out
