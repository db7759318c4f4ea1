"""Losing the home loses no Kafka segment (issue 36): upload a log directory, delete the home,
run ``metadata rebuild`` on a new home, and every record reads back exactly; a second finished
copy of the same offsets is reported and not recorded; unfinished attempts are orphans; a
resumed upload continues from the rebuilt watermark; --dry-run, --merge and the refusal. On the
file store and on moto over HTTP, with SQLite and PostgreSQL metadata."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.kafka.manifest import (
    KAFKA_KIND,
    KAFKA_MARKERS,
    decode_segment_marker_body,
    watermark_name,
)
from formats.manifest import watermark_prefix
from offloader.api import BrokerSettings, KafkaSettings, Offloader
from offloader.errors import ObjectNotFound, RebuildRefused
from offloader.kafka.manifests import write_segment_marker
from offloader.kafka.orphans import audit_kafka, collect_kafka
from offloader.metadata.kafka_base import COPY_FINISHED, NewRemoteSegment
from offloader.rebuild.base import BodyReader
from offloader.rebuild.kafka_segments import KafkaSegments
from tests.kafka.logdir import PartitionLayout, write_partition

SETTINGS = KafkaSettings(part_size=4096, enforce_min_part_size=False, stale_attempt_ms=0)

Make = Callable[..., Offloader]


@pytest.fixture(params=["file", "moto"])
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'objects'}"
    moto: S3Endpoint = request.getfixturevalue("moto_endpoint")
    for name, value in moto.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{moto.new_bucket()}/tier"


@pytest.fixture()
def make(tmp_path: Path, store_url: str) -> Iterator[Make]:
    opened: list[Offloader] = []

    def build(name: str, metadata_url: str | None = None) -> Offloader:
        off = Offloader.from_settings(tmp_path / name, store_url, metadata_url=metadata_url)
        opened.append(off)
        return off

    yield build
    for off in opened:
        off.close()


def _layouts(log_dir: Path) -> list[PartitionLayout]:
    return [
        write_partition(log_dir, "orders", 0, records=600, transactions=True),
        write_partition(log_dir, "orders", 1, records=300),
        write_partition(log_dir, "clicks", 0, records=400, segment_bytes=6 * 1024),
    ]


def _read_all(off: Offloader, layout: PartitionLayout) -> list[tuple[int, bytes | None]]:
    tier = off.kafka(SETTINGS)
    return [(r.offset, r.value) for r in tier.read(layout.topic, layout.partition, from_offset=0)]


def _segments(off: Offloader) -> list[tuple[str, int, int, int, str]]:
    return [
        (s.topic, s.partition, s.first_offset, s.end_offset, s.segment_id)
        for s in off.kafka(SETTINGS).ctx.meta.list_segments(states=[COPY_FINISHED])
    ]


def test_lose_the_home_rebuild_read_resume(make: Make, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    layouts = _layouts(log_dir)
    old = make("home")
    report = old.kafka(SETTINGS).upload(log_dir)
    assert report.ok and report.of("uploaded")
    want = {(lay.topic, lay.partition): _read_all(old, lay) for lay in layouts}
    segments = _segments(old)
    watermarks = {
        (p.topic, p.partition): p.watermark for p in old.kafka().ctx.meta.list_partitions()
    }
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    dry = new.metadata_rebuild(dry_run=True)
    assert [i for i in dry.items if i.kind == "kafka-segments" and i.action == "offload"]
    assert new.kafka().ctx.meta.list_partitions() == []  # a dry run writes nothing
    done = new.metadata_rebuild()
    # one listing, then one GET of each recorded copy's marker body (its checks), no HEAD
    assert done.gets == len(segments) and done.heads == 0
    assert not [i for i in done.items if i.action in ("problem", "conflict")]
    assert sorted(_segments(new)) == sorted(segments)
    rebuilt = {(p.topic, p.partition): p.watermark for p in new.kafka().ctx.meta.list_partitions()}
    assert rebuilt == watermarks
    for lay in layouts:
        assert _read_all(new, lay) == want[(lay.topic, lay.partition)]

    # refused without --merge; with it everything is already present
    with pytest.raises(RebuildRefused):
        new.metadata_rebuild()
    merged = new.metadata_rebuild(merge=True)
    kafka = [i for i in merged.items if i.kind == "kafka-segments"]
    assert {i.action for i in kafka} == {"present", "watermark"}

    # a resumed upload copies nothing again; new segments go on from the watermark
    store = new.runtime.store
    before = {o.key for o in store.list()}
    again = new.kafka(SETTINGS).upload(log_dir)
    assert again.ok and not again.of("uploaded")
    assert {o.key for o in store.list()} == before
    extra = log_dir / "orders-1"
    write_partition(tmp_path / "more", "orders", 1, records=300, start_offset=300)
    for f in sorted((tmp_path / "more" / "orders-1").glob("0*")):
        (extra / f.name).write_bytes(f.read_bytes())  # the old active segment is closed now
    third = new.kafka(SETTINGS).upload(log_dir)
    assert third.ok
    uploaded = third.of("uploaded")
    assert uploaded and all(o.base_offset >= watermarks[("orders", 1)] for o in uploaded)


def test_two_finished_copies_and_unfinished_attempts(make: Make, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    write_partition(log_dir, "orders", 0, records=600)
    old = make("home")
    assert old.kafka(SETTINGS).upload(log_dir).ok
    tier = old.kafka(SETTINGS)
    store = tier.ctx.store
    first = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])[0]
    # a second finished copy of the first segment, under another segment id
    twin_id = "---------------------A"  # lower than any random segment id
    twin_keys = {k: v.replace(first.segment_id, twin_id) for k, v in first.keys.items()}
    for kind, key in first.keys.items():
        store.put(twin_keys[kind], store.get(key).data, {})
    twin = first.__class__(**{**first.__dict__, "segment_id": twin_id, "keys": twin_keys})
    write_segment_marker(
        store, twin, log_crc32c=first.log_crc32c or 0, transform="none", finished_ms=1
    )
    # an unfinished attempt: objects without a marker
    lost_id = "BBBBBBBBBBBBBBBBBBBBBB"
    store.put(first.keys["log"].replace(first.segment_id, lost_id), b"half", {})
    want = [(r.offset, r.value) for r in tier.read("orders", 0, from_offset=0)]
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    report = new.metadata_rebuild()
    kafka = [i for i in report.items if i.kind == "kafka-segments"]
    superseded = [i for i in kafka if i.action == "superseded"]
    orphans = [i for i in kafka if i.action == "orphan"]
    # the kept copy is the deterministic lower id
    kept_ids = {s[4] for s in _segments(new)}
    assert twin_id in kept_ids and first.segment_id not in kept_ids
    assert [i.uuid for i in superseded] == [first.segment_id]
    assert [i.uuid for i in orphans] == [lost_id]
    got = [(r.offset, r.value) for r in new.kafka(SETTINGS).read("orders", 0, from_offset=0)]
    assert got == want  # no offset twice
    audit = new.orphans(min_age_seconds=0)
    flagged = {o.key for o in audit.objects}
    assert any(lost_id in k for k in flagged)
    assert all(any(k == key for k in flagged) for key in first.keys.values())


def test_watermark_objects_only_rise_and_markers_go_first(make: Make, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    lay = write_partition(log_dir, "orders", 0, records=600)
    off = make("home")
    tier = off.kafka(SETTINGS)
    assert tier.upload(log_dir).ok
    store = tier.ctx.store
    prefix = watermark_prefix(KAFKA_KIND, watermark_name("orders", lay.topic_id, 0))
    positions = [int(o.key[len(prefix) :].split(".")[0]) for o in store.list(prefix)]
    closed = [end for _, end in lay.segments[:-1]]
    assert positions == closed  # one key per finished segment, none deleted
    markers = list(store.list(KAFKA_MARKERS))
    assert len(markers) == len(closed)
    # retention deletes a segment's marker with its objects; the watermark keys stay
    tier.set_retention("orders", 0, -1)
    deleted = tier.apply_retention()
    assert deleted
    assert len(list(store.list(KAFKA_MARKERS))) == len(closed) - len(deleted)
    assert len(list(store.list(prefix))) == len(closed)


@pytest.mark.postgres
def test_rebuild_into_postgresql(tmp_path: Path, pg_server: Any, make: Make) -> None:
    log_dir = tmp_path / "logs"
    layouts = _layouts(log_dir)
    old = make("home", pg_server.new_url())
    assert old.kafka(SETTINGS).upload(log_dir).ok
    want = {(lay.topic, lay.partition): _read_all(old, lay) for lay in layouts}
    segments = _segments(old)
    old.close()
    shutil.rmtree(tmp_path / "home")
    new = make("new-home", pg_server.new_url())  # a new, empty database
    new.metadata_rebuild()
    assert sorted(_segments(new)) == sorted(segments)
    for lay in layouts:
        assert _read_all(new, lay) == want[(lay.topic, lay.partition)]


@pytest.mark.s3
def test_cli_kafka_read_on_a_fresh_home_after_rebuild(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user would: ``kafka upload``, delete the home, ``metadata rebuild`` on a new home
    pointed at the bucket, ``kafka read`` and ``kafka status`` answer from it."""
    from tests.cli.helpers import json_lines, ok
    from tests.kafka.logdir import record_value

    for name, value in moto_endpoint.env().items():
        monkeypatch.setenv(name, value)
    store = ["--store", f"s3://{moto_endpoint.new_bucket()}/t", "--endpoint-url", moto_endpoint.url]
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=400)
    old = tmp_path / "home"
    ok(old, *store, "kafka", "upload", "--log-dir", str(root), "--once", "--part-size", "5M")
    shutil.rmtree(old)
    new = tmp_path / "new-home"
    dry = ok(new, *store, "metadata", "rebuild", "--dry-run")
    assert "Kafka: would record" in dry.output
    lines = json_lines(ok(new, *store, "--json", "metadata", "rebuild"))
    summary = lines[-1]["summary"]
    recorded = [
        line
        for line in lines[:-1]
        if line.get("kind") == "kafka-segments" and line["action"] == "offload"
    ]
    assert recorded
    # one GET per recorded copy (its marker body: the span checks), no HEAD
    assert summary["gets"] == len(recorded) and summary["heads"] == 0 and summary["problem"] == 0
    rows = json_lines(
        ok(
            new,
            *store,
            "kafka",
            "read",
            "orders",
            "0",
            "--from-offset",
            "123",
            "--count",
            "3",
            "--json",
        )
    )
    assert [r["offset"] for r in rows] == [123, 124, 125]
    assert rows[0]["value"] == record_value("orders", 0, 123).decode()
    status = json_lines(ok(new, *store, "--json", "kafka", "status"))
    assert status[0]["remote_segments"] > 0 and status[0]["watermark"] >= 125


