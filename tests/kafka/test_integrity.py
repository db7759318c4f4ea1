"""Remote Kafka objects are checked against their segment's record (spec/kafka-segments.md §6):
objects tampered with in a moto bucket (a bit flipped outside Kafka's batch CRC, ``.log``
objects swapped between partitions or segments, a shifted ``.index``, a forged plaintext
``.chunks``) are refused with a typed error naming the segment, by ``kafka read``, the
``kafka-segments`` tasks and the export, which does not move its watermark past them."""

from __future__ import annotations

import dataclasses
import sqlite3
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import crc32c
import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import iter_batch_headers
from formats.kafka.names import kafka_uuid_to_uuid
from formats.kafka.spans import ObjectChecksums
from formats.transform import StoredChunk, TransformSection, encode_segment_table
from offloader.api import ExportSpec, KafkaSettings, KafkaTier, Offloader
from offloader.errors import RemoteSegmentMismatch, StoreError
from offloader.kafka.scan import ScanFilter, plan_scan, read_task
from offloader.keyring import KEY_RING_ENV
from offloader.metadata.kafka_base import COPY_FINISHED, RemoteSegmentRecord
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.conftest import TransformedTier
from tests.kafka.logdir import PartitionLayout, write_partition
from tests.kafka.test_fetch import _expected, _rows

SETTINGS = KafkaSettings(part_size=4096, enforce_min_part_size=False, stale_attempt_ms=0)


@dataclasses.dataclass
class Uploaded:
    off: Offloader
    tier: KafkaTier
    root: Path
    layouts: list[PartitionLayout]
    home: Path

    def segment(self, partition: int, n: int) -> RemoteSegmentRecord:
        return self.tier.ctx.meta.list_segments("orders", partition, states=[COPY_FINISHED])[n]

    def local_log(self, partition: int, n: int) -> bytes:
        base = self.layouts[partition].segments[n][0]
        return (self.layouts[partition].path / f"{base:020d}.log").read_bytes()

    def expected(self, partition: int) -> list[tuple[object, ...]]:
        layout = self.layouts[partition]
        return [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]


@pytest.fixture()
def uploaded(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Uploaded]:
    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "logs"
    layouts = [write_partition(root, "orders", p, records=400, codecs=(0, 1)) for p in (0, 1)]
    home = tmp_path / "home"
    url = f"s3://{moto_endpoint.new_bucket()}/tier"
    with Offloader.from_settings(home, url, endpoint_url=moto_endpoint.url) as off:
        tier = off.kafka(SETTINGS)
        assert tier.upload(root).ok
        yield Uploaded(off, tier, root, layouts, home)


def _replace(store: ObjectStore, key: str, data: bytes) -> None:
    metadata = store.get(key).metadata
    store.delete(key)
    store.put(key, data, metadata)


def _patch(store: ObjectStore, key: str, edit: Callable[[bytearray], None]) -> bytes:
    """Edit the object in place; its original bytes."""
    original = store.get(key).data
    data = bytearray(original)
    edit(data)
    _replace(store, key, bytes(data))
    return original


def _scan_rows(tier: KafkaTier, partition: int) -> list[int]:
    tasks = plan_scan(tier.ctx, tier.indexes, ["orders"], ScanFilter(frozenset({partition})))
    return [r.offset for t in tasks for r in read_task(tier.ctx.store, t)]


def test_a_flipped_base_offset_is_refused_and_the_export_does_not_pass_it(
    uploaded: Uploaded, tmp_path: Path
) -> None:
    tier, store = uploaded.tier, uploaded.tier.ctx.store
    first = uploaded.segment(1, 0)
    last_batch = list(iter_batch_headers(uploaded.local_log(1, 0)))[-1]
    # byte 6 of baseOffset: outside the batch's CRC32C, the batch moves 256 offsets up
    original = _patch(store, first.keys["log"], lambda b: b.__setitem__(last_batch.position + 6, 1))
    where = rf"orders-1 at base offset 0 .*{first.keys['log']}: span \d+"
    with pytest.raises(RemoteSegmentMismatch, match=where):
        list(tier.read("orders", 1, from_offset=0))
    with pytest.raises(RemoteSegmentMismatch, match=where):
        list(tier.read("orders", 1, from_offset=last_batch.base_offset, count=3))
    with pytest.raises(RemoteSegmentMismatch, match=where):
        _scan_rows(tier, 1)
    # the other segments still read
    second = uploaded.segment(1, 1)
    got = _rows(tier.read("orders", 1, from_offset=second.base_offset, count=5))
    assert [r[0] for r in got] == list(range(second.base_offset, second.base_offset + 5))
    # the export fails before its watermark passes the bad segment; once the object is
    # repaired, the next run exports every record of both partitions
    spec = ExportSpec(str(tmp_path / "lake"))
    with pytest.raises(RemoteSegmentMismatch):
        uploaded.off.export_run(["orders"], spec, engine="local", kafka=True)
    status = uploaded.off.export_status("kafka:orders:1", spec.target)
    assert status.rows == 0 and status.watermark[1] < first.base_offset
    _replace(store, first.keys["log"], original)
    reports = uploaded.off.export_run(["orders"], spec, engine="local", kafka=True)
    assert sum(r.rows for r in reports) == len(uploaded.expected(0)) + len(uploaded.expected(1))


