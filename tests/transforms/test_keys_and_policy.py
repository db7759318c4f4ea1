"""The key ring (offloader/keyring.py), `keys create|list`, and the namespace transform policy
(`namespaces set-offload-transform`, stored in SQLite by schema migration v3)."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest

from offloader.errors import ConfigError, KeyRingError, MissingKeyError
from offloader.keyring import KeyRing, key_ring_path
from offloader.metadata.sqlite.db import MIGRATIONS, SCHEMA_VERSION
from offloader.metadata.sqlite.store import SqliteMetadataStore
from offloader.policies import NamespacePolicies, TransformPolicy
from tests.cli.helpers import json_lines, ok, one_line_error, run


def test_ring_file_is_0600_and_round_trips(tmp_path: Path) -> None:
    ring = KeyRing(tmp_path / "sub" / "keys")
    first = ring.create("k1")
    assert first.active  # the first key is active
    ring.create("k2")
    assert ring.active == "k1"
    ring.activate("k2")
    assert stat.S_IMODE((tmp_path / "sub" / "keys").stat().st_mode) == 0o600
    again = KeyRing(tmp_path / "sub" / "keys")
    assert [(k.key_id, k.active) for k in again.list()] == [("k1", False), ("k2", True)]
    assert again.key("k1") == ring.key("k1") and len(again.key("k1")) == 32
    assert again.key("k1") != again.key("k2")
    assert "k1" in repr(ring._keys["k1"]) and ring.key("k1").hex() not in repr(ring._keys)


def test_missing_key_names_the_id_and_no_bytes(tmp_path: Path) -> None:
    ring = KeyRing(tmp_path / "keys")
    ring.create("k1")
    with pytest.raises(MissingKeyError, match="'gone'") as info:
        ring.key("gone")
    assert info.value.key_id == "gone"
    assert ring.key("k1").hex() not in str(info.value)


@pytest.mark.parametrize(
    "content",
    ["not json", '{"format": "x"}', '{"format": "ledger-offloader-key-ring", "version": 1}'],
)
def test_malformed_rings_are_typed_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(KeyRingError):
        KeyRing(path)


def test_readable_ring_and_bad_ids_are_refused(tmp_path: Path) -> None:
    ring = KeyRing(tmp_path / "keys")
    ring.create("k1")
    with pytest.raises(KeyRingError, match="already exists"):
        ring.create("k1")
    for bad in ("", "a/b", "-x", "x" * 65, "sp ace"):
        with pytest.raises(KeyRingError, match="invalid key id"):
            ring.create(bad)
    (tmp_path / "keys").chmod(0o644)
    with pytest.raises(KeyRingError, match="0644"):
        KeyRing(tmp_path / "keys")


def test_env_var_points_at_the_ring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert key_ring_path(tmp_path) == tmp_path / "keys"
    monkeypatch.setenv("OFFLOADER_KEY_RING", str(tmp_path / "elsewhere"))
    assert key_ring_path(tmp_path) == tmp_path / "elsewhere"


def test_keys_cli_never_prints_key_bytes(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert ok(home, "keys", "create", "k1").stdout == "Created key k1 (active)\n"
    ok(home, "keys", "create", "k2", "--activate")
    records = json_lines(ok(home, "--json", "keys", "list"))
    assert [(r["key_id"], r["active"]) for r in records] == [("k1", False), ("k2", True)]
    assert set(records[0]) == {"key_id", "created", "active"}
    material = json.loads((home / "keys").read_text())["keys"][0]["key"]
    text = ok(home, "keys", "list").stdout + ok(home, "--json", "keys", "list").stdout
    assert "k1" in text and material not in text
    assert "already exists" in one_line_error(run(home, "keys", "create", "k1"))


def test_transform_policy_validation() -> None:
    assert TransformPolicy().is_identity
    assert TransformPolicy("zstd").zstd_level == 3
    assert TransformPolicy("zstd", 9).zstd_level == 9
    for bad in (
        {"compression": "lz4"},
        {"encryption": "aes-128"},
        {"level": 3},
        {"compression": "zstd", "level": 99},
        {"key_id": "k1"},
    ):
        with pytest.raises(ConfigError):
            TransformPolicy(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        NamespacePolicies(transform_compression="gzip")


def test_set_offload_transform_cli(tmp_path: Path) -> None:
    home = tmp_path / "h"
    ok(home, "namespaces", "create", "t/ns")
    line = one_line_error(
        run(home, "namespaces", "set-offload-transform", "t/ns", "--encryption", "aes-256-gcm")
    )
    assert "no active key" in line
    ok(home, "keys", "create", "k1")
    assert "'k9'" in one_line_error(
        run(home, "namespaces", "set-offload-transform", "t/ns", "--encryption", "aes-256-gcm",
            "--key-id", "k9")
    )  # fmt: skip
    out = ok(
        home, "namespaces", "set-offload-transform", "t/ns", "--compression", "zstd",
        "--level", "7", "--encryption", "aes-256-gcm", "--key-id", "k1",
    ).stdout  # fmt: skip
    assert out == "offloadTransform: zstd(level 7)+aes-256-gcm(key k1)\n"
    (record,) = json_lines(ok(home, "--json", "namespaces", "get-offload-transform", "t/ns"))
    assert record["transform"] == {
        "compression": "zstd",
        "level": 7,
        "encryption": "aes-256-gcm",
        "key_id": "k1",
    }
    assert run(home, "namespaces", "set-offload-transform", "t/ns", "--level", "99").exit_code == 2
    ok(home, "namespaces", "set-offload-transform", "t/ns")
    out = ok(home, "namespaces", "get-offload-transform", "t/ns").stdout
    assert out == "offloadTransform: none\n"


def test_schema_v3_database_migrates_to_the_transform_columns(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    conn = sqlite3.connect(path)
    for statement in (s for step in MIGRATIONS[:3] for s in step):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("PRAGMA application_id = 1280263750")
    conn.execute("INSERT INTO namespaces (name, created_ms) VALUES ('t/old', 1)")
    conn.commit()
    conn.close()
    store = SqliteMetadataStore(path)
    try:
        record = store.get_namespace("t/old")
        assert record.policies.transform.is_identity
        changed = record.policies.replace(transform_compression="zstd", transform_level=1)
        store.set_policies("t/old", changed)
        assert store.get_namespace("t/old").policies.transform == TransformPolicy("zstd", 1)
    finally:
        store.close()
    assert SCHEMA_VERSION >= 4


def test_two_ring_objects_never_lose_each_others_keys(tmp_path: Path) -> None:
    first, second = KeyRing(tmp_path / "keys"), KeyRing(tmp_path / "keys")
    first.create("a")
    second.create("b", activate=True)  # re-reads the ring under its lock: "a" survives
    again = KeyRing(tmp_path / "keys")
    assert [(k.key_id, k.active) for k in again.list()] == [("a", False), ("b", True)]
    assert again.key("a") == first.key("a")
