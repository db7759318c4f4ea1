"""``objects inspect --chunks`` on the worked example of spec/transforms.md §8 (113 bytes):
the exact text it prints, and its JSON rows."""

from __future__ import annotations

from pathlib import Path

from formats.transform import encode_segment_table
from tests.cli.helpers import json_lines, ok
from tests.formats.test_transform_vectors import KAFKA_UUID, _kafka_example

EXPECTED = """\
chunks: {path} (113 bytes, magic LOKT, version 1, crc32c 0x8aeb04d6)
segment: id ABEiM0RVZneImaq7zN3u_w (uuid 00112233-4455-6677-8899-aabbccddeeff), base offset 1000
transform: aes-256-gcm, key k1; 2 chunks of 64 B (0 compressed), stored 151 bytes for 119 \
(ratio 1.269)
log: 1 block of 119 original bytes (largest block 119), 151 bytes stored
chunk 0: block 0, original 0+64, stored 0+80, aes-256-gcm, crc32c 0xbfe08a73
... 1 more (--chunk-rows N shows more)
ok: chunk table of segment ABEiM0RVZneImaq7zN3u_w at 1000 is valid (2 chunks)
"""


def test_the_spec_example(tmp_path: Path) -> None:
    _, section = _kafka_example()
    path = tmp_path / "00000000000000001000-ABEiM0RVZneImaq7zN3u_w.chunks"
    path.write_bytes(encode_segment_table(KAFKA_UUID, 1000, section))
    args = ("objects", "inspect", "--chunks", str(path))
    text = ok(tmp_path, *args, "--chunk-rows", "1").stdout
    assert text == EXPECTED.format(path=path)
    rows = json_lines(ok(tmp_path, "--json", *args, "--chunk-rows", "0"))
    assert [r["type"] for r in rows] == ["chunks", "summary"]
    rows = json_lines(ok(tmp_path, "--json", *args))
    assert [(r["stored_offset"], r["stored_length"], r["crc32c"]) for r in rows[1:-1]] == [
        (0, 80, "bfe08a73"),
        (80, 71, "014f89e8"),
    ]
    assert section.wrapped_key.hex() not in str(rows)
