"""``offloader objects``: look at and make offloaded-ledger objects (data + index files).

``inspect`` checks a (data, index) pair the way a reader would and summarises it; ``encode``
writes the pair for a closed ledger given as JSON Lines. Both work on local files, so they need
no object store. (``verify``, ``orphans`` and ``gc``, which talk to the store, join this group.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.render import plural
from formats.block import iter_block_entries
from formats.encode import encode_ledger
from formats.errors import ChecksumMismatchError, FormatError, IndexInconsistentError
from formats.extension import crc32c
from formats.index import OffloadIndex, decode_index
from formats.ledger_metadata import LedgerMetadata
from formats.wire import BLOCK_OVERHEAD
from offloader.errors import ConfigError
from offloader.units import format_size, parse_size


class SizeType(click.ParamType):  # type: ignore[type-arg]
    """A size such as ``64M``, ``1K`` or ``4096`` (Pulsar's conventions)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            size = value
        else:
            try:
                size = parse_size(str(value))
            except ConfigError as exc:
                self.fail(str(exc), param, ctx)
        if size <= BLOCK_OVERHEAD:
            self.fail(f"{value!r} is too small: a block needs more than {BLOCK_OVERHEAD} bytes")
        return size


@click.group()
def objects() -> None:
    """Check, encode and audit offloaded-ledger objects (inspect, encode, verify, orphans, gc).

    \b
    Examples:
      offloader objects inspect --data L.data --index L.index
      offloader objects encode --entries e.jsonl --ledger-id 7 --data L.data --index L.index
      offloader objects verify my-topic --verify-checksums
      offloader objects orphans
    """


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


def _relabel(exc: FormatError, label: str) -> FormatError:
    """The same error type, its message prefixed with the file it is about."""
    new = type(exc)(f"{label}: {exc}")
    new.offset = exc.offset
    return new


def check_pair(index_bytes: bytes, data: bytes, *, index_label: str, data_label: str) -> PairReport:
    """Read every entry of a pair through its index, strictly; raises FormatError subclasses."""
    try:
        index = decode_index(index_bytes)
    except FormatError as exc:
        raise _relabel(exc, index_label) from exc
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
    return PairReport(index, len(index_bytes), len(data), blocks, entries)


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


_EXISTING_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
_OUTPUT_FILE = click.Path(dir_okay=False, writable=True, path_type=Path)


@objects.command()
@click.option("--data", "data_path", type=_EXISTING_FILE, required=True, help="Data object file.")
@click.option("--index", "index_path", type=_EXISTING_FILE, required=True, help="Index file.")
@click.option("--entries", "show_entries", is_flag=True, help="Also one line per entry.")
@click.option("--json", "json_output", is_flag=True, help="One JSON object per line.")
@pass_cli
def inspect(
    app: CliContext, data_path: Path, index_path: Path, show_entries: bool, json_output: bool
) -> None:
    """Check a data object + index pair and summarise it.

    Reads every entry through the index the way a reader does: the data length must equal the
    index's data_object_length, every block must parse and hold exactly the entries the index
    promises, and block CRC32Cs must match when the index has our extension. Prints the ledger
    metadata and one line per block (part, first entry, offset, size, CRC32C); with --entries
    one line per entry (id, length, SHA-256). Exit 0 if the pair is valid, 1 (with a one-line
    error) if not.

    \b
    Examples:
      offloader objects inspect --data 1f0c...-ledger-7 --index 1f0c...-ledger-7-index
      offloader objects inspect --data L.data --index L.index --entries --json
    """
    report = check_pair(
        index_path.read_bytes(),
        data_path.read_bytes(),
        index_label=f"index {index_path}",
        data_label=f"data {data_path}",
    )
    as_json = app.json or json_output
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


# --- encode -------------------------------------------------------------------------------
_ENTRY_FORM = '{"payload_b64": "<base64>"}'


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _entry_payload(raw: bytes, where: str) -> bytes:
    """The payload of one JSON Lines entry; ConfigError saying what is wrong with it."""
    try:
        record = json.loads(raw)
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text; expected {_ENTRY_FORM}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); expected {_ENTRY_FORM}"
        ) from None
    if not isinstance(record, dict):
        raise ConfigError(
            f"{where}: expected a JSON object {_ENTRY_FORM}, got {_json_type(record)}"
        )
    if "payload_b64" not in record:
        raise ConfigError(f'{where}: the object has no "payload_b64" field; expected {_ENTRY_FORM}')
    value = record["payload_b64"]
    if not isinstance(value, str):
        raise ConfigError(
            f'{where}: "payload_b64" must be a base64 string, not {_json_type(value)}'
        )
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f'{where}: "payload_b64" is not valid base64 (A-Z, a-z, 0-9, +, / and = padding)'
        ) from None