def _swap(store: ObjectStore, first: str, second: str) -> None:
    """Exchange two objects, each with its own user metadata (as a mix-up in the store would)."""
    a, b = store.get(first), store.get(second)
    for key, got in ((first, b), (second, a)):
        store.delete(key)
        store.put(key, got.data, got.metadata)


def test_swapped_log_objects_are_refused(uploaded: Uploaded) -> None:
    tier, store = uploaded.tier, uploaded.tier.ctx.store
    a, b = uploaded.segment(0, 0), uploaded.segment(1, 0)  # same base offset, two partitions
    _swap(store, a.keys["log"], b.keys["log"])
    with pytest.raises(RemoteSegmentMismatch, match=r"orders-0 at base offset 0 "):
        list(tier.read("orders", 0, from_offset=1, count=1))
    with pytest.raises(RemoteSegmentMismatch, match=r"orders-1 at base offset 0 "):
        _scan_rows(tier, 1)
    _swap(store, a.keys["log"], b.keys["log"])
    # two segments of one partition
    c, d = uploaded.segment(0, 1), uploaded.segment(0, 2)
    _swap(store, c.keys["log"], d.keys["log"])
    with pytest.raises(RemoteSegmentMismatch, match=rf"orders-0 at base offset {c.base_offset} "):
        list(tier.read("orders", 0, from_offset=c.base_offset, count=1))
    # rows without checks: the objects' user metadata still binds them to their segment
    _unpin(tier, uploaded.home)
    with pytest.raises(RemoteSegmentMismatch, match="kafka-segment-id is"):
        list(tier.read("orders", 0, from_offset=c.base_offset, count=1))
    _swap(store, c.keys["log"], d.keys["log"])
    _swap(store, a.keys["log"], b.keys["log"])
    with pytest.raises(RemoteSegmentMismatch, match="kafka-segment-id is"):
        _scan_rows(tier, 0)
    _swap(store, a.keys["log"], b.keys["log"])
    assert _rows(tier.read("orders", 0, from_offset=0)) == uploaded.expected(0)


def _shift_index(data: bytearray) -> None:
    """Every entry takes the next entry's position: still increasing, still well-formed."""
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]
    shifted = [(entries[i][0], entries[i + 1][1]) for i in range(len(entries) - 1)]
    data[:] = b"".join(struct.pack(">ii", *e) for e in shifted)


def _unpin(tier: KafkaTier, home: Path) -> None:
    """Make every segment a row from before checks were recorded."""
    conn = sqlite3.connect(home / "metadata.db")
    conn.execute("UPDATE kafka_remote_segments SET checks = NULL")
    conn.commit()
    conn.close()
    tier.indexes = type(tier.indexes)(tier.ctx.store)


def test_a_shifted_index_is_refused_and_an_unpinned_one_skips_nothing(uploaded: Uploaded) -> None:
    tier, store = uploaded.tier, uploaded.tier.ctx.store
    seg = uploaded.segment(0, 1)
    _patch(store, seg.keys["index"], _shift_index)
    wanted = seg.base_offset + 25
    with pytest.raises(RemoteSegmentMismatch, match=r"\.index: "):
        list(tier.read("orders", 0, from_offset=wanted, count=3))
    with pytest.raises(RemoteSegmentMismatch, match=r"\.index: "):
        plan_scan(
            tier.ctx,
            tier.indexes,
            ["orders"],
            ScanFilter(frozenset({0}), offset_range=(wanted, wanted)),
        )
    # a row without checks: the batch at the wrong position starts after the wanted offset,
    # so the segment is read from its start instead (nothing skipped)
    _unpin(tier, uploaded.home)
    got = _rows(tier.read("orders", 0, from_offset=wanted, count=3))
    assert [r[0] for r in got] == [wanted, wanted + 1, wanted + 2]
    tasks = plan_scan(
        tier.ctx,
        tier.indexes,
        ["orders"],
        ScanFilter(frozenset({0}), offset_range=(wanted, wanted)),
    )
    assert [r.offset for t in tasks for r in read_task(store, t)] == [wanted]


def test_unpinned_rows_still_read_and_batches_outside_the_segment_are_refused(
    uploaded: Uploaded,
) -> None:
    tier, store = uploaded.tier, uploaded.tier.ctx.store
    _unpin(tier, uploaded.home)
    assert _rows(tier.read("orders", 0, from_offset=0)) == uploaded.expected(0)
    first = uploaded.segment(1, 0)
    assert first.checks is None
    last_batch = list(iter_batch_headers(uploaded.local_log(1, 0)))[-1]
    _patch(store, first.keys["log"], lambda b: b.__setitem__(last_batch.position + 6, 1))
    outside = rf"orders-1 at base offset 0 .*batch of offsets {last_batch.base_offset + 256}\."
    with pytest.raises(RemoteSegmentMismatch, match=outside):
        list(tier.read("orders", 1, from_offset=0))
    with pytest.raises(RemoteSegmentMismatch, match=outside):
        _scan_rows(tier, 1)