def test_merge_adds_what_is_missing_and_never_lowers_a_watermark(
    make: Make, tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    lay = write_partition(log_dir, "orders", 0, records=600)
    old = make("home")
    assert old.kafka(SETTINGS).upload(log_dir).ok
    segments = _segments(old)
    new = make("new-home")
    meta = new.kafka(SETTINGS).ctx.meta
    meta.ensure_partition("orders", 0, lay.topic_id, 1, watermark=10**6)  # ahead of the bucket
    with pytest.raises(RebuildRefused):
        new.metadata_rebuild()
    dry = new.metadata_rebuild(merge=True, dry_run=True)
    assert meta.list_segments() == []  # a dry run writes nothing
    assert {i.action for i in dry.items if i.kind == "kafka-segments"} == {"offload", "watermark"}
    new.metadata_rebuild(merge=True)
    assert sorted(_segments(new)) == sorted(segments)
    part = meta.get_partition("orders", 0)
    assert part is not None and part.watermark == 10**6
    again = new.metadata_rebuild(merge=True)
    assert {i.action for i in again.items if i.kind == "kafka-segments"} == {"present", "watermark"}


def test_transformed_segments_rebuild_and_read(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compressed and encrypted segments: the marker says so (``t`` zstdaes, ``k`` with the
    chunks), the rebuilt records keep the ``.chunks`` key, and reads decode them (the key ring
    is not in the bucket: it is kept beside the home, as the guide says)."""
    from offloader.keyring import KEY_RING_ENV, KeyRing
    from offloader.policies import TransformPolicy

    ring = tmp_path / "ring" / "keys"
    ring.parent.mkdir()
    monkeypatch.setenv(KEY_RING_ENV, str(ring))
    KeyRing(ring).create("k1", activate=True)
    log_dir = tmp_path / "logs"
    lay = write_partition(log_dir, "orders", 0, records=500, codecs=(0, 4))
    old = make("home")
    tier = old.kafka(SETTINGS)
    tier.set_transform("orders", TransformPolicy("zstd", None, "aes-256-gcm", None))
    assert tier.upload(log_dir).ok
    want = _read_all(old, lay)
    old.close()
    shutil.rmtree(tmp_path / "home")
    new = make("new-home")
    report = new.metadata_rebuild()
    found = [i for i in report.items if i.kind == "kafka-segments" and i.action == "offload"]
    assert found and all(i.fields["transform"] == "zstdaes" for i in found)
    assert all("chunks" in s.keys for s in new.kafka(SETTINGS).ctx.meta.list_segments())
    assert _read_all(new, lay) == want


def _records(off: Offloader) -> dict[str, Any]:
    return {s.segment_id: s for s in off.kafka(SETTINGS).ctx.meta.list_segments()}


def test_rebuilt_records_are_the_originals_field_by_field(make: Make, tmp_path: Path) -> None:
    """The marker's body (version 2) carries the span CRC32Cs and the start time: every
    rebuilt record equals the uploader's, field by field, checks included, and reads verify
    spans again; a version-1 body (a marker of an older release) still rebuilds, without
    checks and with the finish time as its start."""
    log_dir = tmp_path / "logs"
    layouts = _layouts(log_dir)
    old = make("home")
    assert old.kafka(SETTINGS).upload(log_dir).ok
    want = _records(old)
    assert want and all(r.checks is not None and "log" in r.checks.objects for r in want.values())
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    assert not [i for i in new.metadata_rebuild().items if i.action in ("problem", "conflict")]
    got = _records(new)
    assert sorted(got) == sorted(want)
    for segment_id, record in want.items():
        rebuilt = got[segment_id]
        for name in record.__dataclass_fields__:
            assert getattr(rebuilt, name) == getattr(record, name), (segment_id, name)
    for lay in layouts:
        assert _read_all(new, lay)  # reads through the restored span checks
    new.close()
    shutil.rmtree(tmp_path / "new-home")

    # markers written by an older release: body version 1, no checks, no start time
    store = make("rewriter").runtime.store
    for info in list(store.list(KAFKA_MARKERS)):
        doc = json.loads(store.get(info.key).data)
        assert doc["version"] == 2 and doc["checks"]
        for name in ("version", "checks", "started_ms"):
            del doc[name]
        body = json.dumps(doc).encode()
        assert decode_segment_marker_body(body).checks == {}
        store.delete(info.key)
        store.put(info.key, body, {})
    older = make("older-home")
    assert not [i for i in older.metadata_rebuild().items if i.action in ("problem", "conflict")]
    got = _records(older)
    assert sorted(got) == sorted(want)
    for segment_id, record in want.items():
        rebuilt = got[segment_id]
        assert rebuilt.checks is None
        assert rebuilt.started_ms == record.updated_ms
        same = ("checks", "started_ms")
        for name in record.__dataclass_fields__:
            if name not in same:
                assert getattr(rebuilt, name) == getattr(record, name), (segment_id, name)
    for lay in layouts:
        assert _read_all(older, lay)


def test_a_rekey_moves_the_markers_checks_and_a_rebuild_follows(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``objects rekey`` rewrites a transformed segment's ``.chunks``: its marker body follows
    (``next_chunks`` while the object is replaced, then the new pin), so a home rebuilt after a
    rekey, or after one interrupted before the ``.chunks`` PUT, pins checksums the stored
    object matches, and reads decode; records equal the originals field by field (but
    ``updated_ms``, which the rekey moved and the rebuild sets to the finish time)."""
    from offloader.errors import StoreUnavailable
    from offloader.keyring import KEY_RING_ENV, KeyRing
    from offloader.policies import TransformPolicy
    from offloader.store.faulty import FaultyObjectStore

    ring = tmp_path / "ring" / "keys"
    ring.parent.mkdir()
    monkeypatch.setenv(KEY_RING_ENV, str(ring))
    KeyRing(ring).create("k1", activate=True)
    KeyRing(ring).create("k2")
    KeyRing(ring).create("k3")
    log_dir = tmp_path / "logs"
    lay = write_partition(log_dir, "orders", 0, records=500, codecs=(0, 4))
    old = make("home")
    tier = old.kafka(SETTINGS)
    tier.set_transform("orders", TransformPolicy("zstd", None, "aes-256-gcm", None))
    assert tier.upload(log_dir).ok
    want_rows = _read_all(old, lay)
    first = _records(old)
    assert tier.rekey("k2")
    moved = _records(old)
    assert all(
        moved[s].checks.objects["chunks"] != first[s].checks.objects["chunks"]  # type: ignore[union-attr]
        for s in first
    )
    # a second rekey whose first .chunks PUT fails: that segment is left with next_chunks
    real = tier.ctx.store
    faulty = FaultyObjectStore(real)
    faulty.plan.fail(
        "put", StoreUnavailable("injected"), match=lambda a: str(a["key"]).endswith(".chunks")
    )
    tier.ctx.store = faulty
    with pytest.raises(StoreUnavailable):
        tier.rekey("k3")
    tier.ctx.store = real
    want = _records(old)
    assert any(r.checks is not None and r.checks.next_chunks is not None for r in want.values())
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    assert not [i for i in new.metadata_rebuild().items if i.action in ("problem", "conflict")]
    got = _records(new)
    assert sorted(got) == sorted(want)
    for segment_id, record in want.items():
        for name in record.__dataclass_fields__:
            if name != "updated_ms":  # a rekey's time; rebuilt: the copy's finish time
                assert getattr(got[segment_id], name) == getattr(record, name), (segment_id, name)
    assert _read_all(new, lay) == want_rows
    # the interrupted rekey finishes on the rebuilt home; a rebuild after it still matches
    assert new.kafka(SETTINGS).rekey("k3")
    assert _read_all(new, lay) == want_rows


class _InFlight:
    """A real store whose GETs take a little longer and are counted while in flight."""

    def __init__(self, store: Any, delay: float = 0.02) -> None:
        self.store, self.delay = store, delay
        self.now = self.most = self.started = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self.lock:
            self.now += 1
            self.started += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.delay)
            return self.store.get(key)
        finally:
            with self.lock:
                self.now -= 1


def test_body_reader_overlaps_gets_in_order_and_keeps_errors_typed(make: Make) -> None:
    store = make("bodies").runtime.store
    keys = [f"bodies/{n:03d}" for n in range(40)]
    for n, key in enumerate(keys):
        store.put(key, f"body {n}".encode(), {})
    store.delete(keys[7])  # gone between the listing and the GET
    counted = _InFlight(store)
    with BodyReader(counted, keys, concurrency=4, lookahead=6) as bodies:
        assert bodies.read(keys[0]) == b"body 0"
        assert counted.started <= 1 + 6  # no more started than the window ahead
        got = []
        for n, key in enumerate(keys[1:], 1):
            if n == 7:
                with pytest.raises(ObjectNotFound):
                    bodies.read(key)
                continue
            got.append(bodies.read(key))
        with pytest.raises(ObjectNotFound):  # a key not planned: read on the spot
            bodies.read("bodies/not-planned")
    assert got == [f"body {n}".encode() for n in range(1, 40) if n != 7]
    assert 2 <= counted.most <= 4 and counted.started == 41

    one = _InFlight(store, delay=0)
    with BodyReader(one, keys[:5], concurrency=1) as serial:
        assert [serial.read(k) for k in keys[:3]] == [b"body 0", b"body 1", b"body 2"]
    assert one.most == 1 and one.started == 3  # one after another, only what is read


def test_marker_bodies_read_concurrently_rebuild_the_same_records_in_the_same_order(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    _layouts(log_dir)
    old = make("home")
    assert old.kafka(SETTINGS).upload(log_dir).ok
    want = _records(old)
    old.close()
    shutil.rmtree(tmp_path / "home")

    monkeypatch.setattr(KafkaSegments, "body_concurrency", 1)
    serial = make("serial-home").metadata_rebuild()
    monkeypatch.setattr(KafkaSegments, "body_concurrency", 8)
    parallel_home = make("parallel-home")
    parallel = parallel_home.metadata_rebuild()
    assert [i.as_json() for i in parallel.items] == [i.as_json() for i in serial.items]
    assert parallel.gets == serial.gets == len(want) and parallel.heads == 0
    got = _records(parallel_home)
    assert sorted(got) == sorted(want)
    for segment_id, record in want.items():
        for name in record.__dataclass_fields__:
            assert getattr(got[segment_id], name) == getattr(record, name), (segment_id, name)


def test_gc_collects_superseded_copies_and_orphan_attempts_only_with_min_age(
    make: Make, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a rebuild, the copies it reported ``superseded`` and ``orphan`` are what
    ``objects orphans`` calls ``kafka-superseded-copy`` when finished copies of this home hold
    their offsets: gc deletes them (markers, objects, open uploads) with --min-age only, a
    dry run lists them, a copy claimed meanwhile is kept, and an unknown copy of offsets this
    home does not hold stays ``kafka-unclaimed-segment``."""
    log_dir = tmp_path / "logs"
    lay = write_partition(log_dir, "orders", 0, records=600)
    old = make("home")
    tier = old.kafka(SETTINGS)
    assert tier.upload(log_dir).ok
    store = tier.ctx.store
    first = tier.ctx.meta.list_segments("orders", 0, states=[COPY_FINISHED])[0]
    twin_id = "---------------------A"  # kept by the rebuild: lower than any random id
    twin_keys = {k: v.replace(first.segment_id, twin_id) for k, v in first.keys.items()}
    for kind, key in first.keys.items():
        store.put(twin_keys[kind], store.get(key).data, {})
    twin = first.__class__(**{**first.__dict__, "segment_id": twin_id, "keys": twin_keys})
    write_segment_marker(
        store, twin, log_crc32c=first.log_crc32c or 0, transform="none", finished_ms=1
    )
    lost_id, open_id, claimed_id = ("B" * 22, "C" * 22, "E" * 22)
    lost = first.keys["log"].replace(first.segment_id, lost_id)
    store.put(lost, b"half", {})  # an unfinished attempt at a recorded base offset
    claimed = first.keys["log"].replace(first.segment_id, claimed_id)
    store.put(claimed, b"half", {})
    upload = first.keys["index"].replace(first.segment_id, open_id)
    upload_id = store.create_multipart_upload(upload, {})
    foreign = f"kafka/orders-{lay.topic_id}/5/{0:020d}-{'D' * 22}.log"
    store.put(foreign, b"not ours to judge", {})  # a partition this home has no copy of
    marker = next(o.key for o in store.list(KAFKA_MARKERS) if first.segment_id in o.key)
    want = [(r.offset, r.value) for r in tier.read("orders", 0, from_offset=0)]
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    rebuilt = new.metadata_rebuild()
    assert [i.uuid for i in rebuilt.items if i.action == "superseded"] == [first.segment_id]
    superseded = {marker, *first.keys.values(), lost, claimed}

    def reasons(report: Any) -> dict[str, tuple[str, bool]]:
        return {o.key: (o.reason, o.deletable) for o in report.objects}

    # the default minimum age: listed (when old enough), never deletable
    aged = Offloader.from_settings(
        tmp_path / "new-home", store_url, broker=BrokerSettings(orphan_min_age_seconds=0)
    )
    by_default = reasons(aged.gc())
    assert {k for k, (r, _) in by_default.items() if r == "kafka-superseded-copy"} == superseded
    assert not any(deletable for _, deletable in by_default.values())
    assert [(u.key, u.deletable) for u in aged.orphans().uploads] == [(upload, False)]
    aged.close()
    # the caller's own --min-age: deletable; young copies are not even listed
    assert new.orphans(min_age_seconds=3600).objects == ()
    listed = reasons(new.orphans(min_age_seconds=0))
    assert listed == {
        **{key: ("kafka-superseded-copy", True) for key in superseded},
        foreign: ("kafka-unclaimed-segment", False),
    }
    dry = new.gc(dry_run=True, min_age_seconds=0)
    assert reasons(dry) == listed and [(u.key, u.deletable) for u in dry.uploads] == [
        (upload, True)
    ]
    keys = {o.key for o in store.list()}
    assert superseded | {foreign} <= keys  # a dry run deletes nothing

    # a copy claimed between the audit and the deletes is kept
    ctx = new.kafka(SETTINGS).ctx
    audit = audit_kafka(ctx, list(store.list()), store.list_multipart_uploads(), 1 << 62, 0,
                        collect_superseded=True)  # fmt: skip
    assert set(audit.superseded) == {first.segment_id, lost_id, claimed_id, open_id}
    ctx.meta.start_copy(
        NewRemoteSegment(claimed_id, "orders", lay.topic_id, 0, 10**9, 10**9, 1, 4, {},
                         {"log": claimed}),
        new.runtime.wall_ms(),
    )  # fmt: skip
    deleted: list[str] = []
    delete = ctx.store.delete

    def recorded(key: str) -> None:
        deleted.append(key)
        delete(key)

    monkeypatch.setattr(ctx.store, "delete", recorded)
    assert collect_kafka(ctx, audit) == len(superseded) - 1 + 1  # objects, and the upload
    monkeypatch.setattr(ctx.store, "delete", delete)
    assert set(deleted) == superseded - {claimed}
    copy = [k for k in deleted if first.segment_id in k]
    assert copy[0] == marker and set(copy[1:]) == set(first.keys.values())  # marker first
    left = {o.key for o in store.list()}
    assert claimed in left and foreign in left and not (superseded - {claimed}) & left
    assert all(u.upload_id != upload_id for u in store.list_multipart_uploads())
    # the kept copies are untouched: every offset reads back once
    got = [(r.offset, r.value) for r in new.kafka(SETTINGS).read("orders", 0, from_offset=0)]
    assert got == want
    after = new.orphans(min_age_seconds=0)
    assert reasons(after) == {
        foreign: ("kafka-unclaimed-segment", False),
        claimed: ("kafka-abandoned-copy", True),  # a claim with min-age 0: its own rules
    }
    assert new.gc(min_age_seconds=0).removed
    assert reasons(new.orphans(min_age_seconds=0)) == {foreign: ("kafka-unclaimed-segment", False)}
    assert foreign in {o.key for o in store.list()}
