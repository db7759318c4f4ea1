"""The bucket manifests on every store (spec/bucket-manifests.md): markers are listed in
ledger order under their managed ledger's prefix and deleted by attempt; the watermark only
ever rises, also with writers racing, and needs only ``If-None-Match``."""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

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


def _kafka_record(base: int, segment_id: str) -> Any:
    from formats.kafka.names import KafkaKeyScheme, scheme_key
    from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord

    topic_id = "kSiFaHbWQ1SMNlNdZmwsMQ"
    keys = {
        k: scheme_key(KafkaKeyScheme(), "orders", topic_id, 2, base, segment_id, k)
        for k in ("log", "index", "timeindex")
    }
    return RemoteSegmentRecord(
        segment_id, "orders", topic_id, 2, base, base + 9, 1, 100, {0: base}, keys,
        COPY_FINISHED, 1, 2,
    )  # fmt: skip


def test_kafka_markers_list_in_offset_order_and_the_watermark_only_rises(
    store: ObjectStore,
) -> None:
    """spec/kafka-manifests.md on every store: a partition's markers list in offset order and
    parse back; deleting one copy's marker leaves the others; the partition's watermark object
    rises with each finished copy, never falls, and keeps its lower keys."""
    from formats.kafka.manifest import (
        KAFKA_KIND,
        KAFKA_MARKERS,
        parse_segment_marker_key,
        watermark_name,
    )
    from formats.kafka.names import kafka_uuid_to_uuid, uuid_to_kafka
    from offloader.kafka.context import KafkaContext
    from offloader.kafka.manifests import (
        delete_segment_markers,
        raise_partition_watermark,
        write_segment_marker,
    )
    from offloader.kafka.settings import KafkaSettings

    records = {base: _kafka_record(base, uuid_to_kafka(uuid.uuid4())) for base in (30, 0, 110, 20)}
    for base, record in records.items():
        write_segment_marker(store, record, log_crc32c=base, transform="none", finished_ms=5)
    write_segment_marker(store, records[20], log_crc32c=20, transform="none", finished_ms=5)
    listed = [parse_segment_marker_key(i.key) for i in store.list(KAFKA_MARKERS)]
    assert [p.base_offset for p in listed] == [0, 20, 30, 110]
    assert all(p.marker is not None and p.marker.log_crc32c == p.base_offset for p in listed)
    delete_segment_markers(store, records[20])
    assert [parse_segment_marker_key(i.key).base_offset for i in store.list(KAFKA_MARKERS)] == [
        0,
        30,
        110,
    ]
    ctx = KafkaContext(store, None, KafkaSettings(), lambda: 7)  # type: ignore[arg-type]
    name = watermark_name("orders", records[0].topic_id, 2)
    for base in (0, 30, 20, 110, 30):
        raise_partition_watermark(ctx, records[base])
    assert read_watermark(store, KAFKA_KIND, name) == (
        119,
        str(kafka_uuid_to_uuid(records[110].segment_id)),
    )
    positions = [int(i.key.rsplit("/", 1)[1][:20]) for i in store.list("_offloader/v1/watermarks/")]
    # a late, lower copy's key sits beside the higher ones (no LIST first): never lowers it
    assert positions == [9, 29, 39, 119]
