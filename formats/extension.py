"""Our index extension: block CRC32Cs and fine offsets, after the v1 index rows.

Pulsar's index parser reads ``count`` rows and ignores whatever follows, so this section is
invisible to Pulsar and the data object stays byte-identical (spec/index-format.md §4)::

    magic u32 = 0x4C4F4958 ("LOIX") | version u16 = 1 | flags u16 = 0 | section_len u32
    block_count u32 | block_count x crc32c u32
    fine_count u32  | fine_count x (entry_id i64, offset i64)
    [version 2 only] tagged_count u32 | tagged_count x (tag u16 | flags u16 | len u32 | payload)
    section_crc32c u32      (CRC32C of every byte of the section before it)

Version 2 adds tagged sections, each owned by one feature (span CRC32Cs, zone maps,
transforms); version 1 is still written when there are none, so objects without them stay
byte-identical. A reader skips a tagged section it does not know unless its ``critical`` flag
is set: then the object is refused (:class:`UnsupportedVersionError`), never read wrongly.

``offset`` is the object offset of the entry's 4-byte length field. Points are taken about
every ``interval`` bytes of data inside each block, so reaching any entry costs one ranged GET
of about ``interval`` bytes instead of a scan from its block's start.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c as _crc32c

from formats.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.layout import BlockPlan, framed_prefix_sums
from formats.wire import (
    BLOCK_HEADER_LEN,
    DEFAULT_FINE_OFFSET_INTERVAL,
    EXTENSION_HEADER,
    EXTENSION_MAGIC,
    EXTENSION_VERSION,
    EXTENSION_VERSION_SECTIONS,
    FINE_OFFSET,
    SECTION_HEADER,
    U32,
)

#: tagged-section numbers, one per feature (spec/index-format.md §4.1)
TAG_SPAN_CRC32C = 1
TAG_ZONE_MAPS = 2
TAG_TRANSFORM = 3
#: the tags this codebase understands; an unknown critical tag is refused
KNOWN_TAGS = frozenset({TAG_SPAN_CRC32C, TAG_ZONE_MAPS, TAG_TRANSFORM})
_FLAG_CRITICAL = 0x0001


@dataclass(frozen=True)
class ExtensionSection:
    """One tagged section of a version-2 extension: a feature's own payload."""

    tag: int
    payload: bytes
    #: a reader that does not know a critical tag must refuse the object
    critical: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.tag <= 0xFFFF:
            raise ValueError(f"section tag {self.tag} is outside 1..65535")


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C (Castagnoli) of ``data``, continuing from ``value``."""
    return int(_crc32c.crc32c(data, value))


@dataclass(frozen=True)
class IndexExtension:
    """Block checksums and the fine offset table."""

    block_crc32c: tuple[int, ...]
    #: (entry_id, object offset of its length field), ascending
    fine_offsets: tuple[tuple[int, int], ...] = ()
    #: tagged sections (version 2), at most one per tag, in the order written
    sections: tuple[ExtensionSection, ...] = ()
    fine_entry_ids: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fine_entry_ids", tuple(e for e, _ in self.fine_offsets))
        tags = [s.tag for s in self.sections]
        if len(set(tags)) != len(tags):
            raise ValueError(f"duplicate extension section tags in {tags}")

    def section(self, tag: int) -> ExtensionSection | None:
        """The tagged section ``tag``, or None when the extension has none."""
        for section in self.sections:
            if section.tag == tag:
                return section
        return None

    def with_section(self, section: ExtensionSection) -> IndexExtension:
        """A copy with ``section`` added, replacing any section of the same tag."""
        kept = tuple(s for s in self.sections if s.tag != section.tag)
        return IndexExtension(self.block_crc32c, self.fine_offsets, (*kept, section))


def fine_offsets_for(
    plans: Sequence[BlockPlan],
    entry_lengths: Sequence[int],
    interval: int = DEFAULT_FINE_OFFSET_INTERVAL,
) -> list[tuple[int, int]]:
    """Fine offset points for a planned data object: in each block, an entry whenever at
    least ``interval`` bytes have passed since the block's data start or the last point
    (each point found by a binary search over the framed prefix sums)."""
    framed = framed_prefix_sums(entry_lengths)[0]
    points: list[tuple[int, int]] = []
    for plan in plans:
        first, end = plan.first_entry_id, plan.last_entry_id + 1
        data_start = plan.offset + BLOCK_HEADER_LEN - framed[first]  # object offset of F = 0
        last, lo = framed[first], first
        while True:
            entry_id = bisect_left(framed, last + interval, lo, end)
            if entry_id >= end:
                break
            last, lo = framed[entry_id], entry_id + 1
            points.append((entry_id, data_start + last))
    return points


def encode_extension(ext: IndexExtension) -> bytes:
    body = bytearray()
    body += U32.pack(len(ext.fine_offsets))
    for entry_id, offset in ext.fine_offsets:
        body += FINE_OFFSET.pack(entry_id, offset)
    version = EXTENSION_VERSION
    if ext.sections:
        version = EXTENSION_VERSION_SECTIONS
        body += U32.pack(len(ext.sections))
        for section in ext.sections:
            flags = _FLAG_CRITICAL if section.critical else 0
            body += SECTION_HEADER.pack(section.tag, flags, len(section.payload))
            body += section.payload
    crcs = b"".join(U32.pack(c & 0xFFFFFFFF) for c in ext.block_crc32c)
    section_len = EXTENSION_HEADER.size + len(crcs) + len(body) + U32.size
    out = bytearray(
        EXTENSION_HEADER.pack(EXTENSION_MAGIC, version, 0, section_len, len(ext.block_crc32c))
    )
    out += crcs
    out += body
    out += U32.pack(crc32c(out))
    return bytes(out)


def is_extension(trailing: memoryview) -> bool:
    return len(trailing) >= 4 and U32.unpack_from(trailing, 0)[0] == EXTENSION_MAGIC


def looks_like_damaged_extension(trailing: memoryview, block_count: int) -> bool:
    """True when bytes after the index rows lack our magic but agree with our extension's
    header in at least two of: version/flags, section length (= the trailing length) and block
    count (= the index's rows). Such bytes are our extension with a damaged magic, not a
    foreign trailer, and must not be silently ignored (that would drop the block CRC32Cs)."""
    if len(trailing) < EXTENSION_HEADER.size + 4 or is_extension(trailing):
        return False
    _magic, version, flags, section_len, count = EXTENSION_HEADER.unpack_from(trailing, 0)
    votes = (
        int(version in (EXTENSION_VERSION, EXTENSION_VERSION_SECTIONS) and flags == 0)
        + int(section_len == len(trailing))
        + int(count == block_count)
    )
    return votes >= 2


def decode_extension(buf: memoryview, *, base_offset: int = 0) -> IndexExtension:
    """Parse a section that starts with the extension magic (checked by :func:`is_extension`)."""
    if len(buf) < EXTENSION_HEADER.size:
        raise TruncatedError("index extension header is truncated", offset=base_offset)
    _magic, version, _flags, section_len, block_count = EXTENSION_HEADER.unpack_from(buf, 0)
    if version not in (EXTENSION_VERSION, EXTENSION_VERSION_SECTIONS):
        raise UnsupportedVersionError(f"index extension version {version}", offset=base_offset + 4)
    if section_len > len(buf):
        raise TruncatedError(
            f"index extension says {section_len} bytes, {len(buf)} present", offset=base_offset + 8
        )
    minimum = EXTENSION_HEADER.size + 4 * block_count + 4 + 4
    if version == EXTENSION_VERSION_SECTIONS:
        minimum += 4
    if section_len < minimum:
        raise CorruptDataError(
            f"index extension length {section_len} is below its minimum {minimum}",
            offset=base_offset + 8,
        )
    section = buf[:section_len]
    (stored,) = U32.unpack_from(section, section_len - 4)
    actual = crc32c(section[: section_len - 4])
    if stored != actual:
        raise ChecksumMismatchError(
            f"index extension CRC32C is 0x{actual:08x}, recorded 0x{stored:08x}",
            offset=base_offset + section_len - 4,
        )
    pos = EXTENSION_HEADER.size
    crcs = tuple(U32.unpack_from(section, pos + 4 * i)[0] for i in range(block_count))
    pos += 4 * block_count
    (fine_count,) = U32.unpack_from(section, pos)
    pos += 4
    fine_end = pos + fine_count * FINE_OFFSET.size
    fills = fine_end + 4 == section_len
    if version == EXTENSION_VERSION_SECTIONS:
        fills = fine_end + 8 <= section_len
    if not fills:
        raise CorruptDataError(
            f"index extension fine table of {fine_count} points does not fill the section",
            offset=base_offset + pos - 4,
        )
    points = tuple(
        FINE_OFFSET.unpack_from(section, pos + FINE_OFFSET.size * i) for i in range(fine_count)
    )
    previous = (-1, -1)
    for i, point in enumerate(points):
        if point[0] <= previous[0] or point[1] <= previous[1]:
            raise CorruptDataError(
                "index extension fine offsets are not ascending",
                offset=base_offset + pos + FINE_OFFSET.size * i,
            )
        previous = point
    sections: tuple[ExtensionSection, ...] = ()
    if version == EXTENSION_VERSION_SECTIONS:
        sections = _decode_sections(section, fine_end, base_offset)
    return IndexExtension(block_crc32c=crcs, fine_offsets=points, sections=sections)


def _decode_sections(
    section: memoryview, pos: int, base_offset: int
) -> tuple[ExtensionSection, ...]:
    """The tagged sections from ``pos`` (their count) to the section CRC, which must be
    filled exactly; unknown tags are skipped unless critical."""
    end = len(section) - 4
    (count,) = U32.unpack_from(section, pos)
    pos += 4
    out: list[ExtensionSection] = []
    seen: set[int] = set()
    for _ in range(count):
        if pos + SECTION_HEADER.size > end:
            raise CorruptDataError(
                "index extension tagged section header runs past the section",
                offset=base_offset + pos,
            )
        tag, flags, length = SECTION_HEADER.unpack_from(section, pos)
        pos += SECTION_HEADER.size
        if length > end - pos:
            raise CorruptDataError(
                f"index extension tagged section {tag} says {length} bytes, {end - pos} present",
                offset=base_offset + pos - 4,
            )
        if tag == 0 or tag in seen:
            raise CorruptDataError(
                f"index extension tagged section {tag} is invalid or repeated",
                offset=base_offset + pos - SECTION_HEADER.size,
            )
        seen.add(tag)
        critical = bool(flags & _FLAG_CRITICAL)
        if tag not in KNOWN_TAGS:
            if critical:
                raise UnsupportedVersionError(
                    f"index extension has critical section {tag}, unknown to this version",
                    offset=base_offset + pos - SECTION_HEADER.size,
                )
        else:
            out.append(ExtensionSection(tag, bytes(section[pos : pos + length]), critical))
        pos += length
    if pos != end:
        raise CorruptDataError(
            f"index extension tagged sections end at {pos}, the section CRC is at {end}",
            offset=base_offset + pos,
        )
    return tuple(out)
