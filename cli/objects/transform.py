"""What ``objects inspect`` says about transforms (spec/transforms.md): the summary of a
transform section (of a Pulsar index, or of a Kafka ``.chunks`` object), and ``inspect
--chunks``: the ``.chunks`` object of a transformed Kafka segment (§8) checked and described.

The description names the object (magic, version, length, CRC32C), the segment it belongs to
(id and base offset), the transform (codec and cipher, key id, chunk size and count, original and
stored sizes) and the first rows of its chunk table; never the key bytes (the wrapped data key is
neither printed nor in ``--json``). A corrupt object is the codec's typed error, naming the file.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext
from cli.render import plural
from formats.errors import FormatError
from formats.kafka.names import uuid_to_kafka
from formats.local_object import object_bytes
from formats.transform import TABLE_MAGIC, ChunkMap, SegmentTable, TransformSection
from formats.transform import read_segment_table as _read_segment_table
from formats.transform.section import CHUNK_AES_GCM, CHUNK_ZSTD
from offloader.units import format_size

#: chunk-table rows ``inspect --chunks`` shows unless ``--chunk-rows`` says otherwise
DEFAULT_CHUNK_ROWS = 10


def transform_record(t: TransformSection) -> dict[str, Any]:
    return {
        "transform": t.describe(),
        "key_id": t.key_id or None,
        "chunk_size": t.chunk_size,
        "chunks": len(t.chunks),
        "compressed_chunks": sum(1 for c in t.chunks if c.flags & CHUNK_ZSTD),
        "original_size": t.original_size,
        "stored_size": t.stored_size,
    }


def transform_text(t: TransformSection) -> str:
    key = f", key {t.key_id}" if t.encrypted else ""
    zipped = sum(1 for c in t.chunks if c.flags & CHUNK_ZSTD)
    return (
        f"transform: {t.describe()}{key}; {plural(len(t.chunks), 'chunk')} of "
        f"{format_size(t.chunk_size)} ({zipped} compressed), stored {t.stored_size} bytes for "
        f"{t.original_size} (ratio {t.stored_size / max(t.original_size, 1):.3f})"
    )


@dataclass(frozen=True)
class ChunkRow:
    """One row of a chunk table, placed: where the chunk lies in original and stored bytes."""

    chunk: int
    block: int
    original_offset: int
    original_length: int
    stored_offset: int
    stored_length: int
    flags: int
    crc32c: int

    @property
    def transform(self) -> str:
        parts = (["zstd"] if self.flags & CHUNK_ZSTD else []) + (
            ["aes-256-gcm"] if self.flags & CHUNK_AES_GCM else []
        )
        return "+".join(parts) or "none"


def chunk_rows(section: TransformSection, limit: int) -> list[ChunkRow]:
    """The first ``limit`` rows of the section's chunk table."""
    placed = ChunkMap(section)
    return [
        ChunkRow(
            i,
            placed.positions[i][0],
            placed.original_starts[i],
            placed.positions[i][2],
            placed.stored_starts[i],
            chunk.stored_len,
            chunk.flags,
            chunk.crc32c,
        )
        for i, chunk in enumerate(section.chunks[: max(limit, 0)])
    ]


def read_table_file(path: Path) -> SegmentTable:
    """The decoded ``.chunks`` file; a corrupt one raises its typed error naming the file."""
    try:
        return _read_segment_table(object_bytes(path.read_bytes()))
    except FormatError as exc:
        new = type(exc)(f"chunks {path}: {exc}")
        new.offset = exc.offset
        raise new from exc


def _table_record(table: SegmentTable) -> dict[str, Any]:
    section = table.section
    return {
        "type": "chunks",
        "magic": TABLE_MAGIC.decode(),
        "version": table.version,
        "length": table.length,
        "crc32c": f"{table.crc32c:08x}",
        "segment_id": uuid_to_kafka(uuid.UUID(table.segment_uuid)),
        "segment_uuid": table.segment_uuid,
        "base_offset": table.base_offset,
        "block_count": len(section.block_lengths),
        "transform": transform_record(section),
    }


def _table_text(table: SegmentTable, path: Path) -> list[str]:
    section = table.section
    lengths = section.block_lengths
    return [
        f"chunks: {path} ({table.length} bytes, magic {TABLE_MAGIC.decode()}, version "
        f"{table.version}, crc32c 0x{table.crc32c:08x})",
        f"segment: id {uuid_to_kafka(uuid.UUID(table.segment_uuid))} (uuid "
        f"{table.segment_uuid}), base offset {table.base_offset}",
        transform_text(section),
        f"log: {plural(len(lengths), 'block')} of {section.original_size} original bytes "
        f"(largest block {max(lengths, default=0)}), {section.stored_size} bytes stored",
    ]


def _row_record(r: ChunkRow) -> dict[str, Any]:
    return {
        "type": "chunk",
        "chunk": r.chunk,
        "block": r.block,
        "original_offset": r.original_offset,
        "original_length": r.original_length,
        "stored_offset": r.stored_offset,
        "stored_length": r.stored_length,
        "transform": r.transform,
        "crc32c": f"{r.crc32c:08x}",
    }


def _row_text(r: ChunkRow) -> str:
    return (
        f"chunk {r.chunk}: block {r.block}, original {r.original_offset}+{r.original_length}, "
        f"stored {r.stored_offset}+{r.stored_length}, {r.transform}, crc32c 0x{r.crc32c:08x}"
    )


def inspect_chunks(app: CliContext, path: Path, rows: int, as_json: bool) -> None:
    """``objects inspect --chunks PATH``: check and describe one ``.chunks`` object."""
    table = read_table_file(path)
    if as_json:
        app.emit(_table_record(table), "", json_output=True)
    else:
        for line in _table_text(table, path):
            click.echo(line)
    shown = chunk_rows(table.section, rows)
    for row in shown:
        app.emit(_row_record(row), _row_text(row), json_output=as_json)
    total = len(table.section.chunks)
    if total > len(shown) and not as_json:
        click.echo(f"... {total - len(shown)} more (--chunk-rows N shows more)")
    app.emit(
        {"type": "summary", "valid": True, "chunks": total, "shown": len(shown)},
        f"ok: chunk table of segment {uuid_to_kafka(uuid.UUID(table.segment_uuid))} at "
        f"{table.base_offset} is valid ({plural(total, 'chunk')})",
        json_output=as_json,
    )
