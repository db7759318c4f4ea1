"""Key rotation: a new active key for new objects, `objects rekey` rewrites only index
objects, survives an interruption between the index PUT and the metadata record, and re-runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from formats.index import decode_index
from formats.keys import data_key, index_key
from formats.transform import transform_of
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.errors import ChecksumMismatchError, MetadataError, MissingKeyError
from tests.cli.helpers import json_lines, ok
from tests.transforms.helpers import NS, TOPIC, broker, json_payloads

ENCRYPTED = TransformPolicy("zstd", None, "aes-256-gcm", None)


@pytest.fixture()
def off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Offloader]:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    o = Offloader.from_settings(tmp_path / "home", broker=broker())
    o.create_namespace(NS)
    create_key(o.runtime.home, "k1")
    o.set_offload_transform(NS, ENCRYPTED)
    yield o
    o.close()


def _key_ids(off: Offloader) -> dict[int, str]:
    out = {}
    for record in off.runtime.meta.list_ledgers(TOPIC):
        if record.offload is not None and record.offload.complete:
            index = decode_index(off.runtime.store.get(record.offload.index_key).data)
            section = transform_of(index.extension)
            assert section is not None
            out[record.ledger_id] = section.key_id
    return out


def test_rotation_then_rekey_rewrites_only_indexes(off: Offloader) -> None:
    payloads = json_payloads(900)
    off.produce(TOPIC, payloads[:300])
    off.offload_prefix(TOPIC, position=Position(1, 0))
    create_key(off.runtime.home, "k2", activate=True)  # new objects use k2 at once
    off.produce(TOPIC, payloads[300:600])
    off.offload_prefix(TOPIC, position=Position(2, 0))
    assert _key_ids(off) == {0: "k1", 1: "k2"}
    store = off.runtime.store
    record0 = off.runtime.meta.get_ledger(0)
    assert record0.offload is not None
    data_before = store.get(data_key(record0.offload.uuid, 0))
    with pytest.raises(MissingKeyError, match="'k9'"):
        off.rekey("k9")
    dry = off.rekey("k2", dry_run=True)
    assert [(o.ledger_id, o.action) for o in dry] == [(0, "rekeyed"), (1, "unchanged")]
    assert _key_ids(off) == {0: "k1", 1: "k2"}
    outcomes = off.rekey("k2")
    assert [(o.ledger_id, o.from_key, o.action) for o in outcomes] == [
        (0, "k1", "rekeyed"),
        (1, "k2", "unchanged"),
    ]
    assert _key_ids(off) == {0: "k2", 1: "k2"}
    assert store.get(data_key(record0.offload.uuid, 0)).data == data_before.data
    assert [e.payload for e in off.read(TOPIC, count=600)] == payloads[:600]
    assert all(r.ok for r in off.verify(checksums=True))
    assert [o.action for o in off.rekey("k2")] == ["unchanged", "unchanged"]


def test_rekey_interrupted_before_the_record_is_finished_by_a_rerun(
    off: Offloader, monkeypatch: pytest.MonkeyPatch
) -> None:
    off.produce(TOPIC, json_payloads(600))
    off.offload_prefix(TOPIC, position=Position(2, 0))
    create_key(off.runtime.home, "k2")
    meta = off.runtime.meta
    real = meta.record_index_rewrite

    def crash(uuid: str, size: int, crc: int) -> None:
        raise MetadataError("simulated crash after the index PUT")

    monkeypatch.setattr(meta, "record_index_rewrite", crash)
    with pytest.raises(MetadataError):
        off.rekey("k2")
    monkeypatch.setattr(meta, "record_index_rewrite", real)
    assert _key_ids(off) == {0: "k2", 1: "k1"}  # the first index was rewritten
    assert not all(r.ok for r in off.verify(checksums=True))  # its record is stale
    with pytest.raises(ChecksumMismatchError, match="not the index this ledger was offloaded"):
        list(off.read(TOPIC, count=300))  # refused loudly until the re-run, never misread
    outcomes = off.rekey("k2")
    assert [o.action for o in outcomes] == ["recorded", "rekeyed"]
    assert all(r.ok for r in off.verify(checksums=True))
    assert len(list(off.read(TOPIC, count=600))) == 600


def test_rekey_cli(off: Offloader) -> None:
    off.produce(TOPIC, json_payloads(300))
    off.offload_prefix(TOPIC, position=Position(1, 0))
    home = off.runtime.home
    ok(home, "keys", "create", "k2", "--activate")
    out = ok(home, "objects", "rekey", "--to-key", "k2").stdout
    assert "1 of 1 offloaded ledger(s) rekeyed to key k2" in out
    (record,) = json_lines(ok(home, "--json", "objects", "rekey", "--to-key", "k2"))
    assert record["action"] == "unchanged" and record["from_key"] == "k2"
    assert "key" not in {k for k in record if k not in ("from_key", "to_key")}
    assert index_key(record["uuid"], 0) in {i.key for i in off.runtime.store.list()}
