"""``offloader objects inspect``: a local (data, index) pair or a Kafka segment's ``.chunks``
object.

``inspect`` checks a pair the way a reader would and summarises it; it works on local files,
so it needs no object store (``--chunks``: :mod:`cli.objects.transform`). ``encode``
(:mod:`cli.objects.encode`) and ``verify``, ``orphans`` and ``gc`` (:mod:`cli.objects.admin`,
which talk to the store) are the group's other commands (:mod:`cli.objects`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.objects.transform import (
    DEFAULT_CHUNK_ROWS,
    inspect_chunks,
    transform_record,
    transform_text,
)
from cli.render import plural
from formats.block import iter_block_entries
from formats.errors import (
    ChecksumMismatchError,
    FormatError,
    IndexInconsistentError,
    WrongKeyError,
)
from formats.extension import crc32c
from formats.index import OffloadIndex, decode_index
from formats.local_object import object_bytes
from formats.transform import TransformSection, transform_of
from offloader.api import decode_stored_data
from offloader.errors import KeyRingError
from offloader.units import format_size


# --- inspect ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockReport:
    block: int
    part: int
    first_entry_id: int
    last_entry_id: int
    offset: int
    size: int
    crc32c: int
    recorded_crc32c: int | None


@dataclass(frozen=True)
class EntryReport:
    entry_id: int
    length: int
    sha256: str


@dataclass(frozen=True)
class PairReport:
    index: OffloadIndex
    index_length: int
    data_length: int
    blocks: list[BlockReport]
    entries: list[EntryReport]
    transform: TransformSection | None = None


def _relabel(exc: FormatError, label: str) -> FormatError:
    """The same error type, its message prefixed with the file it is about."""
    new = type(exc)(f"{label}: {exc}")
    new.offset = exc.offset
    return new


def check_pair(
    index_bytes: bytes,
    data: bytes,
    *,
    index_label: str,
    data_label: str,
    decode: Callable[[OffloadIndex, bytes], bytes | None] | None = None,
) -> PairReport:
    """Read every entry of a pair through its index, strictly; raises FormatError subclasses.
    ``decode`` turns a transformed (stored) data object into the original one (None: plain)."""
    try:
        index = decode_index(index_bytes)
    except FormatError as exc:
        raise _relabel(exc, index_label) from exc
    transform = transform_of(index.extension)
    stored_length = len(data)
    if decode is not None:
        original = decode(index, data)
        data = data if original is None else original
    if len(data) != index.data_object_length:
        raise IndexInconsistentError(
            f"{data_label}: data object is {len(data)} bytes, the index says "
            f"{index.data_object_length}"
        )
    view = memoryview(data)
    recorded = index.extension.block_crc32c if index.extension is not None else None
    blocks: list[BlockReport] = []
    entries: list[EntryReport] = []
    for i, row in enumerate(index.entries):
        start, end = index.block_span(i)
        block = view[start:end]
        actual = crc32c(block)
        if recorded is not None and recorded[i] != actual:
            raise ChecksumMismatchError(
                f"{data_label}: block {i} CRC32C is 0x{actual:08x}, the index recorded "
                f"0x{recorded[i]:08x}",
                offset=start,
            )
        last = index.block_last_entry_id(i)
        expected = row.entry_id
        try:
            for entry in iter_block_entries(
                block, base_offset=start, expected_first_entry_id=row.entry_id
            ):
                payload = entry.payload
                entries.append(
                    EntryReport(entry.entry_id, len(payload), hashlib.sha256(payload).hexdigest())
                )
                expected = entry.entry_id + 1
        except FormatError as exc:
            raise _relabel(exc, data_label) from exc
        if expected != last + 1:
            raise IndexInconsistentError(
                f"{data_label}: block {i} holds entries {row.entry_id}..{expected - 1}, the "
                f"index expects {row.entry_id}..{last}",
                offset=start,
            )
        blocks.append(
            BlockReport(
                i,
                row.part_id,
                row.entry_id,
                last,
                start,
                end - start,
                actual,
                None if recorded is None else recorded[i],
            )
        )
    return PairReport(index, len(index_bytes), stored_length, blocks, entries, transform)


def _index_record(report: PairReport) -> dict[str, Any]:
    index = report.index
    ext = index.extension
    return {
        "type": "index",
        "version": index.version,
        "index_length": report.index_length,
        "data_length": report.data_length,
        "data_object_length": index.data_object_length,
        "data_header_length": index.data_header_length,
        "block_count": index.block_count,
        "entry_count": len(report.entries),
        "extension": None
        if ext is None
        else {"block_crc32c": len(ext.block_crc32c), "fine_offsets": len(ext.fine_offsets)},
        "ledger_metadata": index.ledger_metadata.to_json(),
        "transform": None if report.transform is None else transform_record(report.transform),
    }


def _index_text(report: PairReport, index_path: Path, data_path: Path) -> list[str]:
    index = report.index
    md = index.ledger_metadata
    ext = index.extension
    extension = (
        "none (plain Pulsar index)"
        if ext is None
        else f"LOIX v1, {plural(len(ext.block_crc32c), 'block CRC32C')}, "
        f"{plural(len(ext.fine_offsets), 'fine offset')}"
    )
    lines = [
        f"index: {index_path} (v{index.version}, {report.index_length} bytes, "
        f"extension: {extension})",
        f"ledger: last entry {md.last_entry_id}, length {md.length} "
        f"({format_size(md.length)}), state {md.state}, ensemble {md.ensemble_size}, "
        f"write quorum {md.write_quorum_size}, ack quorum {md.ack_quorum_size}, "
        f"digest {md.digest_type}, ctime {md.ctime}",
    ]
    lines += [
        f"  ensemble from entry {e.first_entry_id}: {', '.join(e.bookies)}" for e in md.ensembles
    ]
    for key, value in md.custom_metadata:
        try:
            shown = value.decode("utf-8")
        except UnicodeDecodeError:
            shown = "0x" + value.hex()
        lines.append(f"  custom metadata {key} = {shown}")
    if report.transform is not None:
        lines.append(transform_text(report.transform))
        lines.append(
            f"data: {data_path} ({report.data_length} bytes stored, "
            f"{index.data_object_length} = data_object_length once decoded, "
            f"{plural(index.block_count, 'block')}, header length {index.data_header_length})"
        )
    else:
        lines.append(
            f"data: {data_path} ({report.data_length} bytes = data_object_length, "
            f"{plural(index.block_count, 'block')}, header length {index.data_header_length})"
        )
    return lines


def _block_text(b: BlockReport) -> str:
    if b.recorded_crc32c is None:
        crc = f"crc32c 0x{b.crc32c:08x} (not recorded)"
    else:
        crc = f"crc32c 0x{b.crc32c:08x} (matches the index)"
    return (
        f"block {b.block}: part {b.part}, entries {b.first_entry_id}..{b.last_entry_id}, "
        f"offset {b.offset}, size {b.size}, {crc}"
    )


def _block_record(b: BlockReport) -> dict[str, Any]:
    return {
        "type": "block",
        "block": b.block,
        "part": b.part,
        "first_entry_id": b.first_entry_id,
        "last_entry_id": b.last_entry_id,
        "offset": b.offset,
        "size": b.size,
        "crc32c": f"{b.crc32c:08x}",
        "crc32c_recorded": b.recorded_crc32c is not None,
    }


#: an input file that must exist
EXISTING_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


@click.command()
@click.option("--data", "data_path", type=EXISTING_FILE, help="Data object file.")
@click.option("--index", "index_path", type=EXISTING_FILE, help="Index file.")
@click.option(
    "--chunks",
    "chunks_path",
    type=EXISTING_FILE,
    help="A transformed Kafka segment's <segment>.chunks object (instead of --data/--index).",
)
@click.option("--entries", "show_entries", is_flag=True, help="Also one line per entry.")
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=0),
    default=DEFAULT_CHUNK_ROWS,
    show_default=True,
    help="With --chunks: how many chunk-table rows to show.",
)
@click.option("--json", "json_output", is_flag=True, help="One JSON object per line.")
@pass_cli
def inspect(
    app: CliContext,
    data_path: Path | None,
    index_path: Path | None,
    chunks_path: Path | None,
    show_entries: bool,
    chunk_rows: int,
    json_output: bool,
) -> None:
    """Check a data object + index pair, or a Kafka segment's .chunks object, and summarise it.

    Reads every entry through the index the way a reader does: the data length must equal the
    index's data_object_length, every block must parse and hold exactly the entries the index
    promises, and block CRC32Cs must match when the index has our extension. Prints the ledger
    metadata and one line per block (part, first entry, offset, size, CRC32C); with --entries
    one line per entry (id, length, SHA-256). Exit 0 if the pair is valid, 1 (with a one-line
    error) if not.

    With --chunks, checks the chunk table of a transformed Kafka segment (magic, version,
    CRC32C, the table itself) and prints its segment id and base offset, the transform (codec,
    cipher, key id; never key bytes), chunk count, original and stored sizes of the .log and
    the first --chunk-rows rows of the table.

    Each file may be a copy of the object (as downloaded from S3) or the file a file:// store
    keeps under its root (its metadata header, spec/local-store.md, is skipped).

    \b
    Examples:
      offloader objects inspect --data 1f0c...-ledger-7 --index 1f0c...-ledger-7-index
      offloader objects inspect --data L.data --index L.index --entries --json
      offloader objects inspect --chunks 00000000000000001000-ABEiM0RVZneImaq7zN3u_w.chunks
    """
    as_json = app.json or json_output
    if chunks_path is not None:
        if data_path is not None or index_path is not None or show_entries:
            raise click.UsageError("--chunks is inspected alone (no --data, --index, --entries)")
        inspect_chunks(app, chunks_path, chunk_rows, as_json)
        return
    if data_path is None or index_path is None:
        raise click.UsageError("give --data and --index (or --chunks)")
    as_json = app.json or json_output
    index_bytes = object_bytes(index_path.read_bytes())

    def decode(index: OffloadIndex, stored: bytes) -> bytes | None:
        return decode_stored_data(app.home, index, stored, data_path.name)

    try:
        report = check_pair(
            index_bytes,
            object_bytes(data_path.read_bytes()),
            index_label=f"index {index_path}",
            data_label=f"data {data_path}",
            decode=decode,
        )
    except (KeyRingError, WrongKeyError):
        # the chunks cannot be decoded, but the index still says which transform they have
        section = transform_of(decode_index(index_bytes).extension)
        if section is not None:
            record = {"type": "transform", **transform_record(section)}
            app.emit(record, transform_text(section), json_output=as_json)
        raise
    if as_json:
        app.emit(_index_record(report), "", json_output=True)
    else:
        for line in _index_text(report, index_path, data_path):
            click.echo(line)
    for b in report.blocks:
        app.emit(_block_record(b), _block_text(b), json_output=as_json)
    if show_entries:
        for e in report.entries:
            app.emit(
                {"entry_id": e.entry_id, "length": e.length, "sha256": e.sha256},
                f"entry {e.entry_id}: length {e.length}, sha256 {e.sha256}",
                json_output=as_json,
            )
    app.emit(
        {
            "type": "summary",
            "valid": True,
            "entries": len(report.entries),
            "blocks": len(report.blocks),
        },
        f"ok: {plural(len(report.entries), 'entry', 'entries')} in "
        f"{plural(len(report.blocks), 'block')}, pair is valid",
        json_output=as_json,
    )
