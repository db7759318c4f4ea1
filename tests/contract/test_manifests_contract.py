"""The bucket manifests on every store (spec/bucket-manifests.md): markers are listed in
ledger order under their managed ledger's prefix and deleted by attempt; the watermark only
ever rises, also with writers racing, and needs only ``If-None-Match``."""

from __future__ import annotations

import random
import threading
import uuid

from formats.manifest import LEDGERS_KIND, LedgerMarker, parse_ledger_marker_key
from offloader.offload.manifests import (
    advance_watermark,
    delete_ledger_markers,
    delete_watermarks,
    read_watermark,
    write_ledger_marker,
)
from offloader.store.base import ObjectStore

ML = "public/default/persistent/t é"


def marker(ledger_id: int, attempt: str) -> LedgerMarker:
    return LedgerMarker(ML, ledger_id, attempt, 5, 500, 688, 142, 0xDEADBEEF, "zstd", 1, 2, 3)


def test_markers_list_in_ledger_order_and_delete_by_attempt(store: ObjectStore) -> None:
    attempts = {lid: str(uuid.uuid4()) for lid in (12, 3, 100, 7)}
    for lid, attempt in attempts.items():
        write_ledger_marker(store, marker(lid, attempt), "test")
    write_ledger_marker(store, marker(7, attempts[7]), "test")  # a repeated PUT is no error
    listed = [parse_ledger_marker_key(i.key) for i in store.list("_offloader/v1/ledgers/")]
    assert [p.ledger_id for p in listed] == [3, 7, 12, 100]
    assert all(p.marker == marker(p.ledger_id, attempts[p.ledger_id]) for p in listed)
    delete_ledger_markers(store, ML, 7, attempts[7])
    left = [parse_ledger_marker_key(i.key).ledger_id for i in store.list("_offloader/")]
    assert left == [3, 12, 100]


def test_the_watermark_never_moves_backwards(store: ObjectStore) -> None:
    assert read_watermark(store, LEDGERS_KIND, ML) is None
    assert advance_watermark(store, LEDGERS_KIND, ML, 5, "a", 1, "test")
    assert not advance_watermark(store, LEDGERS_KIND, ML, 3, "b", 2, "test")
    assert not advance_watermark(store, LEDGERS_KIND, ML, 5, "c", 3, "test")
    assert read_watermark(store, LEDGERS_KIND, ML) == (5, "a")
    assert advance_watermark(store, LEDGERS_KIND, ML, 9, "d", 4, "test")
    # lower positions stay (a listing is no snapshot: deleting them could let a reader miss
    # both the new key and the old one); the highest is the watermark
    assert [i.key.rsplit("/", 1)[1] for i in store.list("_offloader/v1/watermarks/")] == [
        f"{5:020d}.a",
        f"{9:020d}.d",
    ]
    delete_watermarks(store, LEDGERS_KIND, ML)
    assert read_watermark(store, LEDGERS_KIND, ML) is None


def test_racing_writers_never_lower_the_watermark(store: ObjectStore) -> None:
    errors: list[str] = []

    def positions(seed: int) -> list[int]:
        rng = random.Random(seed)
        return [rng.randrange(1000) for _ in range(25)]

    def writer(seed: int) -> None:
        for position in positions(seed):
            advance_watermark(store, LEDGERS_KIND, ML, position, f"w{seed}", 0, "test")
            seen = read_watermark(store, LEDGERS_KIND, ML)
            if seen is None or seen[0] < position:
                errors.append(f"wrote {position}, then read {seen}")

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    final = read_watermark(store, LEDGERS_KIND, ML)
    expected = max(max(positions(seed)) for seed in range(3))
    assert final is not None and final[0] == expected
