"""Shared helpers for the format tests: the golden manifest, payload regeneration, and a
strict reader that reads every entry of a (data, index) pair through the index."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from formats.block import iter_block_entries
from formats.errors import ChecksumMismatchError, IndexInconsistentError
from formats.extension import crc32c
from formats.golden_payloads import drawn_length_payloads, fixed_length_payloads
from formats.index import OffloadIndex, decode_index

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"

Case = dict[str, Any]

_UNIFORM = re.compile(r"uniform\((\d+),\s*(\d+)\)")


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_DIR / "manifest.json").read_text())
    return data


def all_cases() -> list[Case]:
    return list(manifest()["cases"])


def cases_with_files() -> list[Case]:
    return [c for c in all_cases() if "files" in c]


def case(name: str) -> Case:
    for c in all_cases():
        if c["name"] == name:
            return c
    raise KeyError(name)


def seed(c: Case) -> int:
    return int(c["seed_hex"], 16)


def regenerate_payloads(c: Case) -> list[bytes]:
    """The entries Pulsar encoded, from the case's seed (manifest ``generator.prng``)."""
    match = _UNIFORM.search(c["payload_rule"])
    if match:
        lo, hi = int(match.group(1)), int(match.group(2))
        return list(drawn_length_payloads(seed(c), c["entry_count"], lo, hi))
    return list(fixed_length_payloads(seed(c), [e["length"] for e in c["entries"]]))


def golden_bytes(c: Case) -> tuple[bytes, bytes]:
    """(data, index) bytes of a case with files."""
    files = c["files"]
    return (GOLDEN_DIR / files["data"]).read_bytes(), (GOLDEN_DIR / files["index"]).read_bytes()


def read_entry_via_index(index: OffloadIndex, data: bytes, entry_id: int) -> bytes:
    """One entry the way a reader finds it: floor lookup, then walk the block."""
    block = index.block_for(entry_id)
    start, end = index.block_span(block)
    for entry in iter_block_entries(
        memoryview(data)[start:end],
        base_offset=start,
        expected_first_entry_id=index.entries[block].entry_id,
    ):
        if entry.entry_id == entry_id:
            return bytes(entry.payload)
    raise IndexInconsistentError(f"entry {entry_id} is not in block {block}")


def read_all(index_bytes: bytes, data: bytes, *, check_crc: bool = True) -> list[tuple[int, bytes]]:
    """Every entry of a pair, strictly: the data length must match the index, each block must
    hold exactly the entries the index promises, and block CRC32Cs (when the index has the
    extension and ``check_crc``) must match. Raises a FormatError subclass otherwise."""
    index = decode_index(index_bytes)
    if len(data) != index.data_object_length:
        raise IndexInconsistentError(
            f"data object is {len(data)} bytes, the index says {index.data_object_length}",
            offset=min(len(data), index.data_object_length),
        )
    view = memoryview(data)
    out: list[tuple[int, bytes]] = []
    for block, row in enumerate(index.entries):
        start, end = index.block_span(block)
        chunk = view[start:end]
        if check_crc and index.extension is not None:
            actual = crc32c(chunk)
            if actual != index.extension.block_crc32c[block]:
                raise ChecksumMismatchError(f"block {block} CRC32C mismatch", offset=start)
        expected = row.entry_id
        for entry in iter_block_entries(
            chunk, base_offset=start, expected_first_entry_id=row.entry_id
        ):
            out.append((entry.entry_id, bytes(entry.payload)))
            expected = entry.entry_id + 1
        if expected != index.block_last_entry_id(block) + 1:
            raise IndexInconsistentError(
                f"block {block} ends at entry {expected - 1}, the index expects "
                f"{index.block_last_entry_id(block)}",
                offset=end,
            )
    return out
