"""Encode a whole closed ledger in memory: data object bytes and index bytes.

Used by ``offloader objects encode``, tests and benchmarks; the streaming writer
(``offloader/offload/writer.py``) uses the same pieces block by block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from formats.block import BlockWriter, Buffer
from formats.extension import ExtensionSection, IndexExtension, crc32c, fine_offsets_for
from formats.index import OffloadIndex, encode_index, index_from_plans
from formats.layout import BlockPlan, plan_blocks
from formats.ledger_metadata import LedgerMetadata
from formats.wire import DEFAULT_FINE_OFFSET_INTERVAL


@dataclass(frozen=True)
class EncodedLedger:
    data: bytes
    index: bytes
    plans: tuple[BlockPlan, ...]
    offload_index: OffloadIndex


def metadata_for_entries(metadata: LedgerMetadata, entry_lengths: Sequence[int]) -> LedgerMetadata:
    """The metadata with ``length`` and ``lastEntryId`` taken from the entries themselves."""
    return dataclasses.replace(
        metadata, length=sum(entry_lengths), last_entry_id=len(entry_lengths) - 1
    )


def encode_ledger(
    payloads: Sequence[Buffer],
    metadata: LedgerMetadata,
    max_block_size: int,
    *,
    with_extension: bool = True,
    fine_interval: int = DEFAULT_FINE_OFFSET_INTERVAL,
    zone_maps: bool = False,
) -> EncodedLedger:
    lengths = [len(p) for p in payloads]
    plans = plan_blocks(lengths, max_block_size)
    writer = BlockWriter(max(p.size for p in plans))
    data = bytearray()
    crcs = []
    for plan in plans:
        block = writer.write_block(
            plan.first_entry_id, payloads[plan.first_entry_id : plan.last_entry_id + 1], plan.size
        )
        crcs.append(crc32c(block))
        data += block
    extension = None
    if with_extension:
        sections: tuple[ExtensionSection, ...] = ()
        if zone_maps:  # as the writer does for Pulsar message entries
            from formats.pulsar.zone_maps import zone_maps_section, zone_of_entries

            zones = [
                zone_of_entries(payloads[p.first_entry_id : p.last_entry_id + 1]) for p in plans
            ]
            sections = (zone_maps_section(zones),)
        extension = IndexExtension(
            tuple(crcs), tuple(fine_offsets_for(plans, lengths, fine_interval)), sections
        )
    index = index_from_plans(metadata_for_entries(metadata, lengths), plans, extension)
    return EncodedLedger(
        bytes(data), encode_index(index, with_extension=with_extension), tuple(plans), index
    )
