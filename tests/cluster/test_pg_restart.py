"""PostgreSQL restarted or down in the middle of an offload (issue 26's reliability tests).

A dedicated throwaway server (the session's one stays up for the other tests) is restarted or
stopped between the upload of a ledger's data object and its index, i.e. after
``begin_offload`` recorded the attempt and before ``complete_offload``. Either the offload
completes (the store reconnects at the next ``BEGIN``) or it fails cleanly: the ledger is not
marked offloaded, its local copy is intact, and the next pass completes it with exactly one
completed attempt and no orphaned object left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devservers.postgres import PgServer, start_postgres
from offloader.api import Offloader
from offloader.errors import MetadataUnavailable
from offloader.store.faulty import FaultyObjectStore
from tests.cluster.conftest import NS, settings

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TOPIC = "persistent://public/default/restart"


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    with start_postgres() as server:
        yield server


class PutHook(FaultyObjectStore):
    """Runs ``hook`` once, before the first ``put`` (the index object of an offload)."""

    def __init__(self, inner: Any, hook: Callable[[], None]) -> None:
        super().__init__(inner)
        self.hook: Callable[[], None] | None = hook

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return super().put(*args, **kwargs)


def _broker(tmp_path: Path, url: str) -> Offloader:
    off = Offloader.from_settings(
        tmp_path / "a", f"file://{tmp_path / 'objects'}", metadata_url=url, broker=settings()
    )
    off.create_namespace(NS)
    off.produce(TOPIC, [f"m{i}".encode() for i in range(12)])  # ledgers of 5, 5 and 2 (open)
    return off


def _check_once(off: Offloader) -> None:
    meta = off.runtime.meta
    closed = [r for r in meta.list_ledgers(TOPIC) if r.state == "CLOSED"]
    assert closed and all(r.offload_complete for r in closed)
    completed = [a.ledger_id for a in meta.list_attempts(states=["COMPLETED"])]
    assert sorted(completed) == sorted(r.ledger_id for r in closed)
    assert [e.payload for e in off.read(TOPIC)] == [f"m{i}".encode() for i in range(12)]
    off.gc(min_age_seconds=0)
    assert off.orphans(min_age_seconds=0).clean


def test_restart_mid_offload_completes(tmp_path: Path, own_server: PgServer) -> None:
    off = _broker(tmp_path, own_server.new_url())
    try:
        off.runtime.store = PutHook(off.runtime.store, lambda: own_server.restart("immediate"))
        trigger = off.offload_prefix(TOPIC, size_threshold=0)
        assert not trigger.failed and len(trigger.offloaded) == 2
        _check_once(off)
    finally:
        off.close()


def test_server_down_at_commit_fails_cleanly_then_completes(
    tmp_path: Path, own_server: PgServer
) -> None:
    off = _broker(tmp_path, own_server.new_url())
    try:
        off.runtime.store = PutHook(off.runtime.store, lambda: own_server.stop("immediate"))
        try:
            with pytest.raises(MetadataUnavailable):
                off.offload_prefix(TOPIC, size_threshold=0)
        finally:
            own_server.start()
        records = off.runtime.meta.list_ledgers(TOPIC)
        assert not any(r.offload_complete for r in records)  # nothing half-recorded
        first = records[0]
        assert first.offload is not None  # the attempt recorded before the upload
        assert off.runtime.meta.get_attempt(first.offload.uuid).state == "STARTED"
        local = off.runtime.ledgers
        assert local.info(off.topic_name(TOPIC), first.ledger_id).entry_count == 5
        # the next pass cleans the interrupted attempt up and offloads everything once
        trigger = off.offload_prefix(TOPIC, size_threshold=0)
        assert not trigger.failed and len(trigger.offloaded) == 2
        _check_once(off)
    finally:
        off.close()
