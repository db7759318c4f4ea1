"""The Kafka tier on Google Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite),
configured from each cloud's own environment: multipart .log uploads (composed parts on GCS,
staged blocks on Azure), byte-exact objects, the partition's status, one-GET fetches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from offloader.api import KafkaSettings, KafkaTier
from offloader.store.faulty import FaultyObjectStore
from tests.cloud_env import cloud_root
from tests.kafka.logdir import write_partition


@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_upload_and_fetch_on_each_cloud(
    tmp_path: Path,
    cloud: str,
    request: pytest.FixtureRequest,
    make_tier: Callable[..., KafkaTier],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "logs"
    layout = write_partition(
        root, "big", 0, records=1500, per_batch=50, segment_bytes=60 * 1024, codecs=(0,)
    )
    url = cloud_root(cloud, request, monkeypatch) + "/tier"
    tier = make_tier(url, settings=KafkaSettings(part_size=16 * 1024, enforce_min_part_size=False))
    assert tier.ctx.store.url == url
    counting = FaultyObjectStore(tier.ctx.store)
    tier.ctx.store = counting
    report = tier.upload(root)
    assert report.ok and report.of("uploaded")
    assert counting.calls["upload_part"] >= 3 and counting.calls["complete_multipart_upload"] >= 1
    segments = tier.ctx.meta.list_segments("big", 0)
    local_bytes = 0
    for seg in segments:
        local = (layout.path / f"{seg.base_offset:020d}.log").read_bytes()
        assert counting.get(seg.keys["log"]).data == local
        local_bytes += len(local)
    (status,) = tier.status("big", root)
    assert status.remote_segments == len(segments) >= 2
    assert status.remote_bytes == local_bytes == status.remote_stored_bytes
    assert status.remote_start == layout.segments[0][0] and status.in_progress == 0
    assert status.upload_lag == 0 and status.last_error is None
    assert counting.list_multipart_uploads() == []
    tier.indexes._store = counting
    start = layout.segments[0][1] - 40
    list(tier.read("big", 0, from_offset=start, count=1))  # caches the index
    counting.reset_counts()
    got = [r.offset for r in tier.read("big", 0, from_offset=start, count=30)]
    assert got == list(range(start, start + 30))
    assert counting.calls["get_range"] == 1 and counting.calls["get"] == 0
