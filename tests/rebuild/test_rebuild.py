"""Losing the home loses nothing (issue 36): offload several topics, delete the home, run
``metadata rebuild`` on a new home, and everything reads back byte-exact; two finished copies
resolve to one, unfinished attempts become orphans gc deletes, a resumed offload continues
after the rebuilt ledgers without re-uploading them. On the file store, on moto over HTTP, on
Google Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite), and
with the metadata in PostgreSQL (its schema dropped)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devservers.cloud import AzuriteEmulator, GcsEmulator
from devservers.endpoint import S3Endpoint
from formats.extension import crc32c
from formats.keys import ROLE_DATA, data_key, index_key, object_user_metadata, parse_key
from formats.manifest import LEDGER_MARKERS, WATERMARKS, parse_ledger_marker_key
from offloader.api import Offloader, Position
from offloader.errors import RebuildRefused
from offloader.naming import TopicName
from offloader.offload.manifests import write_ledger_marker
from tests.lifecycle.helpers import FakeClock, payloads, small_broker

T1 = "persistent://public/default/t1"
T2 = "persistent://tenant-b/ns/events %+x:y"
# a long multi-byte name: its marker keys carry a hash, the full name is in their body
T3 = "persistent://public/default/" + "é" * 120
TOPICS = (T1, T2, T3)

Make = Callable[[str], Offloader]


@pytest.fixture(
    params=[
        "file",
        "moto",
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'objects'}"
    if request.param == "gcs":
        gcs: GcsEmulator = request.getfixturevalue("gcs_emulator")
        for name, value in gcs.env().items():
            monkeypatch.setenv(name, value)
        return f"gs://{gcs.new_bucket()}/offload"
    if request.param == "azure":
        azurite: AzuriteEmulator = request.getfixturevalue("azurite")
        for name, value in azurite.env().items():
            monkeypatch.setenv(name, value)
        return f"az://{azurite.new_container()}/offload"
    moto: S3Endpoint = request.getfixturevalue("moto_endpoint")
    for name, value in moto.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{moto.new_bucket()}/offload"


@pytest.fixture()
def make(tmp_path: Path, store_url: str) -> Iterator[Make]:
    """``make(home_name)``: an Offloader on ``tmp_path/home_name`` and the test's store."""
    opened: list[Offloader] = []

    def build(name: str, metadata_url: str | None = None) -> Offloader:
        off = Offloader.from_settings(
            tmp_path / name,
            store_url,
            metadata_url=metadata_url,
            broker=small_broker(),
            clock_ms=FakeClock(),
        )
        opened.append(off)
        return off

    yield build
    for off in opened:
        off.close()


def populate(off: Offloader) -> dict[str, list[tuple[Position, bytes]]]:
    """Three topics (one with a hashed name), their closed ledgers offloaded; what each topic's
    offloaded ledgers hold, position by position."""
    for topic in TOPICS:
        ns = TopicName.parse(topic).namespace
        if ns not in {n.name for n in off.list_namespaces()}:
            off.create_namespace(ns)
        off.produce(topic, payloads(17, size=300, tag=topic[-3:]))
        off.roll_over(topic)
        off.offload_prefix(topic, size_threshold=0)
    return {topic: offloaded_entries(off, topic) for topic in TOPICS}


def offloaded_entries(off: Offloader, topic: str) -> list[tuple[Position, bytes]]:
    done = {r.ledger_id for r in off.topic_info(topic).ledgers if r.offload_complete}
    return [
        (Position(e.ledger_id, e.entry_id), e.payload)
        for e in off.read(topic)
        if e.ledger_id in done
    ]


def keys(off: Offloader) -> list[str]:
    return sorted(info.key for info in off.runtime.store.list())


