"""``offloader objects inspect`` / ``encode`` through click's CliRunner, on the golden pairs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from cli.render import plural
from formats.index import decode_index
from tests.formats.helpers import (
    GOLDEN_DIR,
    Case,
    case,
    cases_with_files,
    golden_bytes,
    regenerate_payloads,
)

OK_CASES = [c for c in cases_with_files() if c["expected_reader_result"] == "ok"]
OK_IDS = [c["name"] for c in OK_CASES]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def golden_paths(c: Case) -> tuple[str, str]:
    return str(GOLDEN_DIR / c["files"]["data"]), str(GOLDEN_DIR / c["files"]["index"])


def json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def write_entries(path: Path, payloads: list[bytes]) -> None:
    path.write_text(
        "".join(json.dumps({"payload_b64": base64.b64encode(p).decode()}) + "\n" for p in payloads)
    )


@pytest.mark.parametrize("c", OK_CASES, ids=OK_IDS)
def test_inspect_golden_text(c: Case) -> None:
    data, index = golden_paths(c)
    result = run("objects", "inspect", "--data", data, "--index", index, "--entries")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"index: {index} (v1, {c['files']['index_length']} bytes")
    assert f"last entry {c['ledger_metadata']['last_entry_id']}" in lines[1]
    block_lines = [line for line in lines if line.startswith("block ")]
    assert len(block_lines) == len(c["blocks"])
    for line, block in zip(block_lines, c["blocks"], strict=True):
        assert f"part {block['part_id']}, entries {block['first_entry_id']}.." in line
        assert f"offset {block['offset']}, size {block['length']}" in line
    entry_lines = [line for line in lines if line.startswith("entry ")]
    assert entry_lines == [
        f"entry {e['entry_id']}: length {e['length']}, sha256 {e['sha256']}" for e in c["entries"]
    ]
    counts = (
        f"{plural(c['entry_count'], 'entry', 'entries')} in {plural(len(c['blocks']), 'block')}"
    )
    assert lines[-1].startswith(f"ok: {counts}")


@pytest.mark.parametrize("c", OK_CASES, ids=OK_IDS)
@pytest.mark.parametrize("global_json", [False, True])
def test_inspect_golden_json(c: Case, global_json: bool) -> None:
    data, index = golden_paths(c)
    args = ["objects", "inspect", "--data", data, "--index", index, "--entries"]
    args = ["--json", *args] if global_json else [*args, "--json"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    records = json_lines(result.output)
    head = records[0]
    assert head["type"] == "index"
    assert head["data_object_length"] == head["data_length"] == c["files"]["data_length"]
    assert head["ledger_metadata"]["last_entry_id"] == c["ledger_metadata"]["last_entry_id"]
    assert head["extension"] is None
    blocks = [r for r in records if r.get("type") == "block"]
    assert [(b["part"], b["first_entry_id"], b["offset"], b["size"]) for b in blocks] == [
        (b["part_id"], b["first_entry_id"], b["offset"], b["length"]) for b in c["blocks"]
    ]
    entries = [r for r in records if "entry_id" in r]
    assert entries == [
        {"entry_id": e["entry_id"], "length": e["length"], "sha256": e["sha256"]}
        for e in c["entries"]
    ]
    assert records[-1] == {
        "type": "summary",
        "valid": True,
        "entries": c["entry_count"],
        "blocks": len(c["blocks"]),
    }


def test_inspect_oversize_entry_pair_fails_with_one_line() -> None:
    data, index = golden_paths(case("oversize-entry"))
    result = CliRunner().invoke(cli, ["objects", "inspect", "--data", data, "--index", index])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: index ")
    assert "does not hold" in lines[0]
    assert "Traceback" not in result.stderr


def test_inspect_rejects_a_damaged_block_and_a_short_data_object(tmp_path: Path) -> None:
    c = case("custom-metadata")
    data, index = golden_bytes(c)
    (tmp_path / "i").write_bytes(index)
    damaged = bytearray(data)
    damaged[2048 + 130] ^= 0x40  # the second block's first entry length
    (tmp_path / "d").write_bytes(bytes(damaged))
    args = ["objects", "inspect", "--data", str(tmp_path / "d"), "--index", str(tmp_path / "i")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and result.stderr.startswith("error: data ")
    assert len(result.stderr.splitlines()) == 1
    (tmp_path / "d").write_bytes(data[:-1])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and "the index says" in result.stderr


def test_verbose_error_shows_the_traceback() -> None:
    data, index = golden_paths(case("oversize-entry"))
    result = CliRunner().invoke(cli, ["-v", "objects", "inspect", "--data", data, "--index", index])
    assert result.exit_code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize("c", OK_CASES, ids=OK_IDS)
def test_encode_golden_is_byte_identical(c: Case, tmp_path: Path) -> None:
    entries = tmp_path / "entries.jsonl"
    write_entries(entries, regenerate_payloads(c))
    metadata = tmp_path / "md.json"
    metadata.write_text(json.dumps(c["ledger_metadata"]))
    out_data, out_index = tmp_path / "out.data", tmp_path / "out.index"
    result = run(
        "objects", "encode",
        "--entries", str(entries),
        "--ledger-id", str(c["ledger_id"]),
        "--max-block-size", str(c["max_block_size"]),
        "--ledger-metadata", str(metadata),
        "--no-extension",
        "--data", str(out_data),
        "--index", str(out_index),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data, index = golden_bytes(c)
    assert out_data.read_bytes() == data
    assert out_index.read_bytes() == index
    counts = (
        f"{plural(c['entry_count'], 'entry', 'entries')} in {plural(len(c['blocks']), 'block')}"
    )
    assert counts in result.output


def test_encode_with_size_string_and_extension_then_inspect(tmp_path: Path) -> None:
    c = case("multi-block")  # 64 KiB blocks
    payloads = regenerate_payloads(c)
    entries = tmp_path / "e.jsonl"
    write_entries(entries, payloads)
    out_data, out_index = tmp_path / "L.data", tmp_path / "L.index"
    result = run(
        "--json", "objects", "encode", "--entries", str(entries), "--ledger-id", "12",
        "--max-block-size", "64K", "--data", str(out_data), "--index", str(out_index),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (summary,) = json_lines(result.output)
    assert summary["blocks"] == len(c["blocks"]) and summary["extension"] is True
    assert out_data.read_bytes() == golden_bytes(c)[0]
    index = decode_index(out_index.read_bytes())
    assert index.extension is not None  # (no fine points: blocks are no bigger than 64 KiB)

    result = run(
        "objects", "inspect", "--data", str(out_data), "--index", str(out_index), "--entries",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = json_lines(result.output)
    assert records[0]["extension"] == {
        "block_crc32c": len(c["blocks"]),
        "fine_offsets": len(index.extension.fine_offsets),
    }
    assert all(r["crc32c_recorded"] for r in records if r.get("type") == "block")
    got = [r for r in records if "entry_id" in r]
    assert [r["sha256"] for r in got] == [hashlib.sha256(p).hexdigest() for p in payloads]


def test_encode_round_trip_with_default_metadata(tmp_path: Path) -> None:
    payloads = [b"", b"x" * 10, bytes(range(256)), b"", b"last"]
    entries = tmp_path / "e.jsonl"
    write_entries(entries, payloads)
    entries.write_text(entries.read_text() + "\n")  # blank lines are skipped
    d, i = tmp_path / "d", tmp_path / "i"
    result = run(
        "objects", "encode", "--entries", str(entries), "--ledger-id", "3",
        "--max-block-size", "400", "--data", str(d), "--index", str(i),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = run("objects", "inspect", "--data", str(d), "--index", str(i), "--entries", "--json")
    assert result.exit_code == 0, result.output
    got = [r for r in json_lines(result.output) if "entry_id" in r]
    assert got == [
        {"entry_id": n, "length": len(p), "sha256": hashlib.sha256(p).hexdigest()}
        for n, p in enumerate(payloads)
    ]
    md = decode_index(i.read_bytes()).ledger_metadata
    assert (md.last_entry_id, md.length, md.state) == (4, sum(map(len, payloads)), "CLOSED")


@pytest.mark.parametrize("size", ["64Q", "lots", "-5M", "100"])
def test_bad_size_string_is_a_usage_error(size: str, tmp_path: Path) -> None:
    entries = tmp_path / "e.jsonl"
    write_entries(entries, [b"a"])
    result = CliRunner().invoke(
        cli,
        ["objects", "encode", "--entries", str(entries), "--ledger-id", "1",
         "--max-block-size", size, "--data", str(tmp_path / "d"), "--index", str(tmp_path / "i")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--max-block-size" in result.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["objects", "inspect", "--data", "/nonexistent/d", "--index", "/nonexistent/i"],
        ["objects", "encode", "--entries", "/nonexistent/e.jsonl", "--ledger-id", "1",
         "--data", "d", "--index", "i"],
        ["objects", "inspect", "--data", "x"],
        ["objects", "frobnicate"],
    ],
)  # fmt: skip
def test_missing_files_and_bad_usage_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("name", "needle"),
    [("oversize-first-entry", "max block size"), ("empty-ledger", "no entries")],
)
def test_encode_refuses_what_pulsar_gets_wrong(name: str, needle: str, tmp_path: Path) -> None:
    c = case(name)
    entries = tmp_path / "e.jsonl"
    write_entries(entries, regenerate_payloads(c))
    d, i = tmp_path / "d", tmp_path / "i"
    result = CliRunner().invoke(
        cli,
        ["objects", "encode", "--entries", str(entries), "--ledger-id", str(c["ledger_id"]),
         "--max-block-size", str(c["max_block_size"]), "--data", str(d), "--index", str(i)],
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and needle in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not d.exists() and not i.exists()


def test_encode_bad_jsonl_and_metadata_are_one_line_errors(tmp_path: Path) -> None:
    entries = tmp_path / "e.jsonl"
    entries.write_text('{"payload_b64": "QQ=="}\n{"payload": 1}\n')
    base = ["objects", "encode", "--ledger-id", "1", "--data", str(tmp_path / "d"),
            "--index", str(tmp_path / "i")]  # fmt: skip
    result = CliRunner().invoke(cli, [*base, "--entries", str(entries)])
    assert result.exit_code == 1 and "line 2" in result.stderr
    write_entries(entries, [b"a"])
    md = tmp_path / "md.json"
    md.write_text("{not json")
    result = CliRunner().invoke(
        cli, [*base, "--entries", str(entries), "--ledger-metadata", str(md)]
    )
    assert result.exit_code == 1 and result.stderr.startswith("error: ")
    md.write_text(json.dumps(case("single-block")["ledger_metadata"]))  # ledger_id 11, not 1
    result = CliRunner().invoke(
        cli, [*base, "--entries", str(entries), "--ledger-metadata", str(md)]
    )
    assert result.exit_code == 2 and "--ledger-id" in result.stderr


def test_every_command_has_help_with_an_example() -> None:
    for args in (["--help"], ["objects", "--help"], ["objects", "inspect", "--help"],
                 ["objects", "encode", "--help"]):  # fmt: skip
        result = run(*args)
        assert result.exit_code == 0
        assert "Example" in result.output and "offloader " in result.output


def test_global_options_reach_the_context(tmp_path: Path) -> None:
    import click

    from cli.context import CliContext, pass_cli

    seen: list[CliContext] = []

    @click.command("probe")
    @pass_cli
    def probe(app: CliContext) -> None:
        seen.append(app)

    cli.add_command(probe)
    try:
        args = ["--home", str(tmp_path), "--log-format", "json", "-vv", "-q", "probe"]
        assert run(*args).exit_code == 0
        args = ["--store", "s3://b/p", "--endpoint-url", "http://h:9", "--json", "probe"]
        assert run(*args).exit_code == 0
    finally:
        cli.commands.pop("probe")
    first, second = seen
    assert first.home == tmp_path and first.log_format == "json" and first.verbosity == 1
    assert first.store == f"file://{(tmp_path / 'objects').resolve()}"
    assert not first.json
    assert (second.store, second.endpoint_url, second.json) == ("s3://b/p", "http://h:9", True)
    assert second.home == Path(".offloader")


# --- encode: refusals in user terms --------------------------------------------------------
def _encode(tmp_path: Path, *args: str) -> Result:
    entries = tmp_path / "e.jsonl"
    if not entries.exists():
        write_entries(entries, [b"hello"])
    return CliRunner().invoke(
        cli, ["objects", "encode", "--entries", str(entries), "--ledger-id", "1", *args]
    )


def test_encode_refuses_one_file_for_data_and_index(tmp_path: Path) -> None:
    out = tmp_path / "o.data"
    out.write_bytes(b"keep me")
    link = tmp_path / "link.data"
    link.symlink_to(out)
    hard = tmp_path / "hard.data"
    os.link(out, hard)
    for data, index in (
        (str(out), str(out)),
        (str(out), str(tmp_path / "." / "o.data")),
        (str(link), str(out)),
        (str(hard), str(out)),
        (str(tmp_path / "new"), str(tmp_path / "sub" / ".." / "new")),
    ):
        result = _encode(tmp_path, "--data", data, "--index", index)
        assert result.exit_code == 2, result.output
        assert "--data" in result.stderr and "are the same file" in result.stderr
    assert out.read_bytes() == b"keep me"
    assert not (tmp_path / "new").exists()
    entries = str(tmp_path / "e.jsonl")
    result = _encode(tmp_path, "--data", entries, "--index", str(tmp_path / "i"))
    assert result.exit_code == 2 and "--entries" in result.stderr
    assert "payload_b64" in (tmp_path / "e.jsonl").read_text()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"x": 1}', 'the object has no "payload_b64" field'),
        ("[1, 2]", "expected a JSON object"),
        ('"text"', "got a string"),
        ('{"payload_b64": 5}', '"payload_b64" must be a base64 string, not a number'),
        ('{"payload_b64": "!!"}', '"payload_b64" is not valid base64'),
        ("nope", "not valid JSON"),
    ],
)
def test_encode_bad_entry_lines_say_what_is_wrong(tmp_path: Path, line: str, message: str) -> None:
    entries = tmp_path / "e.jsonl"
    entries.write_text('{"payload_b64": "QQ=="}\n' + line + "\n")
    result = _encode(tmp_path, "--data", str(tmp_path / "d"), "--index", str(tmp_path / "i"))
    assert result.exit_code == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {entries} line 2: ") and message in error
    assert "Error" not in error and "indices" not in error and "'payload_b64'" not in error


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({}, 'ledger metadata has no "ensemble_size" field'),
        (
            {"ensemble_size": 1, "write_quorum_size": "x", "length": 0},
            'field "write_quorum_size" must be an integer, not a string',
        ),
        (
            {"ensemble_size": 1, "write_quorum_size": 1, "length": 0, "ensembles": [1]},
            'field "ensembles" must be a list',
        ),
        (
            {"ensemble_size": 1, "write_quorum_size": 1, "length": 0, "custom_metadata": [{}]},
            'field "custom_metadata" must be a list',
        ),
        ([], "expected a JSON ledger metadata object, got an array"),
    ],
)
def test_encode_bad_ledger_metadata_says_what_is_wrong(
    tmp_path: Path, metadata: Any, message: str
) -> None:
    md = tmp_path / "md.json"
    md.write_text(json.dumps(metadata))
    result = _encode(
        tmp_path, "--ledger-metadata", str(md), "--data", str(tmp_path / "d"),
        "--index", str(tmp_path / "i"),
    )  # fmt: skip
    assert result.exit_code == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {md}: ") and message in error
    assert "KeyError" not in error


def test_encode_unwritable_output_names_the_given_path(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "o.data"
    result = _encode(tmp_path, "--data", str(target), "--index", str(tmp_path / "i"))
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot write {target}: directory {target.parent} does not exist\n"
    )
    assert ".tmp-" not in result.stderr


def test_encode_and_inspect_say_one_entry_one_block(tmp_path: Path) -> None:
    d, i = tmp_path / "d", tmp_path / "i"
    result = _encode(tmp_path, "--data", str(d), "--index", str(i))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ledger 1: 1 entry in 1 block; ")
    result = run("objects", "inspect", "--data", str(d), "--index", str(i))
    assert "1 block CRC32C, 0 fine offsets" in result.stdout
    assert "1 block, header length" in result.stdout
    assert result.stdout.splitlines()[-1] == "ok: 1 entry in 1 block, pair is valid"


@pytest.mark.parametrize("c", OK_CASES[:2], ids=OK_IDS[:2])
def test_inspect_reads_a_file_stores_own_objects(c: Case, tmp_path: Path) -> None:
    """The files under a file:// store's root carry a metadata header; inspect skips it and
    reports exactly what it reports for the bare objects."""
    from offloader.store.local import LocalObjectStore

    data, index = golden_paths(c)
    store = LocalObjectStore(tmp_path / "root")
    store.put("t/x-ledger-7", Path(data).read_bytes(), {"role": "data"})
    store.put("t/x-ledger-7-index", Path(index).read_bytes(), {"role": "index"})
    stored_data, stored_index = tmp_path / "root/t/x-ledger-7", tmp_path / "root/t/x-ledger-7-index"
    assert stored_data.read_bytes() != Path(data).read_bytes()  # the header is there
    bare = run("objects", "inspect", "--data", data, "--index", index, "--entries", "--json")
    kept = run(
        "objects",
        "inspect",
        "--data",
        str(stored_data),
        "--index",
        str(stored_index),
        "--entries",
        "--json",
    )
    assert kept.exit_code == 0, kept.output
    drop = ("index", "data")
    assert [{k: v for k, v in r.items() if k not in drop} for r in json_lines(kept.output)] == [
        {k: v for k, v in r.items() if k not in drop} for r in json_lines(bare.output)
    ]
