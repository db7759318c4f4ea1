"""``offloader objects encode``: a closed ledger given as JSON Lines -> a (data, index) pair.

The pair is written to local files, byte for byte as Pulsar's offloader would upload it
(:func:`formats.encode.encode_ledger`), so it needs no object store. This command joins the
``objects`` group of :mod:`cli.objects`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.objects.inspection import EXISTING_FILE
from cli.render import plural
from formats.encode import encode_ledger
from formats.errors import FormatError
from formats.ledger_metadata import LedgerMetadata
from formats.wire import BLOCK_OVERHEAD
from offloader.errors import ConfigError
from offloader.units import parse_size

_OUTPUT_FILE = click.Path(dir_okay=False, writable=True, path_type=Path)


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


def _cannot_write(path: Path, exc: OSError) -> ConfigError:
    parent = path.parent
    if not parent.is_dir():
        reason = f"directory {parent} does not exist"
    elif path.is_dir():
        reason = "it is a directory"
    else:
        reason = exc.strerror or str(exc)
    return ConfigError(f"cannot write {path}: {reason}")


def _write_pair(files: list[tuple[Path, bytes]]) -> None:
    """Write every file through a temporary file in its directory, and rename them into place
    only once all were written: a path that cannot be written leaves none of them behind (not
    a data object without its index). Errors name the path."""
    temps = [(path, path.with_name(f".{path.name}.tmp-{os.getpid()}")) for path, _ in files]
    placed: list[Path] = []
    try:
        for (path, data), (_, tmp) in zip(files, temps, strict=True):
            try:
                tmp.write_bytes(data)
            except OSError as exc:
                raise _cannot_write(path, exc) from None
        for path, tmp in temps:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                for done in placed:  # ours, just written: take them back
                    done.unlink(missing_ok=True)
                raise _cannot_write(path, exc) from None
            placed.append(path)
    finally:
        for _, tmp in temps:
            with contextlib.suppress(OSError):  # e.g. its "directory" is a file
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


@click.command()
@click.option(
    "--entries",
    "entries_path",
    type=EXISTING_FILE,
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
    type=EXISTING_FILE,
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
    _write_pair([(data_path, encoded.data), (index_path, encoded.index)])
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