def _forge_plain(t: TransformedTier, record: RemoteSegmentRecord, local: bytes) -> bytes:
    """Plaintext ``.log`` and a valid "no transform" ``.chunks`` for the segment (no key
    needed); the forged table's bytes."""
    store = t.tier.ctx.store
    forged = bytearray(local)
    at = forged.index(b":payload")
    forged[at : at + 8] = b":FORGED!"
    for h in iter_batch_headers(bytes(forged), verify_crc=False):
        if h.position <= at < h.end:
            struct.pack_into(
                ">I", forged, h.position + 17, crc32c.crc32c(forged[h.position + 21 : h.end])
            )
    size = 1024
    chunks = tuple(
        StoredChunk(0, len(forged[o : o + size]), crc32c.crc32c(forged[o : o + size]))
        for o in range(0, len(forged), size)
    )
    section = TransformSection(chunk_size=size, block_lengths=(len(forged),), chunks=chunks)
    table = encode_segment_table(
        str(kafka_uuid_to_uuid(record.segment_id)), record.base_offset, section
    )
    _replace(store, record.keys["log"], bytes(forged))
    _replace(store, record.keys["chunks"], table)
    return table


def test_forged_plaintext_of_an_encrypted_segment_is_refused_without_a_key(
    transformed_moto_tier: TransformedTier, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = transformed_moto_tier
    meta = t.tier.ctx.meta
    record = meta.list_segments("secret", 0, states=[COPY_FINISHED])[0]
    assert record.checks is not None and record.checks.transform == "zstd+aes-256-gcm"
    local = (tmp_path / "logs" / "secret-0" / f"{record.base_offset:020d}.log").read_bytes()
    table = _forge_plain(t, record, local)
    monkeypatch.setenv(KEY_RING_ENV, str(tmp_path / "no-ring"))  # no key at all
    t.tier.indexes = type(t.tier.indexes)(t.tier.ctx.store)
    with pytest.raises(RemoteSegmentMismatch, match=r"secret-0 at base offset 0 .*\.chunks: "):
        list(t.tier.read("secret", 0, from_offset=5, count=1))
    # even with the forged table's checksum pinned, the transform pinned beside it refuses it
    checks = record.checks
    meta.set_segment_checks(
        record.segment_id,
        dataclasses.replace(
            checks, objects={**checks.objects, "chunks": ObjectChecksums.of(table)}
        ),
        1,
    )
    t.tier.indexes = type(t.tier.indexes)(t.tier.ctx.store)
    with pytest.raises(RemoteSegmentMismatch, match="stored as 'none', the record pins 'zstd"):
        list(t.tier.read("secret", 0, from_offset=5, count=1))


def test_rekey_moves_the_pinned_chunks_checksum_even_when_interrupted(
    transformed_moto_tier: TransformedTier,
) -> None:
    t = transformed_moto_tier
    meta = t.tier.ctx.meta
    before = {r.segment_id: r for r in meta.list_segments("secret", 0, states=[COPY_FINISHED])}
    expected = _rows(t.tier.read("secret", 0, from_offset=0))
    t.ring.create("k2")
    # the first .chunks PUT lands, then fails: the record accepts both tables meanwhile
    faulty = FaultyObjectStore(t.tier.ctx.store)
    faulty.plan.fail("put", StoreError("injected"), on_call=1, after=True)
    real = t.tier.ctx.store
    t.tier.ctx.store = faulty
    with pytest.raises(StoreError):
        t.tier.rekey("k2")
    t.tier.ctx.store = real
    halfway = [r for r in meta.list_segments("secret", 0) if r.checks and r.checks.next_chunks]
    assert len(halfway) == 1
    t.tier.indexes = type(t.tier.indexes)(real, key_ring=str(t.ring.path))
    assert _rows(t.tier.read("secret", 0, from_offset=0)) == expected
    # the re-run finishes every segment: each pins its new table alone
    t.tier.rekey("k2")
    for r in meta.list_segments("secret", 0, states=[COPY_FINISHED]):
        assert r.checks is not None and r.checks.next_chunks is None
        assert r.checks.objects["chunks"] != before[r.segment_id].checks.objects["chunks"]  # type: ignore[union-attr]
        assert r.checks.objects["chunks"] == ObjectChecksums.of(real.get(r.keys["chunks"]).data)
    t.tier.indexes = type(t.tier.indexes)(real, key_ring=str(t.ring.path))
    assert _rows(t.tier.read("secret", 0, from_offset=0)) == expected
