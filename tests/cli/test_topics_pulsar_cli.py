"""``topics produce --format pulsar`` and ``topics read --decode pulsar`` (file store)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from formats.pulsar import parse_entry
from tests.cli.helpers import json_lines, ok, one_line_error, run

NS = "tenant/ns"
TOPIC = "persistent://tenant/ns/msgs"


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", NS)
    return home


@pytest.mark.parametrize("codec", ["none", "lz4", "zlib", "zstd", "snappy"])
def test_produce_batches_and_read_them_back(home: Path, codec: str) -> None:
    result = ok(
        home, "--json", "topics", "produce", TOPIC, "--synthetic", "25", "--size", "40",
        "--format", "pulsar", "--batch-size", "10", "--compression", codec,
        "--key", "k1", "--property", "site=lab", "--property", "empty=",
    )  # fmt: skip
    produced = json_lines(result)[0]
    assert produced["messages"] == 25 and produced["entries"] == 3
    entries = json_lines(ok(home, "--json", "topics", "read", TOPIC, "--payload"))
    metadata = [parse_entry(base64.b64decode(e["payload_b64"])).metadata for e in entries]
    assert [m.num_messages_in_batch for m in metadata] == [10, 10, 5]
    assert {m.compression or 0 for m in metadata} == {
        ["none", "lz4", "zlib", "zstd", "snappy"].index(codec)
    }
    messages = json_lines(ok(home, "--json", "topics", "read", TOPIC, "--decode", "pulsar"))
    assert [m["message_id"] for m in messages[:2]] == ["0:0:-1:0", "0:0:-1:1"]
    assert messages[-1]["message_id"] == "0:2:-1:4"
    assert all(m["key"] == "k1" for m in messages)
    assert all(m["properties"] == {"site": "lab", "empty": ""} for m in messages)
    assert [m["sequence_id"] for m in messages] == list(range(25))
    values = [base64.b64decode(m["value_b64"]) for m in messages]
    assert values[3].startswith(b"entry-0000000003 ") and all(len(v) == 40 for v in values)


def test_text_output_count_and_from(home: Path) -> None:
    ok(home, "topics", "produce", TOPIC, "--format", "pulsar", input="hello\nwo\trld\n")
    out = ok(home, "topics", "read", TOPIC, "--decode", "pulsar").stdout.splitlines()
    assert out[0].split() == [
        "MESSAGE_ID", "KEY", "PUBLISH_TIME", "EVENT_TIME", "PROPERTIES", "VALUE",
    ]  # fmt: skip
    assert out[1].startswith("0:0:-1:-1") and out[1].endswith("hello")
    assert out[2].endswith("wo\\trld")  # escaped
    assert "Z" in out[1].split()[2]  # ISO 8601 UTC
    assert len(ok(home, "topics", "read", TOPIC, "--decode", "pulsar", "-n", "1").stdout
               .splitlines()) == 2  # fmt: skip
    later = ok(home, "topics", "read", TOPIC, "--decode", "pulsar", "--from", "0:1").stdout
    assert "hello" not in later and "wo\\trld" in later


def test_usage_and_operational_errors(home: Path) -> None:
    assert run(home, "topics", "produce", TOPIC, "--key", "k", input="x").exit_code == 2
    bad = run(home, "topics", "produce", TOPIC, "--format", "pulsar", "--property", "novalue")
    assert bad.exit_code == 2
    assert run(home, "topics", "read", TOPIC, "--decrypt-key", __file__).exit_code == 2
    ok(home, "topics", "produce", TOPIC, input="not a pulsar entry\n")
    failed = run(home, "topics", "read", TOPIC, "--decode", "pulsar")
    assert failed.exit_code == 1
    assert "ledger 0 entry 0" in one_line_error(failed)
