"""Struct layouts and constants of the tiered-storage format, written once.

Every integer is big-endian, signed two's complement (Java ``DataOutput``), except that magics
are compared as unsigned 32-bit values. See ``spec/block-format.md`` and ``spec/index-format.md``.
"""

from __future__ import annotations

import struct

# --- data object ---------------------------------------------------------------------------
DATA_BLOCK_MAGIC = 0xFBDBABCB
#: Pulsar's HEADER_MAX_SIZE: every block header is 128 bytes (28 used, 100 zero).
BLOCK_HEADER_LEN = 128
#: magic (u32), header_len (i64), block_len (i64), first_entry_id (i64)
BLOCK_HEADER_FIELDS = struct.Struct(">Iqqq")
BLOCK_HEADER_USED = BLOCK_HEADER_FIELDS.size  # 28
#: entry framing: payload length (i32), entry id (i64)
ENTRY_HEADER = struct.Struct(">iq")
ENTRY_HEADER_LEN = ENTRY_HEADER.size  # 12
PADDING_PATTERN = b"\xfe\xdc\xde\xad"
#: the largest payload a block of ``max_block_size`` can hold
BLOCK_OVERHEAD = BLOCK_HEADER_LEN + ENTRY_HEADER_LEN  # 140

#: PIP-76 streaming block header magic (read-only interest; positive int32)
STREAMING_BLOCK_MAGIC = 0x26A66D32

# --- index object --------------------------------------------------------------------------
INDEX_V1_MAGIC = 0xDE47DE47
INDEX_V2_MAGIC = 0x3D1FB0BC
#: magic (u32), index_block_len (i32), data_object_len (i64), data_header_len (i64),
#: index_entry_count (i32), segment_metadata_len (i32)
INDEX_V1_HEADER = struct.Struct(">Iiqqii")
#: magic (u32), index_block_len (i32), data_object_len (i64), data_header_len (i64)
INDEX_V2_HEADER = struct.Struct(">Iiqq")
#: per-ledger record header in a v2 index: ledger id (i64), entry count (i32), metadata len (i32)
INDEX_V2_LEDGER_HEADER = struct.Struct(">qii")
#: first_entry_id (i64), part_id (i32), offset (i64)
INDEX_ENTRY = struct.Struct(">qiq")
INDEX_ENTRY_LEN = INDEX_ENTRY.size  # 20

# --- our index extension (after the v1 rows; Pulsar ignores trailing bytes) ------------------
EXTENSION_MAGIC = 0x4C4F4958  # "LOIX": ledger-offloader index extension
EXTENSION_VERSION = 1
#: the version written when the extension carries tagged sections (spec/index-format.md §4.1)
EXTENSION_VERSION_SECTIONS = 2
#: magic (u32), version (u16), flags (u16), section_len (u32), block_count (u32)
EXTENSION_HEADER = struct.Struct(">IHHII")
#: fine offset point: entry id (i64), object offset of the entry's length field (i64)
FINE_OFFSET = struct.Struct(">qq")
U32 = struct.Struct(">I")
#: a tagged section's header: tag u16, flags u16, payload length u32
SECTION_HEADER = struct.Struct(">HHI")
#: default spacing of fine offset points in bytes of data
DEFAULT_FINE_OFFSET_INTERVAL = 64 * 1024

# --- defaults ------------------------------------------------------------------------------
DEFAULT_MAX_BLOCK_SIZE = 64 * 1024 * 1024
S3_MIN_PART_SIZE = 5 * 1024 * 1024
S3_MAX_PARTS = 10_000
