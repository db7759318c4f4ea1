"""`objects inspect` of a transformed pair (stored files): says which transform, decodes and
checks every entry; a renamed encrypted object or a missing key is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats.keys import data_key, index_key
from offloader.api import Offloader, Position, TransformPolicy, create_key
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.transforms.helpers import NS, TOPIC, broker, json_payloads


def test_inspect_says_which_transform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    with Offloader.from_settings(home, broker=broker()) as off:
        off.create_namespace(NS)
        create_key(home, "k1")
        off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", "k1"))
        off.produce(TOPIC, json_payloads(300))
        off.offload_prefix(TOPIC, position=Position(1, 0))
        record = off.runtime.meta.get_ledger(0)
        assert record.offload is not None
        uuid = record.offload.uuid
        files = tmp_path / "files"
        files.mkdir()
        for key in (data_key(uuid, 0), index_key(uuid, 0)):
            (files / key).write_bytes(off.runtime.store.get(key).data)
    data, index = files / data_key(uuid, 0), files / index_key(uuid, 0)
    args = ("objects", "inspect", "--data", str(data), "--index", str(index))
    text = ok(home, *args).stdout
    assert "transform: zstd+aes-256-gcm, key k1;" in text
    assert "ok: 300 entries in" in text
    head = json_lines(ok(home, "--json", *args))[0]
    assert head["transform"]["transform"] == "zstd+aes-256-gcm"
    assert head["transform"]["stored_size"] == data.stat().st_size
    assert head["transform"]["original_size"] == head["data_object_length"]
    renamed = tmp_path / "renamed"
    renamed.write_bytes(data.read_bytes())
    line = one_line_error(
        run(home, "objects", "inspect", "--data", str(renamed), "--index", str(index))
    )
    assert "stored name" in line
    ring = json.loads((home / "keys").read_text())
    (home / "keys").unlink()
    missing = run(home, *args)
    line = one_line_error(missing)
    assert "'k1'" in line and ring["keys"][0]["key"] not in line
    # without the key the chunks cannot be decoded, but inspect still says which transform
    assert missing.stdout.startswith("transform: zstd+aes-256-gcm, key k1;")
    (record,) = json_lines(run(home, "--json", *args))
    assert record["type"] == "transform" and record["key_id"] == "k1"
    assert ring["keys"][0]["key"] not in json.dumps(record)
