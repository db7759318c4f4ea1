"""spec/bucket-manifests.md's worked example is what the codec writes and reads back."""

from __future__ import annotations

import re
from pathlib import Path

from formats.manifest import (
    LedgerMarker,
    decode_marker_body,
    decode_watermark_body,
    encode_marker_body,
    encode_watermark_body,
    ledger_marker_key,
    parse_ledger_marker_key,
    parse_watermark_key,
    watermark_key,
)

SPEC = Path(__file__).resolve().parents[2] / "spec" / "bucket-manifests.md"


def _example() -> dict[str, str]:
    block = re.search(r"## 5\. Worked example.*?```text\n(.*?)```", SPEC.read_text(), re.S)
    assert block is not None
    lines = block[1].splitlines()
    return {lines[i].rstrip(":"): lines[i + 1] for i in range(0, len(lines), 2)}


def test_the_worked_example_of_the_spec() -> None:
    example = _example()
    marker = LedgerMarker(
        managed_ledger_name="public/default/persistent/orders",
        ledger_id=7,
        uuid="862c7593-011b-4538-86bf-81d485f79a51",
        entries=30,
        entry_bytes=30 * 200,
        data_size=6488,
        index_size=142,
        index_crc32c=0x7C7378DC,
        transform="none",
        created_ms=1795814112380,
        closed_ms=1795814112398,
        offloaded_ms=1795814120197,
    )
    assert ledger_marker_key(marker) == example["marker key"]
    assert parse_ledger_marker_key(example["marker key"]).marker == marker
    assert encode_marker_body(marker).decode() == example["marker body"]
    assert decode_marker_body(example["marker body"].encode()) == marker
    name, uuid = marker.managed_ledger_name, marker.uuid
    assert watermark_key("ledgers", name, 7, uuid) == example["watermark key"]
    parsed = parse_watermark_key(example["watermark key"])
    assert (parsed.name, parsed.position, parsed.tag) == (name, 7, uuid)
    body = encode_watermark_body("ledgers", name, 7, uuid, marker.offloaded_ms)
    assert body.decode() == example["watermark body"]
    assert decode_watermark_body(body) == ("ledgers", name, 7, uuid, marker.offloaded_ms)
