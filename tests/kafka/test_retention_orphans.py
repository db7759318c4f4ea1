"""Remote retention (retention.ms / retention.bytes through the DELETE states) and the orphan
audit of Kafka objects (abandoned copies, deleted segments, unknown segment ids), on the local
store and over HTTP on moto and Ceph RGW."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import KafkaSettings, KafkaTier, Offloader
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    DELETE_FINISHED,
    NewRemoteSegment,
)
from tests.kafka.conftest import SMALL, Clock
from tests.kafka.logdir import write_partition

SEG = "BBBBBBBBBBBBBBBBBBBBBB"
LOST = "CCCCCCCCCCCCCCCCCCCCCC"


def _s3(endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A fresh bucket on the server: (store URL, endpoint URL)."""
    for name, value in endpoint.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{endpoint.new_bucket()}/tier", endpoint.url


def _settings(endpoint: S3Endpoint | None) -> KafkaSettings:
    """Multipart uploads of 4 KiB parts, except on RGW, which enforces S3's 5 MiB minimum part
    (the test segments then go up in one PUT each)."""
    if endpoint is not None and endpoint.name == "rgw":
        return replace(SMALL, part_size=KafkaSettings().part_size)
    return SMALL


def test_retention_by_time_and_size(
    tmp_path: Path, make_tier: Callable[..., KafkaTier], clock: Clock
) -> None:
    _retention_by_time_and_size(tmp_path, make_tier(), clock)


@pytest.mark.s3
def test_retention_by_time_and_size_on_s3(
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    make_tier: Callable[..., KafkaTier],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, url = _s3(s3_endpoint, monkeypatch)
    tier = make_tier(store, settings=_settings(s3_endpoint), endpoint_url=url)
    _retention_by_time_and_size(tmp_path, tier, clock)


def _retention_by_time_and_size(tmp_path: Path, tier: KafkaTier, clock: Clock) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=600)
    tier.upload(root)
    finished = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    assert len(finished) >= 3
    # retention.ms: everything whose max timestamp is older than the limit
    clock.now = finished[1].max_timestamp + 1000
    tier.set_retention("orders", 1000 - 1, -1)
    deleted = tier.apply_retention("orders")
    assert deleted == [finished[0].segment_id, finished[1].segment_id]
    for seg in finished[:2]:
        record = tier.ctx.meta.get_segment(seg.segment_id)
        assert record.state == DELETE_FINISHED and "retention.ms" in (record.error or "")
        assert not [o for o in tier.ctx.store.list("kafka/") if seg.segment_id in o.key]
    # reads start at the first remote segment left
    first = next(iter(tier.read("orders", 0, from_offset=0, count=1)))
    assert first.offset == finished[2].base_offset
    # retention.bytes keeps the newest segments within the limit (and always the newest)
    tier.set_retention("orders", -1, finished[-1].size_bytes)
    tier.apply_retention()
    left = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])
    assert [s.segment_id for s in left] == [finished[-1].segment_id]
    assert tier.ctx.meta.get_partition("orders", 0).watermark == layout.segments[-2][1]  # type: ignore[union-attr]


def test_orphans_and_gc_cover_kafka_objects(tmp_path: Path, clock: Clock) -> None:
    _orphans_and_gc(tmp_path, clock, None, None, SMALL)


