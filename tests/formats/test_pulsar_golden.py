"""Every entry the official client (pulsar-client) sent to the fake broker decodes to exactly
what it was asked to send (tests/golden/pulsar-messages; recapture with its capture.py)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from formats.protowire import iter_fields
from formats.pulsar import Decryptor, Message, iter_messages, parse_entry
from formats.pulsar.compression import CODECS_BY_NAME

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pulsar-messages"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
CASES = {case["name"]: case for case in MANIFEST["cases"]}


def entries_of(case: dict[str, Any], folder: Path = GOLDEN) -> list[bytes]:
    data = (folder / case["entries"]).read_bytes()
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    assert len(out) == case["entry_count"]
    return out


def decode(case: dict[str, Any], **kwargs: Any) -> list[Message]:
    entries = [(7, i, e) for i, e in enumerate(entries_of(case))]
    return list(iter_messages(entries, partition=3, **kwargs))


def check_value(msg: Message, sent: dict[str, Any]) -> None:
    if "value_sha256" in sent:
        assert len(msg.value) == sent["value_len"]
        assert hashlib.sha256(msg.value).hexdigest() == sent["value_sha256"]
    elif sent.get("value_b64") is None:
        assert msg.is_null and msg.value == b""
    else:
        assert not msg.is_null
        assert msg.value == base64.b64decode(sent["value_b64"])


def check_fields(msg: Message, sent: dict[str, Any]) -> None:
    assert msg.key == sent.get("key")
    assert msg.ordering_key == (sent["ordering_key"].encode() if "ordering_key" in sent else None)
    assert dict(msg.properties) == sent.get("properties", {})
    assert msg.event_time == sent.get("event_time")
    assert not msg.encrypted


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith(("batch-", "single-"))])
def test_client_entries_decode_exactly(name: str) -> None:
    case = CASES[name]
    got = decode(case)
    sent = case["messages"]
    assert len(got) == len(sent)
    batched = name.startswith("batch-")
    codec = CODECS_BY_NAME[name.split("-")[1]]
    for i, (msg, want) in enumerate(zip(got, sent, strict=True)):
        check_value(msg, want)
        check_fields(msg, want)
        assert msg.producer_name == f"golden-{name}"
        assert msg.sequence_id == i
        assert msg.publish_time > 1_600_000_000_000
        assert msg.batch_index == (i if batched else -1)
        assert msg.message_id == f"7:{0 if batched else i}:3:{msg.batch_index}"
    for entry in entries_of(case):
        md = parse_entry(entry).metadata
        assert md.is_batch == batched
        assert (md.compression or 0) == codec
        assert (md.uncompressed_size is not None) == (codec != 0)


@pytest.mark.parametrize("name", ["chunked-none", "chunked-lz4"])
def test_chunked_messages_reassemble(name: str) -> None:
    case = CASES[name]
    entries = entries_of(case)
    assert len(entries) >= 2
    for i, entry in enumerate(entries):
        md = parse_entry(entry).metadata
        assert md.chunk_id == i and md.num_chunks_from_msg == len(entries)
    [msg] = decode(case)
    check_value(msg, case["messages"][0])
    assert msg.key == case["messages"][0]["key"]
    assert msg.message_id == f"7:{len(entries) - 1}:3:-1"  # the last chunk's id, as Pulsar does


def _schema_data(case: dict[str, Any]) -> tuple[bytes, int]:
    fields = {
        n: v for n, _, v, _ in iter_fields(memoryview(base64.b64decode(case["schema_command_b64"])))
    }
    return bytes(fields[3]), int(fields[4])  # type: ignore[call-overload]


def test_json_schema_values() -> None:
    case = CASES["json-schema"]
    _data, kind = _schema_data(case)
    assert kind == 2  # Json
    got = decode(case)
    assert [json.loads(m.value) for m in got] == [m["record"] for m in case["messages"]]
    assert all(m.schema_version == (0).to_bytes(8, "big") for m in got)
    assert [m.key for m in got] == [m["key"] for m in case["messages"]]


def test_avro_schema_values() -> None:
    case = CASES["avro-schema"]
    data, kind = _schema_data(case)
    assert kind == 4  # Avro
    schema = fastavro.parse_schema(json.loads(data))
    got = decode(case)
    records = [fastavro.schemaless_reader(io.BytesIO(m.value), schema) for m in got]
    assert records == [m["record"] for m in case["messages"]]


def test_encrypted_batch_flagged_without_key_and_decrypted_with_it() -> None:
    case = CASES["encrypted-batch-zstd"]
    [flagged] = decode(case)
    assert flagged.encrypted and flagged.batch_index == -1
    assert flagged.value == parse_entry(entries_of(case)[0]).payload  # left as stored
    key = Decryptor((GOLDEN / MANIFEST["private_key"]).read_bytes())
    got = decode(case, decryptor=key)
    assert len(got) == len(case["messages"])
    for msg, want in zip(got, case["messages"], strict=True):
        check_value(msg, want)
        check_fields(msg, want)


def test_live_capture_from_the_client_decodes(tmp_path: Path) -> None:
    """Runs capture.py against the fake broker now (0.5 s) and decodes what it recorded."""
    pytest.importorskip("pulsar")
    spec = importlib.util.spec_from_file_location("pulsar_capture", GOLDEN / "capture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.capture(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    key = Decryptor((tmp_path / manifest["private_key"]).read_bytes())
    assert len(manifest["cases"]) == len(CASES)
    for case in manifest["cases"]:
        entries = [(1, i, e) for i, e in enumerate(entries_of(case, tmp_path))]
        got = list(iter_messages(entries, decryptor=key))
        assert len(got) == len(case["messages"]), case["name"]
        for msg, want in zip(got, case["messages"], strict=True):
            if "record" not in want:
                check_value(msg, want)
                check_fields(msg, want)
