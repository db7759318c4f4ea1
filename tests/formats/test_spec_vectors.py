"""Every worked example in ``spec/*.md`` checked byte for byte against the codec.

A fenced block opened with ```` ```hex title=NAME ```` or ```` ```json title=NAME ```` is a
vector; each must have a check registered in :data:`CHECKS`, so the spec cannot drift.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from formats.block import DataBlockHeader, encode_block, iter_block_entries
from formats.encode import encode_ledger
from formats.extension import decode_extension
from formats.index import decode_index, decode_index_v2, encode_index
from formats.keys import data_key, index_key, object_user_metadata, parse_key, parse_user_metadata
from formats.ledger_metadata import (
    Ensemble,
    LedgerMetadata,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from tests.formats.test_kafka_metadata_records import KRAFT_CHECKS
from tests.formats.test_transform_vectors import TRANSFORM_CHECKS

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
_FENCE = re.compile(r"^```(hex|json) title=([\w.-]+)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)

MD_3 = LedgerMetadata(
    ensemble_size=2,
    write_quorum_size=2,
    ack_quorum_size=2,
    last_entry_id=2,
    length=60,
    ensembles=(Ensemble(0, ("bk1:3181", "bk2:3181")),),
    digest_type="CRC32C",
    ctime=1_700_000_000_000,
)
PAYLOADS_3 = [b"A" * 10, b"B" * 20, b"C" * 30]
MAX_BLOCK = 64 * 1024 * 1024


def parse_hex(text: str) -> bytes:
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    digits = re.sub(r"[\s|]", "", "".join(lines))
    assert re.fullmatch(r"(?:[0-9a-fA-F]{2})*", digits), f"not hex: {digits[:40]}..."
    return bytes.fromhex(digits)


def load_vectors() -> dict[str, tuple[str, str, Any]]:
    """name -> (file, kind, value) for every vector in spec/*.md."""
    vectors: dict[str, tuple[str, str, Any]] = {}
    for path in sorted(SPEC_DIR.glob("*.md")):
        for kind, name, body in _FENCE.findall(path.read_text()):
            assert name not in vectors, f"duplicate vector {name} in {path.name}"
            value = parse_hex(body) if kind == "hex" else json.loads(body)
            vectors[name] = (path.name, kind, value)
    return vectors


VECTORS = load_vectors()


def check_block_header(raw: bytes) -> None:
    header = DataBlockHeader(block_len=250, first_entry_id=44)
    assert header.encode() == raw
    assert DataBlockHeader.decode(raw) == header


def check_block_padded(raw: bytes, size: int) -> None:
    block = encode_block(7, [b"D" * 40], size)
    assert block[128:] == raw
    (entry,) = iter_block_entries(block)
    assert (entry.entry_id, bytes(entry.payload)) == (7, b"D" * 40)


def check_block_3_entries(raw: bytes) -> None:
    enc = encode_ledger(PAYLOADS_3, MD_3, MAX_BLOCK, with_extension=False)
    assert enc.data == raw
    assert [bytes(e.payload) for e in iter_block_entries(raw)] == PAYLOADS_3


def check_ledger_metadata(raw: bytes) -> None:
    assert encode_ledger_metadata(MD_3) == raw
    assert decode_ledger_metadata(raw) == MD_3


def check_index_3_entries(raw: bytes) -> None:
    enc = encode_ledger(PAYLOADS_3, MD_3, MAX_BLOCK, with_extension=False)
    assert enc.index == raw
    index = decode_index(raw)
    assert index.ledger_metadata == MD_3
    assert index.data_object_length == len(VECTORS["block-3-entries"][2])
    assert VECTORS["ledger-metadata-3-entries"][2] in raw


def check_extension(raw: bytes, interval: int) -> None:
    enc = encode_ledger(PAYLOADS_3, MD_3, MAX_BLOCK, fine_interval=interval)
    plain = VECTORS["index-3-entries"][2]
    assert enc.index == plain + raw
    assert encode_index(enc.offload_index, with_extension=False) == plain
    ext = decode_extension(memoryview(raw))
    assert ext == enc.offload_index.extension
    assert decode_index(plain + raw).extension == ext


def check_index_v2(raw: bytes) -> None:
    (index,) = decode_index_v2(raw).values()
    assert index.ledger_id == 5 and index.version == 2
    assert (index.last_entry_id, index.length, index.data_object_length) == (2, 60, 224)
    assert [(r.entry_id, r.part_id, r.offset) for r in index.entries] == [(0, 1, 0)]


def check_keys(examples: list[dict[str, Any]]) -> None:
    for ex in examples:
        prefix = ex["prefix"]
        assert data_key(ex["uuid"], ex["ledger_id"], prefix) == ex["data_key"]
        assert index_key(ex["uuid"], ex["ledger_id"], prefix) == ex["index_key"]
        for key, is_index in ((ex["data_key"], False), (ex["index_key"], True)):
            parsed = parse_key(key, prefix)
            assert (parsed.uuid, parsed.ledger_id, parsed.is_index) == (
                ex["uuid"],
                ex["ledger_id"],
                is_index,
            )


def check_user_metadata(expected: dict[str, str]) -> None:
    md = object_user_metadata(
        "data",
        managed_ledger_name=expected["ManagedLedgerName"],
        software_version=expected["s3managedledgeroffloadersoftwareversion"],
    )
    assert md == expected
    assert list(md) == list(expected)
    parsed = parse_user_metadata({k.lower(): v for k, v in md.items()})
    assert (parsed.format_version, parsed.role) == ("1", "data")
    assert parsed.managed_ledger_name == expected["ManagedLedgerName"]


CHECKS: dict[str, Callable[[Any], None]] = {
    "block-header": check_block_header,
    "block-padded": lambda raw: check_block_padded(raw, 200),
    "block-padded-cut": lambda raw: check_block_padded(raw, 202),
    "block-3-entries": check_block_3_entries,
    "ledger-metadata-3-entries": check_ledger_metadata,
    "index-3-entries": check_index_3_entries,
    "extension-3-entries": lambda raw: check_extension(raw, 64 * 1024),
    "extension-3-entries-fine-16": lambda raw: check_extension(raw, 16),
    "index-v2-one-ledger": check_index_v2,
    "keys": check_keys,
    "user-metadata-data": check_user_metadata,
    **TRANSFORM_CHECKS,
    **KRAFT_CHECKS,
}


def test_every_spec_document_exists_and_has_vectors() -> None:
    for name in ("README.md", "block-format.md", "index-format.md", "object-keys.md"):
        assert (SPEC_DIR / name).is_file(), name
    files = {file for file, _kind, _value in VECTORS.values()}
    assert files == {
        "block-format.md",
        "index-format.md",
        "object-keys.md",
        "transforms.md",
        "kafka-metadata.md",
    }


def test_every_vector_has_a_check() -> None:
    assert set(VECTORS) == set(CHECKS)


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_spec_vector(name: str) -> None:
    _file, _kind, value = VECTORS[name]
    CHECKS[name](value)


def test_vector_sizes_match_the_prose() -> None:
    sizes = {name: len(v) for name, (_f, kind, v) in VECTORS.items() if kind == "hex"}
    assert sizes["block-header"] == 128
    assert sizes["block-3-entries"] == 224
    assert sizes["ledger-metadata-3-entries"] == 45
    assert sizes["index-3-entries"] == 97
    assert sizes["extension-3-entries"] == 28
    assert sizes["extension-3-entries-fine-16"] == 60
    assert sizes["index-v2-one-ledger"] == 73
    assert sizes["block-padded"] == 200 - 128
    assert sizes["block-padded-cut"] == 202 - 128