def test_lose_the_home_lose_nothing(make: Make, tmp_path: Path) -> None:
    old = make("home")
    before = populate(old)
    assert all(len(v) == 17 for v in before.values())  # ledgers of 5, 5, 5 and 2 entries
    listed = keys(old)
    markers = [k for k in listed if k.startswith(LEDGER_MARKERS)]
    assert len(markers) == 12
    assert sum(parse_ledger_marker_key(k).hashed for k in markers) == 4
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    dry = new.metadata_rebuild(dry_run=True)
    assert dry.count("offload") == 12 and new.list_topics() == []  # a dry run writes nothing
    report = new.metadata_rebuild()
    assert report.count("offload") == 12 and report.count("problem") == 0
    # one listing; one GET (the hashed name's marker body); never a HEAD, never data
    assert report.requests == {"list": 1, "list_multipart_uploads": 1, "get": 1}
    assert sorted(new.list_topics()) == sorted(TOPICS)
    for topic in TOPICS:
        info = new.topic_info(topic)
        assert all(r.offload_complete and r.local_deleted for r in info.ledgers)
        assert offloaded_entries(new, topic) == before[topic]
    assert all(r.ok for r in new.verify(checksums=True))
    orphans = new.orphans(min_age_seconds=0)
    assert not orphans.objects and not orphans.uploads and not orphans.missing

    # a resumed offload continues after the rebuilt ledgers, never re-uploading them
    rebuilt_data = {k for k in keys(new) if not k.startswith("_") and not k.endswith("-index")}
    top = max(r.ledger_id for t in TOPICS for r in new.topic_info(t).ledgers)
    new.produce(T1, payloads(6, size=300, tag="again"))
    new.roll_over(T1)
    new.offload_prefix(T1, size_threshold=0)
    now_data = {k for k in keys(new) if not k.startswith("_") and not k.endswith("-index")}
    added = now_data - rebuilt_data
    assert rebuilt_data <= now_data and added
    assert all(parse_key(k).ledger_id > top for k in added)
    watermarks = [k for k in keys(new) if k.startswith(WATERMARKS) and "t1/" in k]
    assert max(int(w.rsplit("/", 1)[1][:20]) for w in watermarks) > top

    with pytest.raises(RebuildRefused, match="--merge"):
        new.metadata_rebuild()
    planned = new.metadata_rebuild(merge=True, dry_run=True)
    assert planned.count("offload") == 0 and planned.count("present") == 14
    merged = new.metadata_rebuild(merge=True)
    assert merged.count("offload") == 0 and merged.count("conflict") == 0
    assert merged.count("present") == 14  # 12 rebuilt, 2 offloaded since


def copy_object(off: Offloader, src: str, dst: str) -> None:
    store = off.runtime.store
    got = store.get(src)
    store.put(dst, got.data, dict(got.metadata))


def test_two_copies_unfinished_attempts_and_orphans(make: Make, tmp_path: Path) -> None:
    old = make("home")
    old.create_namespace("public/default")
    old.produce(T1, payloads(10, size=300))
    old.roll_over(T1)
    old.offload_prefix(T1, size_threshold=0)
    rt = old.runtime
    ledger = rt.meta.list_ledgers(T1)[0]
    context = ledger.offload
    assert context is not None
    marker = next(
        parse_ledger_marker_key(k).marker
        for k in keys(old)
        if k.startswith(LEDGER_MARKERS) and f"{ledger.ledger_id:020d}." in k
    )
    assert marker is not None
    # a second finished copy of ledger 0 (a second uploader): data, index, then its marker
    second = str(uuid.UUID(int=0))  # the lowest UUID: kept unless the watermark names another
    copy_object(old, context.data_key, data_key(second, 0))
    copy_object(old, context.index_key, index_key(second, 0))
    write_ledger_marker(rt.store, marker.__class__(**{**marker.__dict__, "uuid": second}), "x")
    # an unfinished attempt of ledger 1: a data object and a multipart upload, no marker
    unfinished = str(uuid.uuid4())
    ours = object_user_metadata(ROLE_DATA, software_version=rt.broker.offload.software_version)
    rt.store.put(data_key(unfinished, 1), b"half", ours)
    upload = rt.store.create_multipart_upload(data_key(unfinished, 1), ours)
    rt.store.upload_part(data_key(unfinished, 1), upload, 1, b"part", crc32c(b"part"))
    # an attempt of a ledger no marker names: an orphan for the audit
    lost = str(uuid.uuid4())
    rt.store.put(data_key(lost, 77), b"lost", ours)
    expected = offloaded_entries(old, T1)
    old.close()
    shutil.rmtree(tmp_path / "home")

    new = make("new-home")
    report = new.metadata_rebuild()
    by_action = {
        a: [i for i in report.items if i.action == a]
        for a in ("superseded", "unfinished", "orphan")
    }
    # the watermark object names ledger 1's copy, not ledger 0's: the lowest UUID is kept
    assert [(i.ledger_id, i.uuid) for i in by_action["superseded"]] == [(0, context.uuid)]
    assert [(i.ledger_id, i.uuid) for i in by_action["unfinished"]] == [(1, unfinished)]
    assert [(i.ledger_id, i.uuid) for i in by_action["orphan"]] == [(77, lost)]
    records = new.topic_info(T1).ledgers
    assert records[0].offload is not None and records[0].offload.uuid == second
    assert offloaded_entries(new, T1) == expected
    audit = new.orphans(min_age_seconds=0)
    reasons = {(o.key, o.reason, o.deletable) for o in audit.objects}
    assert (data_key(context.uuid, 0), "superseded-attempt", True) in reasons
    assert (data_key(unfinished, 1), "superseded-attempt", True) in reasons
    assert (data_key(lost, 77), "unclaimed-uuid", False) in reasons
    superseded_marker = [o for o in audit.objects if o.key.startswith(LEDGER_MARKERS)]
    assert [(context.uuid in o.key, o.deletable) for o in superseded_marker] == [(True, True)]
    assert [u.key for u in audit.uploads] == [data_key(unfinished, 1)]
    new.gc(min_age_seconds=0)
    left = keys(new)
    # nothing of the superseded and unfinished attempts is left but the watermark keys of past
    # positions, which are kept (spec/bucket-manifests.md §3)
    assert not any(
        context.uuid in k or unfinished in k for k in left if not k.startswith(WATERMARKS)
    )
    assert data_key(lost, 77) in left  # not provably ours: reported, left alone
    assert offloaded_entries(new, T1) == expected
    assert all(r.ok for r in new.verify(checksums=True))


