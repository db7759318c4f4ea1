"""The batch fetch (offloader/kafka/batches.py): the batches covering the wanted offsets as
stored, one ranged GET of the bytes they need (counted through the metered store), Kafka's
byte-limit semantics, plain and transformed segments, and corrupt bytes refused, on the file
store and on moto."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.batch import BatchHeader, iter_batch_headers
from formats.kafka.columns import batch_columns
from offloader.api import KafkaSettings, KafkaTier, TransformPolicy
from offloader.errors import ConfigError, ObjectNotFound, RemoteSegmentMismatch
from offloader.kafka import batches
from offloader.kafka.batches import FetchedBatches, fetch_batches, segment_batches
from offloader.kafka.segments import IndexCache
from offloader.keyring import KEY_RING_ENV, KeyRing
from offloader.metadata.kafka_base import RemoteSegmentRecord
from offloader.metrics.base import NullMetrics
from offloader.store import MeteredObjectStore
from offloader.store.base import GetResult, ObjectStore
from offloader.store.faulty import FaultyObjectStore
from tests.kafka.logdir import write_partition

#: parts (and spans) of 64 KiB: the partial-span edges of a read are real
SETTINGS = KafkaSettings(part_size=64 * 1024, enforce_min_part_size=False, stale_attempt_ms=0)


class CountingMetrics(NullMetrics):
    """The object-store requests the metered store records, by operation."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()

    def record_store_request(
        self, backend: str, operation: str, outcome: str, seconds: float
    ) -> None:
        self.requests[operation] += 1


