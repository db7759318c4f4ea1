"""The read path: entries of offloaded ledgers back from the object store.

Owns :class:`ReadHandle` (index loaded once, floor lookup, one ranged GET per random read,
streamed sequential reads with CRC32C checks), the ranged stream and its read-ahead thread, the
offsets cache, the object-level helpers (:func:`load_index`, whole-block fetches used by
Spark tasks and verification) and the tiered read of a topic (each ledger from whichever tier
holds it: :func:`read_entries_from`).

May import: ``formats``, the value modules, ``store``, ``metadata``, ``ledgers`` and
``runtime``. Must not import ``offload``, ``topics``, ``spark``, ``api`` or ``service`` (the
tiered read takes a topic through the small :class:`~offloader.read.tiered.TopicLedgers`
protocol instead of importing the managed ledger).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offloader.lazy import lazy_attribute

if TYPE_CHECKING:
    from offloader.read.handle import Entry, ReadHandle
    from offloader.read.objects import BlockRef, block_refs, fetch_block, load_index, read_block
    from offloader.read.offsets_cache import OffsetsCache
    from offloader.read.tiered import read_entries_from, read_ledger

#: where each name re-exported here lives: imported on first use (PEP 562), so that
#: importing one submodule (the Kafka upload imports ``transformed``'s chunk view)
#: does not load the whole package
_LAZY = {
    "BlockRef": "offloader.read.objects",
    "Entry": "offloader.read.handle",
    "OffsetsCache": "offloader.read.offsets_cache",
    "ReadHandle": "offloader.read.handle",
    "block_refs": "offloader.read.objects",
    "fetch_block": "offloader.read.objects",
    "load_index": "offloader.read.objects",
    "read_block": "offloader.read.objects",
    "read_entries_from": "offloader.read.tiered",
    "read_ledger": "offloader.read.tiered",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "BlockRef",
    "Entry",
    "OffsetsCache",
    "ReadHandle",
    "block_refs",
    "fetch_block",
    "load_index",
    "read_block",
    "read_entries_from",
    "read_ledger",
]