def read_entries_jsonl(path: Path) -> list[bytes]:
    """Payloads from JSON Lines ``{"payload_b64": "..."}`` (blank lines skipped)."""
    payloads: list[bytes] = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if raw.strip():
                payloads.append(_entry_payload(raw, f"{path} line {lineno}"))
    return payloads


#: ledger metadata fields that must be integers (the first three are required)
_REQUIRED_INT_FIELDS = ("ensemble_size", "write_quorum_size", "length")
_OPTIONAL_INT_FIELDS = ("ack_quorum_size", "last_entry_id", "ctime")


def _check_metadata_fields(obj: dict[str, Any], path: Path) -> None:
    """Say in user terms which field of a ledger metadata object is missing or mistyped."""
    for name in _REQUIRED_INT_FIELDS + _OPTIONAL_INT_FIELDS:
        if name not in obj or obj[name] is None:
            if name in _REQUIRED_INT_FIELDS:
                raise ConfigError(
                    f'{path}: ledger metadata has no "{name}" field (required: '
                    f"{', '.join(_REQUIRED_INT_FIELDS)})"
                )
            continue
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f'{path}: ledger metadata field "{name}" must be an integer, not '
                f"{_json_type(value)}"
            )
    ensembles = obj.get("ensembles", [])
    if not isinstance(ensembles, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("first_entry_id"), int)
        and isinstance(e.get("bookies"), list)
        for e in ensembles
    ):
        raise ConfigError(
            f'{path}: ledger metadata field "ensembles" must be a list of '
            '{"first_entry_id": <integer>, "bookies": ["host:port", ...]}'
        )


def read_ledger_metadata(path: Path, ledger_id: int) -> LedgerMetadata:
    """The manifest's ``ledger_metadata`` object (``LedgerMetadata.from_json``)."""
    try:
        obj = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path}: not UTF-8 text; expected a JSON ledger metadata object"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{path}: expected a JSON ledger metadata object, got {_json_type(obj)}")
    if obj.get("ledger_id") is not None and obj["ledger_id"] != ledger_id:
        raise click.BadParameter(
            f"--ledger-id {ledger_id} differs from ledger_id {obj['ledger_id']} in {path}",
            param_hint="--ledger-id",
        )
    _check_metadata_fields(obj, path)
    try:
        return LedgerMetadata.from_json(obj)
    except FormatError:  # the fields checked above are fine: the custom metadata is not
        raise ConfigError(
            f'{path}: ledger metadata field "custom_metadata" must be a list of '
            '{"key": "...", "value_utf8": "..."} (or "value_hex") or an object of key: value'
        ) from None


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file in its directory; errors name ``path``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        parent = path.parent
        if not parent.is_dir():
            reason = f"directory {parent} does not exist"
        elif path.is_dir():
            reason = "it is a directory"
        else:
            reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot write {path}: {reason}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file (same resolved path, or links to one inode)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_distinct_files(named: dict[str, Path | None]) -> None:
    """UsageError when two of the options (``{"--data": path, ...}``) name one file."""
    seen: list[tuple[str, Path]] = []
    for option, path in named.items():
        if path is None:
            continue
        for other, other_path in seen:
            if _same_file(path, other_path):
                raise click.UsageError(
                    f"{other} {other_path} and {option} {path} are the same file: give two "
                    "different files"
                )
        seen.append((option, path))


