"""``objects rekey`` rewrites index objects in place: the completion markers follow (new size
and CRC32C), so a home rebuilt after a rekey verifies with checksums and reads its encrypted,
compressed ledgers; a crash between the new marker's PUT and the stale one's deletion leaves
two markers of one attempt, and the rebuild keeps the one that matches the index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from formats.manifest import LEDGER_MARKERS, parse_ledger_marker_key
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.offload.manifests import write_ledger_marker
from tests.transforms.helpers import NS, TOPIC, broker, json_payloads

ENCRYPTED = TransformPolicy("zstd", None, "aes-256-gcm", None)


def markers(off: Offloader) -> list[str]:
    return [i.key for i in off.runtime.store.list(LEDGER_MARKERS)]


def test_rebuild_after_a_rekey(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLOADER_KEY_RING", str(tmp_path / "keys"))
    store = f"file://{tmp_path / 'objects'}"
    off = Offloader.from_settings(tmp_path / "home", store, broker=broker())
    off.create_namespace(NS)
    create_key(off.runtime.home, "k1")
    off.set_offload_transform(NS, ENCRYPTED)
    payloads = json_payloads(600)
    off.produce(TOPIC, payloads)
    off.offload_prefix(TOPIC, position=Position(2, 0))
    before = markers(off)
    assert {parse_ledger_marker_key(k).fields["transform"] for k in before} == {"zstdaes"}
    create_key(off.runtime.home, "k2", activate=True)
    assert [o.action for o in off.rekey("k2")] == ["rekeyed", "rekeyed"]
    after = markers(off)
    assert len(after) == 2 and not set(before) & set(after)
    for key in after:
        m = parse_ledger_marker_key(key).marker
        assert m is not None
        record = off.runtime.meta.get_ledger(m.ledger_id).offload
        assert record is not None
        assert (m.index_size, m.index_crc32c) == (record.index_size, record.index_crc32c)
    # a crash inside the refresh: the stale marker of ledger 0 is back beside the new one
    stale = parse_ledger_marker_key(before[0]).marker
    assert stale is not None
    write_ledger_marker(off.runtime.store, stale, "test")
    expected = [e.payload for e in off.read(TOPIC, count=400)]
    assert expected == payloads[:400]
    off.close()
    shutil.rmtree(tmp_path / "home")

    new = Offloader.from_settings(tmp_path / "new-home", store, broker=broker())
    report = new.metadata_rebuild()
    assert report.count("offload") == 2 and report.count("problem") == 0
    assert report.count("superseded") == 0
    assert all(r.ok for r in new.verify(checksums=True))
    assert [e.payload for e in new.read(TOPIC, count=400)] == expected


def test_rekey_refreshes_a_marker_left_stale_by_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFLOADER_KEY_RING", str(tmp_path / "keys"))
    off = Offloader.from_settings(tmp_path / "home", broker=broker())
    off.create_namespace(NS)
    create_key(off.runtime.home, "k1")
    off.set_offload_transform(NS, ENCRYPTED)
    off.produce(TOPIC, json_payloads(300))
    off.offload_prefix(TOPIC, position=Position(1, 0))
    before = markers(off)
    create_key(off.runtime.home, "k2", activate=True)
    import offloader.offload.rekey as rekey

    monkeypatch.setattr(rekey, "_refresh_marker", lambda *a, **k: None)  # killed before it
    assert [o.action for o in off.rekey("k2")] == ["rekeyed"]
    assert markers(off) == before  # stale now
    monkeypatch.undo()
    monkeypatch.setenv("OFFLOADER_KEY_RING", str(tmp_path / "keys"))
    assert [o.action for o in off.rekey("k2")] == ["unchanged"]
    (key,) = markers(off)
    m = parse_ledger_marker_key(key).marker
    record = off.runtime.meta.get_ledger(0).offload
    assert m is not None and record is not None
    assert (m.index_size, m.index_crc32c) == (record.index_size, record.index_crc32c)
    off.close()
