"""Transformed Kafka segments (spec/transforms.md §8) on the file:// store: a per-topic policy,
the chunked ``.log`` with its ``.chunks`` table, reads by offset and time through the decoding
view (one ranged GET per fetch), codec-bit batches left uncompressed, tampering, a missing key,
and key rotation (``objects rekey``) rewriting only the ``.chunks`` objects."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from formats.errors import (
    ChunkAuthenticationError,
)
from formats.kafka.names import kafka_uuid_to_uuid
from formats.transform import chunks as chunks_mod
from formats.transform import decode_segment_table, kafka_compress_hints
from formats.transform.section import CHUNK_ZSTD
from offloader.api import KafkaSettings, KafkaTier, Offloader, TransformPolicy
from offloader.errors import MissingKeyError, RemoteSegmentMismatch, StoreError
from offloader.keyring import KEY_RING_ENV, KeyRing
from offloader.metadata.kafka_base import DELETE_FINISHED, RemoteSegmentRecord
from offloader.store.faulty import FaultPlan, FaultyObjectStore
from tests.kafka.logdir import PartitionLayout, write_partition
from tests.kafka.test_fetch import _expected, _rows

#: small parts and chunks: several blocks, parts and chunks per test segment
SETTINGS = KafkaSettings(
    part_size=4096, enforce_min_part_size=False, stale_attempt_ms=0, transform_chunk_size=1024
)
ZSTD_AES = TransformPolicy("zstd", None, "aes-256-gcm", None)


@pytest.fixture()
def ring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KeyRing:
    path = tmp_path / "ring" / "keys"
    path.parent.mkdir()
    monkeypatch.setenv(KEY_RING_ENV, str(path))
    keys = KeyRing(path)
    keys.create("k1", activate=True)
    return keys


def _table(tier: KafkaTier, seg: RemoteSegmentRecord):  # type: ignore[no-untyped-def]
    data = tier.ctx.store.get(seg.keys["chunks"]).data
    return decode_segment_table(data, str(kafka_uuid_to_uuid(seg.segment_id)), seg.base_offset)


def _upload(
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    policy: TransformPolicy | None,
    **partition: object,
) -> tuple[KafkaTier, PartitionLayout, Path]:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, **partition)  # type: ignore[arg-type]
    tier = make_tier(settings=SETTINGS)
    if policy is not None:
        tier.set_transform("orders", policy)
    report = tier.upload(root)
    assert report.ok and report.of("uploaded")
    return tier, layout, root


def test_transformed_segments_read_back_by_offset_and_time(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, layout, _ = _upload(
        tmp_path, make_tier, ZSTD_AES, records=700, transactions=True, codecs=(0, 4)
    )
    segments = tier.ctx.meta.list_segments("orders", 0)
    assert segments and all("chunks" in s.keys for s in segments)
    for seg in segments:
        local = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
        stored = tier.ctx.store.get(seg.keys["log"])
        assert stored.data != local and local[:64] not in stored.data  # encrypted
        assert stored.metadata["kafka-transform"] == "ledger-offloader-chunked-1"
        section = _table(tier, seg)
        assert section.encrypted and section.key_id == "k1"
        assert section.original_size == seg.size_bytes == len(local)
        assert section.stored_size == len(stored.data)
        # the index files stay plain
        index = tier.ctx.store.get(seg.keys["index"]).data
        assert index == (layout.path / f"{seg.base_offset:020d}.index").read_bytes()
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    assert _rows(tier.read("orders", 0, from_offset=0)) == expected
    for start in (0, 1, 123, 350, expected[-1][0]):
        first = next(i for i, r in enumerate(expected) if r[0] >= start)
        assert (
            _rows(tier.read("orders", 0, from_offset=start, count=9)) == expected[first : first + 9]
        )
    target = expected[200][1] - 3
    first = next(i for i, r in enumerate(expected) if r[1] >= target)
    assert (
        _rows(tier.read("orders", 0, from_timestamp=target, count=5)) == expected[first : first + 5]
    )


def test_one_data_get_per_fetch_after_the_chunk_table(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, layout, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=700)
    counting = FaultyObjectStore(tier.ctx.store)
    tier.ctx.store = counting
    tier.indexes._store = counting
    base, end = layout.segments[2]
    list(tier.read("orders", 0, from_offset=base + 5, count=1))
    assert counting.calls["get"] == 2 and counting.calls["get_range"] == 1  # .index, .chunks
    for start in range(base + 1, end - 3, 7):
        counting.reset_counts()
        (row,) = tier.read("orders", 0, from_offset=start, count=1)
        assert row.offset == start
        assert (counting.calls["get"], counting.calls["get_range"]) == (0, 1)


def test_plain_topics_are_untouched(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, layout, _ = _upload(tmp_path, make_tier, None, records=300)
    for seg in tier.ctx.meta.list_segments("orders", 0):
        assert "chunks" not in seg.keys
        local = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
        stored = tier.ctx.store.get(seg.keys["log"])
        assert stored.data == local and "kafka-transform" not in stored.metadata


def _count_tries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the zstd attempts of the chunk encoder (each goes through ``_worth_trying``)."""
    tries: list[int] = []
    real = chunks_mod._worth_trying

    def counted(zc: object, piece: memoryview) -> bool:
        tries.append(len(piece))
        return real(zc, piece)  # type: ignore[arg-type]

    monkeypatch.setattr(chunks_mod, "_worth_trying", counted)
    return tries