@objects.command()
@click.option(
    "--entries",
    "entries_path",
    type=_EXISTING_FILE,
    required=True,
    help='JSON Lines, one {"payload_b64": "..."} per entry; ids 0, 1, 2, ... in file order.',
)
@click.option("--ledger-id", type=click.IntRange(min=0), required=True, help="The ledger id.")
@click.option(
    "--max-block-size",
    type=SizeType(),
    default="64M",
    show_default=True,
    help="Max block (part) size, e.g. 64M, 5M, 4K. S3 needs >= 5M to upload; files take any.",
)
@click.option(
    "--ledger-metadata",
    "metadata_path",
    type=_EXISTING_FILE,
    help="JSON ledger metadata, as a golden manifest's ledger_metadata object. Default: a "
    "closed single-bookie ledger created now.",
)
@click.option("--no-extension", is_flag=True, help="Write a plain Pulsar index (no LOIX).")
@click.option("--data", "data_path", type=_OUTPUT_FILE, required=True, help="Data object out.")
@click.option("--index", "index_path", type=_OUTPUT_FILE, required=True, help="Index out.")
@click.option("--json", "json_output", is_flag=True, help="Print the summary as JSON.")
@pass_cli
def encode(
    app: CliContext,
    entries_path: Path,
    ledger_id: int,
    max_block_size: int,
    metadata_path: Path | None,
    no_extension: bool,
    data_path: Path,
    index_path: Path,
    json_output: bool,
) -> None:
    """Encode a closed ledger into a data object and an index, in Pulsar's format.

    Entries come from JSON Lines {"payload_b64": "..."} (entry ids 0, 1, 2, ... in file
    order). Blocks follow Pulsar's block-size rule; length and lastEntryId in the metadata are
    taken from the entries. Given the entries, metadata and block size Pulsar used, the data
    object is byte-identical to Pulsar's, and so is the index with --no-extension. An empty
    ledger, or an entry larger than max-block-size - 140, is refused (exit 1).

    \b
    Examples:
      offloader objects encode --entries e.jsonl --ledger-id 7 --data L.data --index L.index
      offloader objects encode --entries e.jsonl --ledger-id 12 --max-block-size 64K \\
          --ledger-metadata md.json --no-extension --data L.data --index L.index
    """
    check_distinct_files(
        {
            "--entries": entries_path,
            "--ledger-metadata": metadata_path,
            "--data": data_path,
            "--index": index_path,
        }
    )
    payloads = read_entries_jsonl(entries_path)
    if metadata_path is not None:
        metadata = read_ledger_metadata(metadata_path, ledger_id)
    else:
        metadata = LedgerMetadata.closed_default(
            last_entry_id=len(payloads) - 1,
            length=sum(len(p) for p in payloads),
            ctime=int(time.time() * 1000),
        )
    encoded = encode_ledger(payloads, metadata, max_block_size, with_extension=not no_extension)
    _write_atomically(data_path, encoded.data)
    _write_atomically(index_path, encoded.index)
    record = {
        "type": "encoded",
        "ledger_id": ledger_id,
        "entries": len(payloads),
        "blocks": len(encoded.plans),
        "max_block_size": max_block_size,
        "data": str(data_path),
        "data_length": len(encoded.data),
        "index": str(index_path),
        "index_length": len(encoded.index),
        "extension": not no_extension,
    }
    app.emit(
        record,
        f"ledger {ledger_id}: {plural(len(payloads), 'entry', 'entries')} in "
        f"{plural(len(encoded.plans), 'block')}; "
        f"data {data_path} ({len(encoded.data)} bytes), index {index_path} "
        f"({len(encoded.index)} bytes, {'plain Pulsar' if no_extension else 'with extension'})",
        json_output=json_output,
    )
