"""``offloader kafka set-offload-transform|get-offload-transform|remove-offload-transform``,
offloader.toml's ``[transform.kafka_topics]``, ``kafka upload``/``kafka read`` of a transformed
topic and ``objects rekey`` moving its segments to a new key (local store, the CLI in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offloader.api import Offloader
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.kafka.logdir import record_value, write_partition


def _table_key_ids(home: Path) -> list[str]:
    from tests.kafka.test_transformed import _table

    with Offloader.from_settings(home) as off:
        tier = off.kafka()
        return [_table(tier, s).key_id for s in tier.ctx.meta.list_segments("orders", 0)]


def test_transform_commands_upload_read_and_rekey(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=400, codecs=(0,))
    ok(home, "keys", "create", "k1")
    line = one_line_error(
        run(home, "kafka", "set-offload-transform", "orders", "--encryption", "aes-256-gcm",
            "--key-id", "k9")
    )  # fmt: skip
    assert "k9" in line
    out = ok(home, "kafka", "set-offload-transform", "orders", "--compression", "zstd",
             "--level", "5", "--encryption", "aes-256-gcm").stdout  # fmt: skip
    assert "zstd(level 5)+aes-256-gcm(key active)" in out
    (summary,) = [
        r
        for r in json_lines(ok(home, "--json", "kafka", "upload", "--log-dir", str(root), "--once"))
        if "uploaded" in r and "outcome" not in r
    ]
    assert summary["uploaded"] >= 2
    assert set(_table_key_ids(home)) == {"k1"}
    rows = json_lines(ok(home, "--json", "kafka", "read", "orders", "0", "--from-offset", "17",
                         "--count", "3"))  # fmt: skip
    assert [r["offset"] for r in rows] == [17, 18, 19]
    assert rows[0]["value"] == record_value("orders", 0, 17).decode()
    ok(home, "keys", "create", "k2", "--activate")
    rekeyed = json_lines(ok(home, "--json", "objects", "rekey", "--to-key", "k2"))
    assert rekeyed and {r["action"] for r in rekeyed} == {"rekeyed"}
    assert {r["topic"] for r in rekeyed} == {"kafka:orders:0"}
    assert set(_table_key_ids(home)) == {"k2"}
    again = json_lines(ok(home, "--json", "objects", "rekey", "--to-key", "k2"))
    assert {r["action"] for r in again} == {"unchanged"}
    removed = json_lines(ok(home, "--json", "kafka", "remove-offload-transform", "orders"))
    assert removed == [{"topic": "orders", "removed": True}]
    got = json_lines(ok(home, "--json", "kafka", "get-offload-transform", "orders"))
    assert got == [
        {
            "topic": "orders",
            "transform": {
                "compression": "none",
                "level": None,
                "encryption": "none",
                "key_id": None,
            },
            "source": "default",
        }
    ]


def test_toml_kafka_topic_transform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text(
        '[transform]\nchunk_size = "64K"\n\n[transform.kafka_topics."orders"]\n'
        'compression = "zstd"\nencryption = "aes-256-gcm"\nkey_id = "k1"\n'
    )
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=300, codecs=(0,))
    write_partition(root, "clicks", 0, records=300, codecs=(0,))
    ok(home, "keys", "create", "k1")
    ok(home, "kafka", "upload", "--log-dir", str(root), "--once")
    (got,) = json_lines(ok(home, "--json", "kafka", "get-offload-transform", "orders"))
    assert got["source"] == "offloader.toml" and got["transform"]["key_id"] == "k1"
    with Offloader.from_settings(home) as off:
        meta = off.kafka().ctx.meta
        assert all("chunks" in s.keys for s in meta.list_segments("orders"))
        assert not any("chunks" in s.keys for s in meta.list_segments("clicks"))
    assert set(_table_key_ids(home)) == {"k1"}
    rows = json_lines(ok(home, "--json", "kafka", "read", "orders", "0", "--from-offset", "0"))
    assert [r["offset"] for r in rows][:5] == [0, 1, 2, 3, 4]
    # a stored policy (even none) overrides the file
    ok(home, "kafka", "set-offload-transform", "orders")
    (got,) = json_lines(ok(home, "--json", "kafka", "get-offload-transform", "orders"))
    assert got["source"] == "metadata" and got["transform"]["encryption"] == "none"


@pytest.mark.parametrize(
    "table, message",
    [
        ('[transform.kafka_topics."bad topic"]\ncompression = "zstd"', "legal Kafka topic"),
        ('[transform.kafka_topics."t"]\nencryption = "rot13"', "encryption 'rot13'"),
        ('[transform.kafka_topics."t"]\ncolour = 1', "takes only"),
    ],
)
def test_bad_kafka_topic_tables_are_refused(tmp_path: Path, table: str, message: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text(table)
    line = one_line_error(run(home, "kafka", "get-offload-transform", "t"))
    assert message in line and "offloader.toml" in line


def test_keys_never_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    ok(home, "keys", "create", "k1")
    material = json.loads((home / "keys").read_text())["keys"][0]["key"]
    out = ok(home, "--json", "kafka", "set-offload-transform", "t", "--encryption", "aes-256-gcm")
    assert material not in out.stdout and material not in out.stderr