def test_a_marker_without_its_objects_is_a_problem_not_a_record(make: Make, tmp_path: Path) -> None:
    old = make("home")
    old.create_namespace("public/default")
    old.produce(T1, payloads(10, size=300))
    old.roll_over(T1)
    old.offload_prefix(T1, size_threshold=0)
    gone = old.topic_info(T1).ledgers[1].offload
    assert gone is not None
    old.runtime.store.delete(gone.data_key)  # lost out of band
    changed = old.topic_info(T1).ledgers[0].offload
    assert changed is not None
    old.runtime.store.put(changed.index_key, b"another index", {})  # replaced out of band
    old.close()
    shutil.rmtree(tmp_path / "home")
    new = make("new-home")
    report = new.metadata_rebuild()
    problems = [i for i in report.items if i.action == "problem"]
    assert [(p.ledger_id, p.uuid) for p in problems] == [(0, changed.uuid), (1, gone.uuid)]
    assert "is 13 bytes, the marker says" in problems[0].detail
    assert f"{gone.data_key} missing" in problems[1].detail
    assert new.list_topics() == [T1] and not new.topic_info(T1).ledgers


def test_topics_filter_then_merge(make: Make, tmp_path: Path) -> None:
    old = make("home")
    before = populate(old)
    old.close()
    shutil.rmtree(tmp_path / "home")
    new = make("new-home")
    first = new.metadata_rebuild(topics=r"persistent://public/default/t\d")
    assert new.list_topics() == [T1] and first.count("offload") == 4
    second = new.metadata_rebuild(merge=True)
    assert second.count("present") == 4 and second.count("offload") == 8
    assert sorted(new.list_topics()) == sorted(TOPICS)
    for topic in TOPICS:
        assert offloaded_entries(new, topic) == before[topic]


def test_deleting_ledgers_and_topics_deletes_their_manifests(make: Make) -> None:
    off = make("home")
    off.create_namespace("public/default")
    off.produce(T1, payloads(15, size=300))
    off.roll_over(T1)
    off.offload_prefix(T1, size_threshold=0)
    off.set_retention("public/default", 1, 0)  # keep nearly nothing
    trimmed = off.apply_retention(T1)
    assert trimmed
    markers = [
        parse_ledger_marker_key(k).ledger_id for k in keys(off) if k.startswith(LEDGER_MARKERS)
    ]
    assert not set(trimmed) & set(markers)
    assert any(k.startswith(WATERMARKS) for k in keys(off))  # the highest finished stays
    off.delete_topic(T1)
    assert not [k for k in keys(off) if k.startswith("_offloader/")]


@pytest.mark.parametrize("store_url", ["file"], indirect=True)
def test_rebuild_into_postgresql_after_dropping_it(
    make: Callable[..., Offloader], tmp_path: Path, pg_server: object
) -> None:
    import psycopg

    url = pg_server.new_url()  # type: ignore[attr-defined]
    old = make("home", url)
    before = populate(old)
    old.close()
    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(pg_server.admin_url(), autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())
    shutil.rmtree(tmp_path / "home")
    fresh = pg_server.new_url()  # type: ignore[attr-defined]
    new = make("new-home", fresh)
    report = new.metadata_rebuild()
    assert report.count("offload") == 12
    for topic in TOPICS:
        assert offloaded_entries(new, topic) == before[topic]
    assert all(r.ok for r in new.verify(checksums=True))
    with pytest.raises(RebuildRefused):
        make("another-home", fresh).metadata_rebuild()
