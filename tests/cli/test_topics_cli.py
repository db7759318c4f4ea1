"""``offloader topics ...`` through click's CliRunner, text and ``--json``, on a file store."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from cli.render import Progress
from cli.topics.produce import synthetic_payloads
from offloader.api import Offloader, OffloadTrigger, Position
from offloader.metadata.base import TopicOffloadStatus
from tests.cli.helpers import json_lines, ok, one_line_error, run

NS = "tenant/ns"
TOPIC = "persistent://tenant/ns/t1"
SMALL = ("--max-entries-per-ledger", "50", "--min-rollover-time", "0", "--max-block-size", "4K")
BLOCKS = ("--max-block-size", "4K")  # the offload options of the commands that only offload


def info(home: Path, topic: str = TOPIC) -> dict[str, Any]:
    return json_lines(ok(home, "--json", "topics", "info", topic))[0]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", NS)
    return home


@pytest.fixture()
def produced(home: Path) -> Path:
    """TOPIC with 300 entries of 100 bytes: 6 ledgers of 50 (the last one may be open)."""
    ok(home, "topics", "produce", TOPIC, "--synthetic", "300", "--size", "100", *SMALL)
    return home


# --- produce -------------------------------------------------------------------------------
def test_produce_from_stdin_lines(home: Path) -> None:
    result = ok(home, "topics", "produce", TOPIC, input="alpha\nbeta\ngamma")
    assert result.stdout.startswith(f"Produced 3 entries (14 B) to {TOPIC}: ")
    entries = json_lines(ok(home, "--json", "topics", "read", TOPIC, "--payload"))
    payloads = [base64.b64decode(e["payload_b64"]) for e in entries]
    assert payloads == [b"alpha", b"beta", b"gamma"]


def test_produce_from_file_json(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "lines.txt"
    data.write_bytes(b"one\ntwo\r\nthree\n")
    record = json_lines(ok(home, "--json", "topics", "produce", TOPIC, "--file", str(data)))[0]
    assert record["topic"] == TOPIC and record["entries"] == 3 and record["bytes"] == 3 + 4 + 5
    assert set(record) == {
        "topic", "entries", "bytes", "first", "last", "ledgers_closed", "ledgers_offloaded"
    }  # fmt: skip
    first, last = Position.parse(record["first"]), Position.parse(record["last"])
    assert first.ledger_id == last.ledger_id and (first.entry_id, last.entry_id) == (0, 2)


def test_produce_synthetic_rolls_ledgers_over(home: Path) -> None:
    result = ok(
        home, "--json", "topics", "produce", TOPIC, "--synthetic", "120", "--size", "64",
        "--max-entries-per-ledger", "50", "--min-rollover-time", "0",
    )  # fmt: skip
    record = json_lines(result)[0]
    assert record["entries"] == 120 and record["bytes"] == 120 * 64
    assert len(record["ledgers_closed"]) >= 2
    text = ok(home, "topics", "produce", TOPIC, "--synthetic", "60", "--size", "64",
              "--max-entries-per-ledger", "50", "--min-rollover-time", "0").stdout  # fmt: skip
    assert "Ledgers closed: " in text


def test_synthetic_payloads_are_deterministic_and_sized() -> None:
    first = list(synthetic_payloads(5, 100))
    assert first == list(synthetic_payloads(5, 100))
    assert all(len(p) == 100 for p in first) and len(set(first)) == 5
    assert first[3].startswith(b"entry-0000000003 ")
    assert [len(p) for p in synthetic_payloads(2, 4)] == [4, 4]


def test_produce_to_unknown_namespace_is_one_line_error(home: Path) -> None:
    line = one_line_error(run(home, "topics", "produce", "persistent://no/such/t", input="x\n"))
    assert "no/such" in line


def test_produce_progress_bar_on_a_terminal(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cli.topics.produce.progress_enabled", lambda cli: True)
    monkeypatch.setattr(Progress, "DELAY", 0.0)
    result = ok(home, "topics", "produce", TOPIC, "--synthetic", "200", "--size", "1K", *SMALL)
    assert "produce [" in result.stderr and "KiB/s" in result.stderr
    assert "produce [" not in result.stdout


# --- list / info / delete ------------------------------------------------------------------
def test_list_text_and_json(produced: Path) -> None:
    ok(produced, "namespaces", "create", "tenant/other")
    ok(produced, "topics", "produce", "persistent://tenant/other/t2", input="x\n")
    assert ok(produced, "topics", "list").stdout.splitlines() == [
        TOPIC,
        "persistent://tenant/other/t2",
    ]
    assert json_lines(ok(produced, "--json", "topics", "list", NS)) == [{"topic": TOPIC}]
    assert ok(produced, "topics", "list", "tenant/empty-or-missing").stdout == ""


def test_info_text_table(produced: Path) -> None:
    lines = ok(produced, "topics", "info", TOPIC).stdout.splitlines()
    assert lines[0] == f"topic:          {TOPIC}"
    assert lines[1] == "managed ledger: tenant/ns/persistent/t1"
    assert lines[2].startswith("entries:        300, ")
    header = lines[4]
    assert header.split() == [
        "LEDGER", "ENTRIES", "SIZE", "STATE", "OFFLOADED", "LOCAL_DELETED", "UUID"
    ]  # fmt: skip
    rows = [line.split() for line in lines[5:]]
    assert len(rows) >= 6
    assert all(row[4] == "no" and row[6] == "-" for row in rows)
    # aligned: every row's SIZE column ends where the header's does
    size_end = header.index("SIZE") + len("SIZE")
    assert all(line[size_end - 1] != " " for line in lines[5:])


def test_info_json(produced: Path) -> None:
    record = info(produced)
    assert record["topic"] == TOPIC and record["entries"] == 300
    assert record["size_bytes"] == 300 * 100 == record["local_size_bytes"]
    assert record["offloaded_size_bytes"] == 0
    ledger = record["ledgers"][0]
    assert set(ledger) == {
        "ledger_id", "entries", "size_bytes", "state", "created_ms", "closed_ms", "offloaded",
        "local_deleted", "uuid", "offloaded_ms",
    }  # fmt: skip
    assert ledger["state"] == "CLOSED" and ledger["entries"] == 50
    assert ledger["offloaded"] is False and ledger["uuid"] is None


def test_info_unknown_topic_is_one_line_error(home: Path) -> None:
    line = one_line_error(run(home, "topics", "info", "persistent://tenant/ns/missing"))
    assert "missing" in line
    assert one_line_error(run(home, "--json", "topics", "info", "persistent://tenant/ns/x"))


def test_delete(produced: Path) -> None:
    ok(produced, "topics", "offload-prefix", TOPIC, "--size-threshold", "1K", *BLOCKS)
    assert ok(produced, "topics", "delete", TOPIC).stdout == f"Deleted topic {TOPIC}\n"
    assert ok(produced, "topics", "list").stdout == ""
    one_line_error(run(produced, "topics", "info", TOPIC))
    report = json_lines(ok(produced, "--json", "objects", "orphans", "--min-age", "0"))[0]
    assert report["clean"], report  # the offloaded objects went with the topic
    ok(produced, "topics", "produce", TOPIC, input="again\n")
    assert json_lines(ok(produced, "--json", "topics", "delete", TOPIC)) == [
        {"topic": TOPIC, "deleted": True}
    ]


# --- offload-prefix / offload-status --------------------------------------------------------
def test_offload_status_before_any_offload(produced: Path) -> None:
    result = ok(produced, "topics", "offload-status", TOPIC)
    assert result.stdout == f"Offload has not been run for {TOPIC} since broker startup\n"
    record = json_lines(ok(produced, "--json", "topics", "offload-status", TOPIC))[0]
    assert record["status"] == "NOT_RUN" and record["topic"] == TOPIC
    assert set(record) == {"topic", "status", "last_error", "updated_ms"}


def test_offload_prefix_size_threshold_text(produced: Path) -> None:
    before = info(produced)
    ids = [ledger["ledger_id"] for ledger in before["ledgers"]]
    # keep 10 KB local: the newest ledgers whose sizes sum past 10 KB stay, the rest go
    result = ok(produced, "topics", "offload-prefix", TOPIC, "--size-threshold", "10K", *BLOCKS)
    first_line, *rest = result.stdout.splitlines()
    assert first_line.startswith(f"Offload triggered for {TOPIC} for messages before ")
    target = Position.parse(first_line.rsplit(" ", 1)[1].rsplit(":", 1)[0])
    assert first_line.endswith(f"{target.ledger_id}:0:-1") and target.ledger_id in ids
    assert rest and rest[0].startswith("Offloaded ledgers: ")
    after = info(produced)
    offloaded = [ledger["ledger_id"] for ledger in after["ledgers"] if ledger["offloaded"]]
    assert offloaded == [lid for lid in ids if lid < target.ledger_id]
    assert all(ledger["uuid"] for ledger in after["ledgers"] if ledger["offloaded"])
    assert ok(produced, "topics", "offload-status", TOPIC).stdout == "Offload was a success\n"
    text = ok(produced, "topics", "info", TOPIC).stdout
    assert " yes " in text


def test_offload_prefix_json_and_position(produced: Path) -> None:
    ids = [ledger["ledger_id"] for ledger in info(produced)["ledgers"]]
    result = ok(produced, "--json", "topics", "offload-prefix", TOPIC, "--position",
                f"{ids[2]}:0", *BLOCKS)  # fmt: skip
    record = json_lines(result)[0]
    assert record["triggered"] is True and record["topic"] == TOPIC
    assert record["position"] == f"{ids[2]}:0" and record["message_id"] == f"{ids[2]}:0:-1"
    assert record["offloaded"] == ids[:2] and record["failed"] == []
    status = json_lines(ok(produced, "--json", "topics", "offload-status", TOPIC, "-w"))[0]
    assert status["status"] == "SUCCESS" and status["last_error"] is None


def test_offload_prefix_nothing_to_offload(produced: Path) -> None:
    result = ok(produced, "topics", "offload-prefix", TOPIC, "--size-threshold", "1G")
    assert result.stdout == "Nothing to offload\n"
    record = json_lines(
        ok(produced, "--json", "topics", "offload-prefix", TOPIC, "--size-threshold", "1G")
    )[0]
    assert record["triggered"] is False and record["message_id"] is None


def test_offload_prefix_unknown_topic(home: Path) -> None:
    line = one_line_error(
        run(home, "topics", "offload-prefix", "persistent://tenant/ns/nope", "-s", "1M")
    )
    assert "nope" in line


def test_offload_prefix_progress_bar(produced: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cli.topics.manage.progress_enabled", lambda cli: True)
    monkeypatch.setattr(Progress, "DELAY", 0.0)
    result = ok(produced, "topics", "offload-prefix", TOPIC, "-s", "1K", *BLOCKS)
    assert result.stdout.startswith("Offload triggered for ")
    assert "\roffload [" in result.stderr and "B/s" in result.stderr
    assert result.stderr.endswith("\n")
    # --json: never a bar
    monkeypatch.undo()
    result = ok(produced, "--json", "topics", "offload-prefix", TOPIC, "-s", "1K", *BLOCKS)
    assert result.stderr == ""


def test_offload_failure_is_exit_1(produced: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self: Offloader, topic: str, **kwargs: Any) -> OffloadTrigger:
        return OffloadTrigger(
            topic=topic, position=Position(9, 0), ledgers=(7, 8), offloaded=(7,),
            failed=((8, "store unavailable"),),
        )  # fmt: skip

    monkeypatch.setattr(Offloader, "offload_prefix", failing)
    result = run(produced, "topics", "offload-prefix", TOPIC, "--position", "9:0")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"Offload triggered for {TOPIC} for messages before 9:0:-1",
        "Offloaded ledgers: 7",
    ]
    assert result.stderr == "error: offload of ledger 8 failed: store unavailable\n"


def test_offload_status_error_exit_1(produced: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def errored(self: Offloader, topic: str) -> TopicOffloadStatus:
        return TopicOffloadStatus(topic, "ERROR", "boom: bucket gone", 1)

    monkeypatch.setattr(Offloader, "offload_status", errored)
    result = run(produced, "topics", "offload-status", TOPIC)
    assert result.exit_code == 1
    assert result.stdout == "Error in offload\n"
    assert result.stderr == "error: Error offloading: boom: bucket gone\n"
    result = run(produced, "--json", "topics", "offload-status", TOPIC)
    assert result.exit_code == 1 and json_lines(result)[0]["last_error"] == "boom: bucket gone"


def test_offload_status_wait_complete_polls(
    produced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter(["RUNNING", "RUNNING", "SUCCESS"])

    def polled(self: Offloader, topic: str) -> TopicOffloadStatus:
        return TopicOffloadStatus(topic, next(answers))  # type: ignore[arg-type]

    monkeypatch.setattr(Offloader, "offload_status", polled)
    monkeypatch.setattr("cli.topics.manage.STATUS_POLL_SECONDS", 0.01)
    result = ok(produced, "topics", "offload-status", TOPIC, "--wait-complete")
    assert result.stdout == "Offload was a success\n"
    answers = iter(["RUNNING"])
    assert ok(produced, "topics", "offload-status", TOPIC).stdout == (
        "Offload is currently running\n"
    )


# --- read ----------------------------------------------------------------------------------
def test_read_json_from_both_tiers(produced: Path) -> None:
    ok(produced, "topics", "offload-prefix", TOPIC, "--size-threshold", "10K", *BLOCKS)
    entries = json_lines(ok(produced, "--json", "topics", "read", TOPIC, "--payload"))
    expected = list(synthetic_payloads(300, 100))
    assert len(entries) == 300
    for entry, payload in zip(entries, expected, strict=True):
        assert set(entry) == {
            "topic", "ledger_id", "entry_id", "length", "sha256", "tier", "verified", "payload_b64"
        }  # fmt: skip
        assert base64.b64decode(entry["payload_b64"]) == payload
        assert entry["sha256"] == hashlib.sha256(payload).hexdigest() and entry["length"] == 100
    tiers = {entry["tier"] for entry in entries}
    assert tiers == {"offloaded", "local"}
    no_payload = json_lines(ok(produced, "--json", "topics", "read", TOPIC, "--count", "2"))
    assert len(no_payload) == 2 and "payload_b64" not in no_payload[0]


def test_read_text_from_and_count(produced: Path) -> None:
    ids = [ledger["ledger_id"] for ledger in info(produced)["ledgers"]]
    result = ok(produced, "topics", "read", TOPIC, "--from", f"{ids[1]}:48", "--count", "3")
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["POSITION", "LENGTH", "SHA256", "TIER"]
    positions = [row.split()[0] for row in rows]
    assert positions == [f"{ids[1]}:48", f"{ids[1]}:49", f"{ids[2]}:0"]
    payload = list(synthetic_payloads(300, 100))[98]
    assert rows[0].split()[1:] == ["100", hashlib.sha256(payload).hexdigest(), "local"]
    assert len({len(row) for row in rows}) == 1  # aligned


def test_read_text_payload(home: Path) -> None:
    ok(home, "topics", "produce", TOPIC, input="hello world\n")
    row = ok(home, "topics", "read", TOPIC, "--payload").stdout.splitlines()[1]
    assert row.endswith("local      hello world")


def test_read_text_payload_is_escaped_and_truncated(home: Path, tmp_path: Path) -> None:
    head = b"a\x1b[31mred\\back\tslash\rcr\xff\x00"
    raw = head + b"z" * 100
    lines = tmp_path / "lines.bin"
    lines.write_bytes(raw + b"\n")
    ok(home, "topics", "produce", TOPIC, "--file", str(lines))
    result = ok(home, "topics", "read", TOPIC, "--payload")
    assert result.stdout.count("\n") == 2 and "\x1b" not in result.stdout
    row = result.stdout.splitlines()[1]
    shown = row.split("local", 1)[1].strip()
    escaped = "a\\x1b[31mred\\\\back\\tslash\\rcr\\xff\\x00"
    assert shown == escaped + "z" * (64 - len(head)) + f"... [+{len(raw) - 64} bytes]"
    assert all(" " <= char <= "~" for char in row)
    # JSON keeps every byte, in base64
    entry = json_lines(ok(home, "--json", "topics", "read", TOPIC, "--payload"))[0]
    assert base64.b64decode(entry["payload_b64"]) == raw


def test_read_unknown_topic(home: Path) -> None:
    result = run(home, "topics", "read", "persistent://tenant/ns/none")
    assert "does not exist" in one_line_error(result)
    assert result.stdout == ""  # not even the table header


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_read_from_a_ledger_the_topic_does_not_have(
    produced: Path, json_flag: tuple[str, ...]
) -> None:
    result = run(produced, *json_flag, "topics", "read", TOPIC, "--from", "99:0")
    assert one_line_error(result) == (
        f"error: invalid position 99:0 for {TOPIC}: the topic has no ledger 99"
    )
    assert result.stdout == ""


def test_produce_says_entry_for_one(home: Path) -> None:
    result = ok(home, "topics", "produce", TOPIC, input="only\n")
    assert result.stdout.startswith(f"Produced 1 entry (4 B) to {TOPIC}: ")


def test_produce_size_without_synthetic_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    result = run(home, "topics", "produce", TOPIC, "--size", "4K", input="a\n")
    assert result.exit_code == 2 and "--size only applies to --synthetic" in result.stderr
    lines = tmp_path / "lines.txt"
    lines.write_text("a\n")
    result = run(home, "topics", "produce", TOPIC, "--file", str(lines), "--size", "4K")
    assert result.exit_code == 2 and "--size only applies to --synthetic" in result.stderr
    assert "does not exist" in one_line_error(run(home, "topics", "info", TOPIC))  # not created


# --- a --store directory that does not exist -------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ("topics", "list"),
        ("topics", "info", TOPIC),
        ("topics", "read", TOPIC),
        ("topics", "offload-status", TOPIC),
        ("objects", "verify"),
        ("objects", "orphans"),
        ("objects", "gc"),
    ],
)
def test_read_only_commands_refuse_a_missing_store_directory(
    produced: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "no" / "such" / "store"
    for url in (missing.as_uri(), str(missing)):
        line = one_line_error(run(produced, "--store", url, *args))
        assert f"{missing} does not exist" in line
    assert not missing.parent.exists()


def test_writing_commands_create_a_missing_store_directory(home: Path, tmp_path: Path) -> None:
    store = tmp_path / "new" / "store"
    ok(home, "--store", store.as_uri(), "topics", "produce", TOPIC, input="a\n")
    assert store.is_dir()
    ok(home, "--store", store.as_uri(), "topics", "list")


def test_store_given_as_a_regular_file(home: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for args in (("topics", "list"), ("topics", "produce", TOPIC, "--synthetic", "1")):
        line = one_line_error(run(home, "--store", afile.as_uri(), *args))
        assert line == f"error: local store root {afile} is not a directory"
