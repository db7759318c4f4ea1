"""FaultyObjectStore: call counting and fault injection around a real (local) store."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import crc32c
import pytest

from offloader.errors import ObjectNotFound, StoreError, StoreUnavailable
from offloader.store.base import ObjectStore
from offloader.store.faulty import Fault, FaultPlan, FaultyObjectStore
from offloader.store.local import LocalObjectStore


@pytest.fixture()
def inner(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects")


def test_plain_counter(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner)
    assert isinstance(store, ObjectStore)
    assert store.url == inner.url and store.supports_conditional_put
    store.put("k", b"0123456789", {"a": "b"})
    assert store.get_range("k", 0, 4).data == b"0123"
    assert store.get_range("k", 4, 8).data == b"4567"
    assert store.head("k").size == 10
    assert [i.key for i in store.list()] == ["k"]
    with pytest.raises(ObjectNotFound):
        store.get("missing")
    assert store.calls == {"put": 1, "get_range": 2, "head": 1, "list": 1, "get": 1}
    assert [(c.method, c.number, c.key) for c in store.history] == [
        ("put", 1, "k"),
        ("get_range", 1, "k"),
        ("get_range", 2, "k"),
        ("head", 1, "k"),
        ("list", 1, ""),
        ("get", 1, "missing"),
    ]
    assert store.faults_fired == 0
    store.reset_counts()
    assert store.calls["get_range"] == 0 and store.history == []


def test_fail_kth_call(inner: LocalObjectStore) -> None:
    plan = FaultPlan().fail("get_range", StoreUnavailable("injected timeout"), on_call=2)
    store = FaultyObjectStore(inner, plan)
    store.put("k", b"abcdef", {})
    assert store.get_range("k", 0, 2).data == b"ab"
    with pytest.raises(StoreUnavailable, match="injected timeout"):
        store.get_range("k", 2, 4)
    assert store.get_range("k", 2, 4).data == b"cd"  # only the 2nd call fails
    assert store.calls["get_range"] == 3
    assert [c.faulted for c in store.history if c.method == "get_range"] == [False, True, False]
    assert store.faults_fired == 1


def test_fail_every_call_with_fresh_exceptions(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, [Fault("head", lambda: StoreUnavailable("down"))])
    inner.put("k", b"x", {})
    errors = []
    for _ in range(3):
        with pytest.raises(StoreUnavailable) as info:
            store.head("k")
        errors.append(info.value)
    assert len({id(e) for e in errors}) == 3
    assert store.get("k").data == b"x"  # other methods untouched


def test_several_call_numbers_and_times(inner: LocalObjectStore) -> None:
    plan = (
        FaultPlan()
        .fail("put", StoreError("no space"), on_call=[1, 3])
        .fail("delete", StoreError("flaky"), times=2)
    )
    store = FaultyObjectStore(inner, plan)
    outcomes = []
    for i in range(4):
        try:
            store.put(f"k{i}", b"x", {})
            outcomes.append("ok")
        except StoreError:
            outcomes.append("fail")
    assert outcomes == ["fail", "ok", "fail", "ok"]
    assert [i.key for i in inner.list()] == ["k1", "k3"]
    for _ in range(2):
        with pytest.raises(StoreError, match="flaky"):
            store.delete("k1")
    store.delete("k1")
    assert [i.key for i in inner.list()] == ["k3"]


def test_match_on_arguments(inner: LocalObjectStore) -> None:
    plan = FaultPlan().fail(
        "upload_part", StoreUnavailable("part 2 lost"), match=lambda a: a["part_number"] == 2
    )
    store = FaultyObjectStore(inner, plan)
    upload_id = store.create_multipart_upload("k", {})
    store.upload_part("k", upload_id, 1, b"one", crc32c.crc32c(b"one"))
    with pytest.raises(StoreUnavailable):
        store.upload_part("k", upload_id, 2, b"two", crc32c.crc32c(b"two"))
    store.upload_part("k", upload_id, 3, b"three", crc32c.crc32c(b"three"))
    assert store.calls["upload_part"] == 3


def test_fail_after_the_call_succeeded(inner: LocalObjectStore) -> None:
    """The request reached the store, but its answer was lost."""
    plan = FaultPlan().fail("put", StoreUnavailable("response lost"), after=True)
    store = FaultyObjectStore(inner, plan)
    with pytest.raises(StoreUnavailable):
        store.put("k", b"arrived", {})
    assert inner.get("k").data == b"arrived"


def test_delay(inner: LocalObjectStore) -> None:
    plan = (
        FaultPlan()
        .slow("get", 0.2, on_call=1)
        .fail("head", StoreUnavailable("timed out"), delay=0.1)
    )
    store = FaultyObjectStore(inner, plan)
    inner.put("k", b"x", {})
    started = time.monotonic()
    assert store.get("k").data == b"x"
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        store.head("k")
    assert time.monotonic() - started >= 0.1
    started = time.monotonic()
    store.get("k")
    assert time.monotonic() - started < 0.2


def test_list_is_counted_and_faulted_when_called(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, FaultPlan().fail("list", StoreUnavailable("x"), on_call=1))
    with pytest.raises(StoreUnavailable):
        store.list()  # raised on the call, before any iteration
    assert list(store.list()) == []
    assert store.calls["list"] == 2


def test_bad_plans() -> None:
    with pytest.raises(ValueError, match="unknown"):
        FaultPlan().fail("get_object", StoreError("x"))
    with pytest.raises(ValueError, match="error or a delay"):
        Fault("get")


def test_counts_are_thread_safe(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, FaultPlan().fail("head", ObjectNotFound("x"), on_call=50))
    inner.put("k", b"x", {})
    failures = []

    def worker() -> None:
        for _ in range(25):
            try:
                store.head("k")
            except ObjectNotFound:
                failures.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.calls["head"] == 100
    assert failures == [1]
    assert sorted(c.number for c in store.history) == list(range(1, 101))
