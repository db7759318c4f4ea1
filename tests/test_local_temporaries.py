"""Crash leftovers of the local store (``.tmp-*``) are found by the orphan audit and gc."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from offloader.api import Offloader
from offloader.errors import InvalidStoreKey
from offloader.store.local import LocalObjectStore


def _leave_leftovers(root: Path) -> list[str]:
    (root / "a").mkdir(parents=True, exist_ok=True)
    (root / "a" / ".tmp-deadbeef").write_bytes(b"x" * 10)
    upload = root / ".uploads" / ".tmp-complete-0123"
    upload.mkdir(parents=True)
    (upload / "part-1").write_bytes(b"y" * 7)
    return [".uploads/.tmp-complete-0123", "a/.tmp-deadbeef"]


def test_list_and_remove_temporaries(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("a/real", b"data", {})
    expected = _leave_leftovers(tmp_path)
    found = store.list_temporaries()
    assert [t.key for t in found] == expected
    assert {t.key: t.size for t in found} == {expected[0]: 7, expected[1]: 10}
    assert [o.key for o in store.list()] == ["a/real"]  # invisible to the listing
    for key in expected:
        store.remove_temporary(key)
    assert store.list_temporaries() == []
    assert store.get("a/real").data == b"data"


@pytest.mark.parametrize("key", ["a/real", "../.tmp-x", "a/../../.tmp-x", "/etc/.tmp-x", ""])
def test_remove_temporary_refuses_anything_else(tmp_path: Path, key: str) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("a/real", b"data", {})
    with pytest.raises(InvalidStoreKey):
        store.remove_temporary(key)
    assert store.get("a/real").data == b"data"


def test_orphans_report_and_gc_reclaims_old_leftovers(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    with Offloader.from_settings(tmp_path / "home", f"file://{objects}") as off:
        objects.mkdir(parents=True, exist_ok=True)
        expected = _leave_leftovers(objects)
        young = off.orphans(min_age_seconds=3600)
        assert young.clean  # a write that may still be running is never touched
        old = time.time() - 7200
        for key in expected:
            os.utime(objects / key, (old, old))
        report = off.orphans(min_age_seconds=3600)
        assert sorted((o.key, o.reason) for o in report.objects) == [
            (k, "stale-temporary") for k in expected
        ]
        assert off.gc(dry_run=True, min_age_seconds=3600).objects
        assert LocalObjectStore(objects).list_temporaries()  # dry run kept them
        off.gc(min_age_seconds=3600)
        assert LocalObjectStore(objects).list_temporaries() == []
        assert off.orphans(min_age_seconds=0).clean
