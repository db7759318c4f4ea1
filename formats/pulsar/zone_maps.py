"""Zone maps: per block, the min/max publish_time and event_time of its Pulsar messages, kept in
the index extension's tagged section ``TAG_ZONE_MAPS`` (spec/index-format.md §4.3).

A reader skips a block only on what its zone proves: a block whose entries could not all be
decoded has no zone (read whole); a block with an encrypted entry has an unknown event range
(event times live inside the ciphertext). Payload::

    version u8 = 1 | block_count u32 | block_count x
        (flags u8 | publish_min i64 | publish_max i64 | event_min i64 | event_max i64)

flags: bit 0 ``KNOWN`` (the zone is valid), bit 1 ``HAS_PUBLISH``, bit 2 ``HAS_EVENT``,
bit 3 ``EVENT_UNKNOWN``; ranges are milliseconds since the epoch, 0 when their bit is clear.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from formats.errors import CorruptDataError, TruncatedError, UnsupportedVersionError
from formats.extension import TAG_ZONE_MAPS, ExtensionSection
from formats.pulsar.entry import entry_messages, parse_entry
from formats.pulsar.errors import PulsarMessageError

ZONE_MAPS_VERSION = 1
KNOWN, HAS_PUBLISH, HAS_EVENT, EVENT_UNKNOWN = 1, 2, 4, 8
_ROW = struct.Struct(">Bqqqq")
_HEAD = struct.Struct(">BI")
_I64 = (-(1 << 63), (1 << 63) - 1)

Range = tuple[int, int]


@dataclass(frozen=True)
class BlockZone:
    """What one block's messages span. ``publish``/``event`` None: no message has one."""

    publish: Range | None
    event: Range | None
    event_unknown: bool = False

    def range_of(self, column: str) -> tuple[bool, Range | None]:
        """``(known, range)`` for ``publish_time`` or ``event_time``; unknown: never skip."""
        if column == "publish_time":
            return True, self.publish
        if column == "event_time":
            return not self.event_unknown, self.event
        return False, None


def _widen(current: Range | None, value: int) -> Range:
    return (value, value) if current is None else (min(current[0], value), max(current[1], value))


def zone_of_entries(payloads: Iterable[bytes | bytearray | memoryview]) -> BlockZone | None:
    """The zone of a block's entries, or None when one is not a Pulsar message entry."""
    publish: Range | None = None
    event: Range | None = None
    unknown = False
    try:
        for payload in payloads:
            parsed = parse_entry(payload)
            md = parsed.metadata
            if md.marker_type is not None:
                continue
            publish = _widen(publish, md.publish_time)
            if md.encryption_keys:
                unknown = True
            elif md.is_chunk:  # every chunk carries the whole message's metadata
                if md.event_time is not None:
                    event = _widen(event, md.event_time)
            else:
                for message in entry_messages(parsed):
                    if message.event_time is not None:
                        event = _widen(event, message.event_time)
    except PulsarMessageError:
        return None
    for rng in (publish, event):
        if rng is not None and not (_I64[0] <= rng[0] and rng[1] <= _I64[1]):
            return None
    return BlockZone(publish, event, unknown)


def encode_zone_maps(zones: Sequence[BlockZone | None]) -> bytes:
    out = [_HEAD.pack(ZONE_MAPS_VERSION, len(zones))]
    for zone in zones:
        if zone is None:
            out.append(_ROW.pack(0, 0, 0, 0, 0))
            continue
        flags = KNOWN
        publish = zone.publish or (0, 0)
        event = zone.event or (0, 0)
        flags |= HAS_PUBLISH if zone.publish is not None else 0
        flags |= HAS_EVENT if zone.event is not None else 0
        flags |= EVENT_UNKNOWN if zone.event_unknown else 0
        out.append(_ROW.pack(flags, *publish, *event))
    return b"".join(out)


def decode_zone_maps(payload: bytes, block_count: int) -> tuple[BlockZone | None, ...]:
    """The zones of an index's ``block_count`` blocks (typed errors for anything else)."""
    if len(payload) < _HEAD.size:
        raise TruncatedError("zone maps section shorter than its header")
    version, count = _HEAD.unpack_from(payload)
    if version != ZONE_MAPS_VERSION:
        raise UnsupportedVersionError(f"zone maps version {version}")
    if count != block_count:
        raise CorruptDataError(f"zone maps for {count} blocks, the index has {block_count}")
    if len(payload) != _HEAD.size + count * _ROW.size:
        raise CorruptDataError(
            f"zone maps section of {len(payload)} bytes, expected {_HEAD.size + count * _ROW.size}"
        )
    zones: list[BlockZone | None] = []
    for i in range(count):
        flags, p_lo, p_hi, e_lo, e_hi = _ROW.unpack_from(payload, _HEAD.size + i * _ROW.size)
        if flags & ~(KNOWN | HAS_PUBLISH | HAS_EVENT | EVENT_UNKNOWN):
            raise CorruptDataError(f"zone maps block {i}: unknown flags {flags:#x}")
        if not flags & KNOWN:
            zones.append(None)
            continue
        if (flags & HAS_PUBLISH and p_lo > p_hi) or (flags & HAS_EVENT and e_lo > e_hi):
            raise CorruptDataError(f"zone maps block {i}: a range whose min exceeds its max")
        zones.append(
            BlockZone(
                (p_lo, p_hi) if flags & HAS_PUBLISH else None,
                (e_lo, e_hi) if flags & HAS_EVENT else None,
                bool(flags & EVENT_UNKNOWN),
            )
        )
    return tuple(zones)


def zone_maps_section(zones: Sequence[BlockZone | None]) -> ExtensionSection:
    return ExtensionSection(TAG_ZONE_MAPS, encode_zone_maps(zones))
