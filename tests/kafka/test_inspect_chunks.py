"""``objects inspect --chunks`` on the ``.chunks`` object of a Kafka segment uploaded
compressed+encrypted to moto over HTTP: what it says (segment, transform, sizes, table rows) is
what the uploader stored, never the key bytes; a corrupt object is a one-line typed error."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from formats.kafka.names import kafka_uuid_to_uuid
from offloader.api import KafkaTier
from offloader.kafka.transform_read import load_section
from offloader.metadata.kafka_base import RemoteSegmentRecord
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.kafka.conftest import TransformedTier

pytestmark = pytest.mark.s3


def _download(tier: KafkaTier, seg: RemoteSegmentRecord, where: Path) -> Path:
    path = where / seg.keys["chunks"].rsplit("/", 1)[-1]
    path.write_bytes(tier.ctx.store.get(seg.keys["chunks"]).data)
    return path


def test_inspect_describes_a_kafka_chunks_object(
    tmp_path: Path, transformed_moto_tier: TransformedTier
) -> None:
    tier, ring = transformed_moto_tier.tier, transformed_moto_tier.ring
    home = tmp_path / "cli-home"
    seg = tier.ctx.meta.list_segments("secret", 0)[0]
    path = _download(tier, seg, tmp_path)
    section = load_section(tier.ctx.store, seg)
    stored_log = tier.ctx.store.head(seg.keys["log"]).size
    assert len(section.chunks) > 12 and section.stored_size == stored_log

    text = ok(home, "objects", "inspect", "--chunks", str(path)).stdout
    lines = text.splitlines()
    assert lines[0].startswith(f"chunks: {path} ({path.stat().st_size} bytes, magic LOKT, ")
    assert lines[1] == (
        f"segment: id {seg.segment_id} (uuid {kafka_uuid_to_uuid(seg.segment_id)}), "
        f"base offset {seg.base_offset}"
    )
    assert lines[2].startswith(f"transform: zstd+aes-256-gcm, key k1; {len(section.chunks)} ")
    assert f"stored {stored_log} bytes for {seg.size_bytes} " in lines[2]
    rows = [line for line in lines if line.startswith("chunk ")]
    assert len(rows) == 10 and rows[0].startswith("chunk 0: block 0, original 0+1024, stored 0+")
    assert f"... {len(section.chunks) - 10} more" in text
    assert lines[-1].startswith(f"ok: chunk table of segment {seg.segment_id} at ")

    records = json_lines(
        ok(home, "--json", "objects", "inspect", "--chunks", str(path), "--chunk-rows", "100000")
    )
    head, *chunk_rows, summary = records
    assert head["type"] == "chunks" and head["magic"] == "LOKT" and head["version"] == 1
    assert (head["segment_id"], head["base_offset"]) == (seg.segment_id, seg.base_offset)
    assert head["block_count"] == len(section.block_lengths)
    assert head["transform"] == {
        "transform": "zstd+aes-256-gcm",
        "key_id": "k1",
        "chunk_size": 1024,
        "chunks": len(section.chunks),
        "compressed_chunks": sum(1 for c in section.chunks if c.flags & 1),
        "original_size": seg.size_bytes,
        "stored_size": stored_log,
    }
    assert summary == {
        "type": "summary",
        "valid": True,
        "chunks": len(section.chunks),
        "shown": len(section.chunks),
    }
    # the rows tile the original .log and the stored object with no gap or overlap
    orig = stored = 0
    for i, row in enumerate(chunk_rows):
        assert row["chunk"] == i and row["original_offset"] == orig
        assert row["stored_offset"] == stored and row["stored_length"] > 0
        assert row["transform"] in {"aes-256-gcm", "zstd+aes-256-gcm"}
        assert row["crc32c"] == f"{section.chunks[i].crc32c:08x}"
        orig += row["original_length"]
        stored += row["stored_length"]
    assert (orig, stored) == (seg.size_bytes, stored_log)

    # never the key bytes: neither the key-encryption key nor the wrapped data key
    kek = json.loads(ring.path.read_text())["keys"][0]["key"]
    wrapped = section.wrapped_key
    everything = text + json.dumps(records)
    for secret in (kek, wrapped.hex(), base64.b64encode(wrapped).decode()):
        assert secret not in everything


def test_inspect_refuses_a_corrupt_chunks_object(
    tmp_path: Path, transformed_moto_tier: TransformedTier
) -> None:
    tier = transformed_moto_tier.tier
    home = tmp_path / "cli-home"
    seg = tier.ctx.meta.list_segments("secret", 0)[0]
    good = _download(tier, seg, tmp_path).read_bytes()
    bad = tmp_path / "bad.chunks"
    cases = {
        "CRC32C mismatch": good[:40] + bytes([good[40] ^ 0x10]) + good[41:],
        "ends inside its section": good[:-9],
        "too short": good[:20],
        "magic b'LOKX'": b"LOKX" + good[4:],
        "version 2": good[:4] + b"\x02" + good[5:],
        "bytes after the segment chunk table": good + b"\x00",
    }
    for message, data in cases.items():
        bad.write_bytes(data)
        line = one_line_error(run(home, "objects", "inspect", "--chunks", str(bad)))
        assert line.startswith(f"error: chunks {bad}: ") and message in line, line
        assert "Traceback" not in line
    # a .log is not a chunk table; --chunks is inspected alone
    log = tmp_path / "segment.log"
    log.write_bytes(tier.ctx.store.get(seg.keys["log"]).data)
    assert "magic" in one_line_error(run(home, "objects", "inspect", "--chunks", str(log)))
    both = run(home, "objects", "inspect", "--chunks", str(bad), "--data", str(log))
    assert both.exit_code == 2 and "--chunks is inspected alone" in both.output
    neither = run(home, "objects", "inspect")
    assert neither.exit_code == 2 and "--data and --index" in neither.output