class ByteCounting(FaultyObjectStore):
    """Counts the bytes ranged GETs return."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.bytes_read = 0

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        got = super().get_range(key, start, end)
        self.bytes_read += len(got.data)
        return got


@dataclass
class Setup:
    tier: KafkaTier
    root: Path
    metrics: CountingMetrics
    counting: ByteCounting

    def record(self, topic: str, index: int = 0) -> RemoteSegmentRecord:
        found = sorted(self.tier.ctx.meta.list_segments(topic, 0), key=lambda r: r.base_offset)
        return found[index]

    def local_log(self, topic: str, record: RemoteSegmentRecord) -> bytes:
        return (self.root / f"{topic}-0" / f"{record.base_offset:020d}.log").read_bytes()

    def fetch(self, record: RemoteSegmentRecord, offset: int, **limits: int) -> FetchedBatches:
        self.metrics.requests.clear()
        self.counting.bytes_read = 0
        return segment_batches(self.store, self.tier.indexes, record, offset, **limits)

    @property
    def store(self) -> ObjectStore:
        return MeteredObjectStore(self.counting, self.metrics)


def _setup(tier: KafkaTier, root: Path) -> Setup:
    # big batches (every one but the first indexed); small ones (unindexed ones between
    # entries, compressed ones, transactions and their control batches)
    write_partition(root, "big", 0, records=4500, per_batch=40, pad=300, codecs=(0,),
                    segment_bytes=600 * 1024)  # fmt: skip
    write_partition(root, "small", 0, records=3000, per_batch=3, codecs=(0, 2),
                    segment_bytes=100 * 1024, transactions=True)  # fmt: skip
    assert tier.upload(root).ok
    metrics = CountingMetrics()
    counting = ByteCounting(tier.ctx.store)
    tier.indexes = IndexCache(MeteredObjectStore(counting, metrics))
    return Setup(tier, root, metrics, counting)


@pytest.fixture(params=["file", "moto"])
def setup(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> Setup:
    if request.param == "file":
        return _setup(make_tier(settings=SETTINGS), tmp_path / "logs")
    endpoint: S3Endpoint = request.getfixturevalue("moto_endpoint")
    for name, value in endpoint.env().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{endpoint.new_bucket()}/tier"
    return _setup(make_tier(url, settings=SETTINGS, endpoint_url=endpoint.url), tmp_path / "logs")


def _check_fetched(
    setup: Setup, topic: str, record: RemoteSegmentRecord, offset: int, got: FetchedBatches,
    count: int | None = None,
) -> list[BatchHeader]:  # fmt: skip
    """The batches are the local .log's bytes at their position, back to back, the first one
    holding ``offset`` and the last one ``offset + count - 1`` (or the segment's last)."""
    local = setup.local_log(topic, record)
    assert got.data == local[got.position : got.position + got.size]
    stored = list(iter_batch_headers(got.data))
    assert [h.base_offset for h in stored] == list(got.base_offsets)
    assert list(got.positions) == [h.position for h in stored]
    assert stored[0].base_offset <= offset <= stored[0].last_offset
    if count is not None:
        wanted = min(offset + count - 1, record.end_offset)
        assert stored[-1].last_offset >= wanted
        assert len(stored) == 1 or stored[-2].last_offset < wanted  # not a batch too many
    return stored


def test_the_batches_of_every_kind_of_offset_in_one_get(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "SPAN_SLACK", 0)  # widen to whole spans only within a tenth
    rng = random.Random(3)
    for topic in ("big", "small"):
        record = setup.record(topic, 0)
        setup.tier.indexes.offset_index(record)  # cached: the fetches below are data GETs only
        headers = list(iter_batch_headers(setup.local_log(topic, record)))
        last = headers[-1]
        picks = [headers[0].base_offset, last.base_offset, last.last_offset]
        for h in rng.sample(headers, 12):
            picks += [h.base_offset, (h.base_offset + h.last_offset) // 2, h.last_offset]
        for offset in picks:
            for count in (1, 7, 200):
                got = setup.fetch(record, offset, max_records=count)
                _check_fetched(setup, topic, record, offset, got, count)
                assert setup.metrics.requests == Counter({"get_range": 1}), (topic, offset)
                assert got.reads == 1
                # never the batch before when the index points at the right one (big batches:
                # every batch has its entry): the batches, and spans within a tenth of them
                # (the segment's first batch has no entry: a read ending in it ends at the
                # entry after the next batch)
                if topic == "big":
                    extra = (
                        headers[1].size
                        if got.headers[-1].last_offset == headers[0].last_offset
                        else 0
                    )
                    assert setup.counting.bytes_read <= got.size * 1.1 + extra, (offset, count)


def test_small_batches_read_at_most_the_slack_before(setup: Setup) -> None:
    record = setup.record("small", 0)
    setup.tier.indexes.offset_index(record)
    headers = list(iter_batch_headers(setup.local_log("small", record)))
    for h in headers[5::17]:
        got = setup.fetch(record, h.last_offset, max_records=30)
        _check_fetched(setup, "small", record, h.last_offset, got, 30)
        assert setup.counting.bytes_read <= got.size + batches.SKIP_SLACK + 128 * 1024


def test_a_byte_limit_returns_whole_batches_and_at_least_one(setup: Setup) -> None:
    record = setup.record("big", 0)
    headers = list(iter_batch_headers(setup.local_log("big", record)))
    h = headers[3]
    one = setup.fetch(record, h.base_offset + 1, max_bytes=10)  # smaller than any batch
    assert len(one.headers) == 1 and one.headers[0].base_offset == h.base_offset
    assert one.size == h.size
    limit = h.size + headers[4].size + headers[5].size // 2
    got = setup.fetch(record, h.base_offset, max_bytes=limit)
    _check_fetched(setup, "big", record, h.base_offset, got)
    assert [x.base_offset for x in got.headers] == [headers[3].base_offset, headers[4].base_offset]
    assert setup.metrics.requests["get_range"] == 1
    # both limits: the first reached wins
    got = setup.fetch(record, h.base_offset, max_bytes=10**9, max_records=1)
    assert len(got.headers) == 1


def test_fetch_batches_crosses_to_the_segment_holding_the_offset(setup: Setup) -> None:
    first, second = setup.record("big", 0), setup.record("big", 1)
    got = fetch_batches(
        setup.tier.ctx, setup.tier.indexes, "big", 0, first.end_offset + 1, max_records=5
    )
    assert got.segment_id == second.segment_id and got.base_offsets[0] == second.base_offset
    got = fetch_batches(setup.tier.ctx, setup.tier.indexes, "big", 0, first.end_offset)
    assert got.segment_id == first.segment_id and got.headers[-1].last_offset == first.end_offset
    last = setup.tier.ctx.meta.list_segments("big", 0)[-1]
    with pytest.raises(ObjectNotFound, match="holds offset"):
        fetch_batches(setup.tier.ctx, setup.tier.indexes, "big", 0, last.end_offset + 10**6)
    with pytest.raises(ConfigError):
        fetch_batches(setup.tier.ctx, setup.tier.indexes, "big", 0, -1)
    with pytest.raises(ConfigError, match="outside the segment"):
        segment_batches(setup.store, setup.tier.indexes, first, first.end_offset + 1)


def test_columns_of_the_fetched_batches_are_the_records(setup: Setup) -> None:
    record = setup.record("big", 0)
    start = record.base_offset + 123
    got = setup.fetch(record, start, max_records=300)
    offsets = [
        o
        for h in got.headers
        if not h.is_control
        for o in batch_columns(got.data, h).offsets
        if o >= start
    ]
    rows = list(setup.tier.read("big", 0, from_offset=start, count=len(offsets)))
    assert [r.offset for r in rows] == offsets


def test_edge_batches_in_partial_spans_are_checked_against_the_index(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "SPAN_SLACK", 0)
    record = setup.record("big", 0)
    headers = list(iter_batch_headers(setup.local_log("big", record)))
    target = headers[9]
    key = record.keys["log"]
    store = setup.tier.ctx.store
    got = store.get(key)
    data = bytearray(got.data)
    data[target.position + 7] ^= 0x01  # base offset + 1: outside the batch's CRC32C
    store.delete(key)
    store.put(key, bytes(data), got.metadata)
    # the batch's first bytes sit in a partial span at the edge of the read: the .index refuses
    with pytest.raises(RemoteSegmentMismatch, match=r"where the \.index puts offsets"):
        setup.fetch(record, target.base_offset + 2, max_records=1)
    # a read that checks the whole span refuses it by its CRC32C
    monkeypatch.setattr(batches, "SPAN_SLACK", 10**9)
    with pytest.raises(RemoteSegmentMismatch, match=r"span \d+"):
        setup.fetch(record, target.base_offset + 2, max_records=1)


def test_a_flipped_record_byte_is_a_typed_error(setup: Setup) -> None:
    record = setup.record("big", 0)
    headers = list(iter_batch_headers(setup.local_log("big", record)))
    target = headers[4]
    key = record.keys["log"]
    store = setup.tier.ctx.store
    got = store.get(key)
    data = bytearray(got.data)
    data[target.position + 100] ^= 0xFF
    store.delete(key)
    store.put(key, bytes(data), got.metadata)
    with pytest.raises(RemoteSegmentMismatch):  # its span (or its batch CRC32C)
        setup.fetch(record, target.base_offset, max_records=1)


@pytest.fixture()
def secret(
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Setup]:
    ring = KeyRing(tmp_path / "ring")
    ring.create("k1", activate=True)
    monkeypatch.setenv(KEY_RING_ENV, str(ring.path))
    root = tmp_path / "logs"
    write_partition(root, "secret", 0, records=900, per_batch=30, codecs=(0,), pad=200)
    tier = make_tier(
        settings=KafkaSettings(
            part_size=8192, enforce_min_part_size=False, transform_chunk_size=1024
        )
    )
    tier.set_transform("secret", TransformPolicy("zstd", None, "aes-256-gcm", None))
    assert tier.upload(root).ok
    metrics = CountingMetrics()
    counting = ByteCounting(tier.ctx.store)
    tier.indexes = IndexCache(MeteredObjectStore(counting, metrics), key_ring=str(ring.path))
    yield Setup(tier, root, metrics, counting)


def test_transformed_segments_read_the_chunks_covering_the_batches(secret: Setup) -> None:
    record = secret.record("secret", 0)
    assert "chunks" in record.keys
    secret.tier.indexes.log_store(record)  # the .chunks, once
    secret.tier.indexes.offset_index(record)
    headers = list(iter_batch_headers(secret.local_log("secret", record)))
    for h in headers[1::4]:
        for offset in (h.base_offset, h.last_offset):
            got = secret.fetch(record, offset, max_records=40)
            _check_fetched(secret, "secret", record, offset, got, 40)
            assert secret.metrics.requests == Counter({"get_range": 1})
    # a tampered chunk is refused
    key = record.keys["log"]
    store = secret.tier.ctx.store
    raw = store.get(key)
    data = bytearray(raw.data)
    data[len(data) // 2] ^= 0x40
    store.delete(key)
    store.put(key, bytes(data), raw.metadata)
    secret.tier.indexes = IndexCache(store, key_ring=secret.tier.indexes.key_ring)
    middle = headers[len(headers) // 2]
    with pytest.raises(Exception) as caught:
        segment_batches(store, secret.tier.indexes, record, middle.base_offset, max_records=1)
    assert type(caught.value).__name__ in ("ChunkAuthenticationError", "RemoteSegmentMismatch")


def test_an_unindexed_batch_behind_a_far_entry_costs_a_second_get(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big one-record batches at even offsets, small ones at odd: the small ones get the
    entries (Kafka's rule: an entry once more than 4096 bytes were appended), the big ones
    none. The read starts at the entry after the offset, finds a batch past it, and reads the
    bytes from the entry below with a second GET: still exactly the batches asked for."""
    root = tmp_path / "logs"
    write_partition(root, "mixed", 0, records=60, per_batch=1, codecs=(0,),
                    segment_bytes=300 * 1024,
                    value_of=lambda t, p, o: b"v" * (20_000 if o % 2 == 0 else 10))  # fmt: skip
    tier = make_tier(settings=SETTINGS)
    assert tier.upload(root).ok
    setup = Setup(tier, root, CountingMetrics(), ByteCounting(tier.ctx.store))
    monkeypatch.setattr(batches, "SPAN_SLACK", 0)  # exact reads: each one a GET
    record = setup.record("mixed", 0)
    index = tier.indexes.offset_index(record)
    assert all(o % 2 for o in index.offsets)  # the small batches have the entries
    for offset in (4, 10, 11, 12, 21, 22):  # (offset 0 and every 13th: small tombstones)
        got = setup.fetch(record, offset, max_records=2)
        _check_fetched(setup, "mixed", record, offset, got, 2)
        assert got.reads == setup.metrics.requests["get_range"]
        assert got.reads == (2 if offset % 2 == 0 else 1), offset
