"""The lifecycle on real HTTP S3 servers (moto, and Ceph RGW when it can run here).

Ledgers stay single-block (RGW wants 5 MiB parts for every part but the last).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from formats.extension import crc32c
from formats.keys import ROLE_DATA, data_key, index_key, object_user_metadata
from offloader.api import BrokerSettings, Offloader, Position
from offloader.errors import VerificationError
from offloader.store.base import ObjectStore
from tests.lifecycle.helpers import NS, TOPIC, FakeClock, payloads

pytestmark = pytest.mark.s3


@pytest.fixture()
def s3_off(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Offloader:
    for name, value in s3_endpoint.env().items():
        monkeypatch.setenv(name, value)
    broker = BrokerSettings(
        max_entries_per_ledger=5,
        min_rollover_seconds=0,
        fsync="batch",
        default_deletion_lag_ms=0,
        verify_checksums=True,
        orphan_min_age_seconds=0,
    )
    off = Offloader.from_settings(
        tmp_path / "home",
        f"s3://{s3_bucket}/offload",
        endpoint_url=s3_endpoint.url,
        region=s3_endpoint.region,
        broker=broker,
        clock_ms=FakeClock(),
    )
    off.create_namespace(NS)
    yield off  # type: ignore[misc]
    off.close()


def keys(store: ObjectStore) -> list[str]:
    """Pulsar's objects (data, index); not the bucket manifests under ``_offloader/``."""
    return sorted(info.key for info in store.list() if not info.key.startswith("_offloader/"))


def test_offload_delete_local_read_and_delete_topic_on_s3(s3_off: Offloader) -> None:
    off = s3_off
    clock = off.runtime.clock_ms
    assert isinstance(clock, FakeClock)
    off.produce(TOPIC, payloads(13, size=2000))
    trigger = off.offload_prefix(TOPIC, position=Position(2, 0))
    assert trigger.offloaded == (0, 1)
    driver = off.topic_info(TOPIC).ledgers[0].offload
    assert driver is not None and driver.driver.name == "aws-s3"
    assert all(r.ok for r in off.verify(TOPIC, checksums=True))
    clock.advance(1)
    assert off.apply_deletion_lag(TOPIC) == [0, 1]  # verified with checksums first
    rows = list(off.read(TOPIC))
    assert [e.payload for e in rows] == payloads(13, size=2000)
    assert [e.tier for e in rows[:10]] == ["offloaded"] * 10
    assert len(keys(off.runtime.store)) == 4
    off.delete_topic(TOPIC)
    assert keys(off.runtime.store) == []
    assert off.runtime.store.list_multipart_uploads() == []


def test_orphans_and_gc_on_s3(s3_off: Offloader) -> None:
    off = s3_off
    store = off.runtime.store
    off.produce(TOPIC, payloads(11))  # ledgers 0 and 1 closed
    off.offload_prefix(TOPIC, position=Position(1, 0))
    stray = data_key("6b1c5a04-0d4e-4f5c-9f3e-1a2b3c4d5e6f", 9)
    store.put(stray, b"orphan", {})
    upload_key = data_key("7b1c5a04-0d4e-4f5c-9f3e-1a2b3c4d5e6f", 9)
    upload_id = store.create_multipart_upload(upload_key, {})
    store.upload_part(upload_key, upload_id, 1, b"p", crc32c(b"p"))
    report = off.orphans(min_age_seconds=0)
    assert [o.key for o in report.objects] == [stray]
    assert [u.key for u in report.uploads] == [upload_key]
    assert off.gc(dry_run=True, min_age_seconds=0).objects
    assert stray in keys(store)
    # neither is this installation's (no attempt of its history): reported, left alone
    assert not off.gc(min_age_seconds=0).removed
    assert stray in keys(store) and len(store.list_multipart_uploads()) == 1
    # an attempt of this home that lost (its objects carry our marker): removed
    rt = off.runtime
    old = str(uuid.uuid4())
    rt.meta.begin_offload(
        1, old, rt.driver, rt.now_ms(), data_key=data_key(old, 1), index_key=index_key(old, 1)
    )
    ours = object_user_metadata(ROLE_DATA, software_version=rt.broker.offload.software_version)
    store.put(data_key(old, 1), b"ours", ours)
    ours_upload = store.create_multipart_upload(index_key(old, 1), ours)
    new = str(uuid.uuid4())  # a newer attempt claims ledger 1: the old one is superseded
    rt.meta.begin_offload(
        1, new, rt.driver, rt.now_ms(), data_key=data_key(new, 1), index_key=index_key(new, 1)
    )
    done = off.gc(min_age_seconds=0)
    assert done.removed
    assert data_key(old, 1) not in keys(store) and stray in keys(store)
    assert [u.upload_id for u in store.list_multipart_uploads()] == [upload_id]
    assert ours_upload not in [u.upload_id for u in store.list_multipart_uploads()]
    assert len(keys(store)) == 3  # our two claimed objects and the stray one


def test_tampered_object_blocks_deletion_on_s3(s3_off: Offloader) -> None:
    off = s3_off
    store = off.runtime.store
    off.produce(TOPIC, payloads(6, size=500))
    off.offload_prefix(TOPIC, position=Position(1, 0))
    context = off.topic_info(TOPIC).ledgers[0].offload
    assert context is not None
    got = store.get(context.data_key)
    data = bytearray(got.data)
    data[data.index(b"e000003") + 2] ^= 0x40  # same size, different bytes
    store.put(context.data_key, bytes(data), dict(got.metadata))
    off.runtime.clock_ms.advance(1)  # type: ignore[attr-defined]
    with pytest.raises(VerificationError):
        off.apply_deletion_lag(TOPIC)
    assert off.runtime.ledgers.list_ledgers(TOPIC) == [0, 1]
