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

from offloader.read.handle import Entry, ReadHandle
from offloader.read.objects import BlockRef, block_refs, fetch_block, load_index, read_block
from offloader.read.offsets_cache import OffsetsCache
from offloader.read.tiered import read_entries_from, read_ledger

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