@pytest.mark.s3
def test_orphans_and_gc_cover_kafka_objects_on_s3(
    tmp_path: Path, s3_endpoint: S3Endpoint, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _orphans_and_gc(tmp_path, clock, *_s3(s3_endpoint, monkeypatch), _settings(s3_endpoint))


def _orphans_and_gc(
    tmp_path: Path, clock: Clock, store_url: str | None, url: str | None, settings: KafkaSettings
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=400)
    with Offloader.from_settings(
        tmp_path / "home", store_url, endpoint_url=url, clock_ms=clock
    ) as off:
        tier = off.kafka(settings)
        tier.upload(root)
        store, meta = tier.ctx.store, tier.ctx.meta
        live = meta.list_segments("orders", 0)
        assert off.orphans(min_age_seconds=0).clean  # uploaded segments are claimed
        # an uploader that died mid-copy: a STARTED record with a half-written object and upload
        prefix = f"kafka/orders-{layout.topic_id}/0/"
        half = f"{prefix}{99999:020d}-{SEG}.log"
        meta.start_copy(
            NewRemoteSegment(
                SEG,
                "orders",
                layout.topic_id,
                0,
                99999,
                100000,
                1,
                9,
                {},
                {"log": half, "index": half[:-3] + "index"},
            ),
            1,
        )
        store.put(half, b"half-written", {})
        store.create_multipart_upload(half[:-3] + "index", {})
        # an object of an id nobody recorded, in a partition this installation has no copy of
        stray = f"kafka/orders-{layout.topic_id}/7/{5:020d}-{LOST}.log"
        store.put(stray, b"x", {})
        report = off.orphans(min_age_seconds=0)
        reasons = sorted((o.reason, o.key.rsplit("/", 1)[1]) for o in report.objects)
        assert reasons == [
            ("kafka-abandoned-copy", f"{99999:020d}-{SEG}.log"),
            ("kafka-unclaimed-segment", f"{5:020d}-{LOST}.log"),
        ]
        assert [u.key for u in report.uploads] == [half[:-3] + "index"]
        deletable = {o.key.rsplit("/", 1)[1]: o.deletable for o in report.objects}
        # gc deletes only what this installation provably wrote (issue 21, item 7)
        assert deletable == {f"{99999:020d}-{SEG}.log": True, f"{5:020d}-{LOST}.log": False}
        # a finished segment whose object vanished is reported, never "fixed"
        store.delete(live[0].keys["timeindex"])
        missing = off.orphans(min_age_seconds=0).missing
        assert [(m.topic, m.ledger_id, m.uuid) for m in missing] == [
            ("orders-0", live[0].base_offset, live[0].segment_id)
        ]
        assert off.gc(dry_run=True, min_age_seconds=0).removed is False
        assert meta.get_segment(SEG).state == "COPY_SEGMENT_STARTED"
        gc = off.gc(min_age_seconds=0)
        assert gc.removed
        assert meta.get_segment(SEG).state == DELETE_FINISHED
        after = off.orphans(min_age_seconds=0)
        assert after.uploads == ()
        # the unclaimed segment (another uploader's, for all we know) is left alone
        assert [(o.reason, o.deletable) for o in after.objects] == [
            ("kafka-unclaimed-segment", False)
        ]
        assert store.head(stray).size == 1
        # the live segments' objects were not touched
        for seg in live:
            assert store.head(seg.keys["log"]).size == seg.size_bytes
        # a young STARTED record (an upload running now) is not reported
        meta.start_copy(
            NewRemoteSegment(
                "DDDDDDDDDDDDDDDDDDDDDD",
                "orders",
                layout.topic_id,
                0,
                50_000,  # past the uploaded offsets: one live copy per offset
                50_001,
                1,
                1,
                {},
                {"log": f"{prefix}{50_000:020d}-DDDDDDDDDDDDDDDDDDDDDD.log"},
            ),
            off.runtime.wall_ms(),
        )
        assert off.orphans(min_age_seconds=3600).objects == ()


@pytest.mark.parametrize(
    ("spans", "first", "last", "held"),
    [
        ([(0, 99), (100, 199)], 50, 150, True),  # across two copies
        ([(0, 99), (101, 199)], 50, 150, False),  # offset 100 held by none
        ([(0, 99)], 0, 99, True),
        ([(0, 99)], 0, 100, False),
        ([(10, 99)], 5, 5, False),
        ([(0, 49), (0, 99), (100, 100)], 0, 100, True),  # overlapping copies
        ([], 0, 0, False),
    ],
)
def test_a_superseded_copy_needs_every_offset_held(
    spans: list[tuple[int, int]], first: int, last: int, held: bool
) -> None:
    from offloader.kafka.orphans import _covered

    assert _covered(sorted(spans), first, last) is held