@pytest.mark.parametrize("codec", [1, 4])
def test_batches_with_a_codec_bit_are_not_compressed_again(
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    ring: KeyRing,
    codec: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tries = _count_tries(monkeypatch)
    tier, layout, _ = _upload(
        tmp_path, make_tier, TransformPolicy("zstd"), records=600, codecs=(codec,), pad=400
    )
    for seg in tier.ctx.meta.list_segments("orders", 0):
        section = _table(tier, seg)
        assert section.compression and not section.encrypted
        # kafka-python kept the codec (compressible values): every chunk is decided as
        # "already compressed" and stored as is, without a zstd attempt
        assert all(c.flags == 0 for c in section.chunks)
        assert section.stored_size == section.original_size
    assert tries == []  # decided without trying
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    assert _rows(tier.read("orders", 0, from_offset=0)) == expected


def test_uncompressed_batches_are_compressed(
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    ring: KeyRing,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tries = _count_tries(monkeypatch)
    tier, _, _ = _upload(
        tmp_path, make_tier, TransformPolicy("zstd", 9), records=600, codecs=(0,), pad=400
    )
    for seg in tier.ctx.meta.list_segments("orders", 0):
        section = _table(tier, seg)
        assert sum(c.flags & CHUNK_ZSTD != 0 for c in section.chunks) >= len(section.chunks) // 2
        assert section.stored_size < 0.7 * section.original_size
    assert tries


def test_kafka_compress_hints() -> None:
    # compressed batches at [0, 600) and [1500, 2400) of a 3000-byte .log: a chunk at least
    # half made of them is not compressed
    spans = [(0, 600), (1500, 2400)]
    assert kafka_compress_hints(spans, 0, 3000, 1000) == [False, False, True]
    assert kafka_compress_hints(spans, 1000, 2000, 500) == [True, False, False, True]
    assert kafka_compress_hints([], 0, 2500, 1000) == [True, True, True]
    assert kafka_compress_hints([(0, 10_000)], 4096, 100, 64) == [False, False]


def _flip(tier: KafkaTier, key: str, at: int) -> None:
    got = tier.ctx.store.get(key)
    data = bytearray(got.data)
    data[at % len(data)] ^= 0x40
    tier.ctx.store.delete(key)
    tier.ctx.store.put(key, bytes(data), got.metadata)


@pytest.mark.parametrize("at", [0, 17, 1500, -1])
def test_a_flipped_byte_of_the_log_fails_loudly(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing, at: int
) -> None:
    tier, _, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=300)
    seg = tier.ctx.meta.list_segments("orders", 0)[0]
    _flip(tier, seg.keys["log"], at)
    with pytest.raises(ChunkAuthenticationError):
        list(tier.read("orders", 0, from_offset=seg.base_offset))


def test_a_damaged_or_swapped_chunk_table_is_refused(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, _, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=400)
    first, second = tier.ctx.meta.list_segments("orders", 0)[:2]
    # the record pins the .chunks object's CRC32Cs: refused before it is decoded
    _flip(tier, first.keys["chunks"], 40)
    with pytest.raises(RemoteSegmentMismatch, match=r"\.chunks: span 0"):
        list(tier.read("orders", 0, from_offset=first.base_offset, count=1))
    _flip(tier, second.keys["chunks"], 0)
    with pytest.raises(RemoteSegmentMismatch, match=r"\.chunks: span 0"):
        list(tier.read("orders", 0, from_offset=second.base_offset, count=1))


def test_a_chunk_table_of_another_segment_is_refused(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, _, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=400)
    first, second = tier.ctx.meta.list_segments("orders", 0)[:2]
    other = tier.ctx.store.get(second.keys["chunks"])
    tier.ctx.store.delete(first.keys["chunks"])
    tier.ctx.store.put(first.keys["chunks"], other.data, other.metadata)
    with pytest.raises(RemoteSegmentMismatch, match="kafka-segment-id is"):
        list(tier.read("orders", 0, from_offset=first.base_offset, count=1))


def test_a_missing_key_is_named(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, _, _ = _upload(
        tmp_path, make_tier, TransformPolicy(encryption="aes-256-gcm"), records=200
    )
    raw = json.loads(ring.path.read_text())
    raw["keys"] = [k for k in raw["keys"] if k["id"] != "k1"]
    raw["active"] = None
    ring.path.write_text(json.dumps(raw))
    with pytest.raises(MissingKeyError, match="k1"):
        list(tier.read("orders", 0, from_offset=0, count=1))


def test_rekey_rewrites_only_the_chunk_tables(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, layout, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=400)
    segments = tier.ctx.meta.list_segments("orders", 0)
    logs = {s.segment_id: tier.ctx.store.get(s.keys["log"]).data for s in segments}
    ring.create("k2")
    dry = tier.rekey("k2", dry_run=True)
    assert {o.action for o in dry} == {"rekeyed"} and all(
        _table(tier, s).key_id == "k1" for s in segments
    )
    outcomes = tier.rekey("k2")
    assert len(outcomes) == len(segments) and {o.action for o in outcomes} == {"rekeyed"}
    assert {o.topic for o in outcomes} == {"kafka:orders:0"}
    for seg in segments:
        assert _table(tier, seg).key_id == "k2"
        assert tier.ctx.store.get(seg.keys["log"]).data == logs[seg.segment_id]
    # k1 gone: everything still reads under k2; a re-run changes nothing
    raw = json.loads(ring.path.read_text())
    raw["keys"] = [k for k in raw["keys"] if k["id"] != "k1"]
    raw["active"] = "k2"
    ring.path.write_text(json.dumps(raw))
    fresh = make_tier(settings=SETTINGS)
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    assert _rows(fresh.read("orders", 0, from_offset=0)) == expected
    assert {o.action for o in fresh.rekey("k2")} == {"unchanged"}
    with pytest.raises(MissingKeyError):
        fresh.rekey("k9")


def test_an_interrupted_rekey_is_finished_by_a_rerun(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier, layout, _ = _upload(tmp_path, make_tier, ZSTD_AES, records=400)
    ring.create("k2")
    plain = tier.ctx.store
    chunk_puts: list[str] = []

    def second_chunks_put(args: Mapping[str, Any]) -> bool:
        # the second .chunks PUT fails (the markers' body rewrites are PUTs too)
        if str(args["key"]).endswith(".chunks"):
            chunk_puts.append(args["key"])
        return len(chunk_puts) == 2 and args["key"] == chunk_puts[-1]

    tier.ctx.store = FaultyObjectStore(
        plain, FaultPlan().fail("put", StoreError("down"), match=second_chunks_put, times=1)
    )
    with pytest.raises(StoreError, match="down"):
        tier.rekey("k2")
    tier.ctx.store = plain
    keys = [_table(tier, s).key_id for s in tier.ctx.meta.list_segments("orders", 0)]
    assert keys[0] == "k2" and set(keys[1:]) == {"k1"}  # stopped after the first
    actions = [o.action for o in tier.rekey("k2")]
    assert actions[0] == "unchanged" and set(actions[1:]) == {"rekeyed"}
    expected = [r for r in _expected(layout) if r[0] <= layout.segments[-2][1]]
    assert _rows(make_tier(settings=SETTINGS).read("orders", 0, from_offset=0)) == expected


def test_policy_commands_of_the_tier(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], ring: KeyRing
) -> None:
    tier = make_tier(settings=SETTINGS)
    assert tier.get_transform("orders") == (TransformPolicy(), "default")
    tier.set_transform("orders", TransformPolicy("zstd", 5, "aes-256-gcm", "k1"))
    assert tier.get_transform("orders") == (
        TransformPolicy("zstd", 5, "aes-256-gcm", "k1"),
        "metadata",
    )
    with pytest.raises(MissingKeyError, match="nope"):
        tier.set_transform("orders", TransformPolicy(encryption="aes-256-gcm", key_id="nope"))
    assert tier.remove_transform("orders") and not tier.remove_transform("orders")


@pytest.mark.parametrize(
    "method, call, codec",
    # codec 4: chunks stored as they are, several parts per segment; put 1: the .chunks
    [("upload_part", 1, 0), ("upload_part", 3, 4), ("complete_multipart_upload", 1, 0),
     ("put", 1, 0)],
)  # fmt: skip
def test_a_failed_transformed_copy_is_cleaned_and_retried(
    tmp_path: Path,
    make_tier: Callable[..., KafkaTier],
    ring: KeyRing,
    method: str,
    call: int,
    codec: int,
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=500, codecs=(codec,), pad=200)
    tier = make_tier(settings=SETTINGS)
    tier.set_transform("orders", ZSTD_AES)
    plain = tier.ctx.store
    faulty = FaultyObjectStore(
        plain, FaultPlan().fail(method, StoreError("injected"), on_call=call)
    )
    tier.ctx.store = faulty
    report = tier.upload(root)
    assert [s.kind for s in report.segments] == ["failed"]
    (record,) = tier.ctx.meta.list_segments("orders", 0)
    assert record.state == DELETE_FINISHED and "chunks" in record.keys
    assert list(plain.list("kafka/")) == [] and plain.list_multipart_uploads("kafka/") == []
    tier.ctx.store = plain
    report = tier.upload(root)
    assert report.ok and len(report.of("uploaded")) == len(layout.segments) - 1


def test_transformed_segments_are_no_orphans(
    tmp_path: Path, ring: KeyRing, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=300)
    with Offloader.from_settings(tmp_path / "home", None) as off:
        tier = off.kafka(SETTINGS)
        tier.set_transform("orders", ZSTD_AES)
        assert tier.upload(root).ok
        assert off.orphans(min_age_seconds=0).clean
        seg = tier.ctx.meta.list_segments("orders", 0)[0]
        tier.ctx.store.delete(seg.keys["chunks"])
        report = off.orphans(min_age_seconds=0)
        assert [m.key for m in report.missing] == [seg.keys["chunks"]]
