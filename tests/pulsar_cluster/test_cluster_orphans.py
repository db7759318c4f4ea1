"""``offloader --pulsar-metadata URL objects orphans|gc`` against a real ZooKeeper and a moto
bucket: every kind of leftover classified, gc deleting only what no ManagedLedgerInfo
references, and a metadata store it cannot read stopping it before any deletion."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kazoo.security import make_digest_acl

from devservers.endpoint import S3Endpoint
from devservers.zookeeper import ZkServer
from formats.keys import data_key
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.pulsar_cluster.cluster_writer import ClusterWriter
from tests.pulsar_cluster.scenario import U_SLOW_500, U_UPLOAD_901, Scenario, build

pytestmark = pytest.mark.zookeeper

DELETABLE = {"superseded-attempt", "ledger-gone", "topic-deleted"}


@pytest.fixture()
def scenario(
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> Scenario:
    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return build(cluster, moto_endpoint, zk_server.url(cluster.chroot))


def _keys(sc: Scenario) -> set[str]:
    s3 = sc.endpoint.client()
    return {o["Key"] for o in s3.list_objects_v2(Bucket=sc.bucket).get("Contents", [])}


def _uploads(sc: Scenario) -> set[str]:
    s3 = sc.endpoint.client()
    return {u["UploadId"] for u in s3.list_multipart_uploads(Bucket=sc.bucket).get("Uploads", [])}


def test_orphans_classifies_every_leftover(tmp_path: Path, scenario: Scenario) -> None:
    out = ok(
        tmp_path,
        "--json",
        "--pulsar-metadata",
        scenario.url,
        "objects",
        "orphans",
        "--min-age",
        "0s",
    )
    (report,) = json_lines(out)
    got = {o["key"]: o["reason"] for o in report["objects"]}
    assert got == scenario.orphan_keys
    assert not got.keys() & scenario.referenced_keys
    assert report["store"] == f"s3://{scenario.bucket}"
    assert report["topics"] == 4
    assert report["listed_objects"] == len(scenario.referenced_keys) + len(scenario.orphan_keys)
    uploads = {u["key"]: (u["reason"], u["deletable"]) for u in report["uploads"]}
    # the running offload's upload is referenced; the stray one is not
    assert uploads == {data_key(U_UPLOAD_901, 901): ("unfinished-upload", True)}
    assert data_key(U_SLOW_500, 500) not in uploads
    for o in report["objects"]:
        assert o["deletable"] == (o["reason"] in DELETABLE)
        assert o["monthly_cost"] == pytest.approx(o["size"] / 2**30 * 0.023, abs=1e-6)
        assert o["age_seconds"] is not None and o["age_seconds"] < 600
    deleted_topic = next(o for o in report["objects"] if o["reason"] == "topic-deleted")
    assert deleted_topic["managed_ledger"] == "public/default/persistent/deleted"
    orphan_bytes = sum(o["size"] for o in report["objects"] if o["reason"] != "not-an-offload-key")
    assert report["orphan_bytes"] == orphan_bytes
    text = ok(
        tmp_path,
        "--pulsar-metadata",
        scenario.url,
        "objects",
        "orphans",
        "--min-age",
        "0s",
        "--price-per-gb-month",
        "1.5",
    ).stdout
    assert "superseded-attempt" in text and "at $1.5/GB-month" in text


def test_young_objects_are_not_orphans(tmp_path: Path, scenario: Scenario) -> None:
    out = ok(tmp_path, "--json", "--pulsar-metadata", scenario.url, "objects", "orphans")
    (report,) = json_lines(out)  # default min age: 1h
    assert report["objects"] == []
    # (moto dates every multipart upload's Initiated years back: uploads are always old there)
    assert [u["key"] for u in report["uploads"]] == [data_key(U_UPLOAD_901, 901)]


def test_gc_deletes_only_what_no_managed_ledger_references(
    tmp_path: Path, scenario: Scenario
) -> None:
    before = _keys(scenario)
    base = ("--json", "--pulsar-metadata", scenario.url, "objects", "gc", "--min-age", "0s")
    (dry,) = json_lines(ok(tmp_path, *base, "--dry-run"))
    would = {k for k, r in scenario.orphan_keys.items() if r in DELETABLE}
    assert set(dry["deleted"]) == would and dry["dry_run"]
    assert _keys(scenario) == before  # a dry run deletes nothing
    (done,) = json_lines(ok(tmp_path, *base))
    assert set(done["deleted"]) == would
    assert done["aborted"] == [data_key(U_UPLOAD_901, 901)]
    after = _keys(scenario)
    assert after == before - would
    assert scenario.referenced_keys <= after
    assert _uploads(scenario) == {scenario.running_upload_id}
    # what remains is still readable
    rows = json_lines(
        ok(tmp_path, "--json", "--pulsar-metadata", scenario.url, "topics", "read", "orders")
    )
    assert len(rows) == 100 + 3000
    # objects of a managed ledger the cluster does not have go only when told
    unknown = {k for k, r in scenario.orphan_keys.items() if r == "unknown-managed-ledger"}
    assert unknown <= after
    (forced,) = json_lines(ok(tmp_path, *base, "--include-unknown"))
    assert set(forced["deleted"]) == unknown
    assert _keys(scenario) == after - unknown
    assert "README.txt" in _keys(scenario)


def test_gc_needs_min_age_and_include_unknown_needs_a_cluster(
    tmp_path: Path, scenario: Scenario
) -> None:
    result = run(tmp_path, "--pulsar-metadata", scenario.url, "objects", "gc")
    assert result.exit_code == 2 and "--min-age" in result.stderr
    result = run(tmp_path, "objects", "gc", "--include-unknown")
    assert result.exit_code == 2 and "--pulsar-metadata" in result.stderr


def test_a_metadata_store_it_cannot_read_stops_gc(
    tmp_path: Path, scenario: Scenario, cluster: ClusterWriter
) -> None:
    before = _keys(scenario)
    path = f"{cluster.chroot}/managed-ledgers/public/default/persistent/locked"
    cluster.client.create(path, b"", acl=[make_digest_acl("someone", "else", all=True)])
    line = one_line_error(
        run(tmp_path, "--pulsar-metadata", scenario.url, "objects", "gc", "--min-age", "0s")
    )
    assert f"{path}: access denied" in line
    assert _keys(scenario) == before
    assert _uploads(scenario) == {scenario.running_upload_id, scenario.upload_id}


def test_an_offload_begun_during_the_listing_is_not_an_orphan(
    tmp_path: Path, zk_server: ZkServer, cluster: ClusterWriter
) -> None:
    """The audit reads the metadata beside the listing; the candidates' managed ledgers are
    read again after it, so a ledger whose offload a broker recorded meanwhile (the UUID in its
    offload context before the upload) is seen as referenced."""
    from formats.keys import index_key
    from formats.pulsar.managed_ledger_info import ManagedLedgerInfo
    from offloader.offload import cluster_orphans as co
    from offloader.pulsar_cluster import open_cluster_source
    from offloader.store import open_store
    from tests.pulsar_cluster.cluster_writer import offloaded
    from tests.pulsar_cluster.scenario import pulsar_metadata

    topic, ml = "persistent://public/default/t", "public/default/persistent/t"
    old, new, gone = (
        "11111111-0000-4000-8000-000000000001",
        "22222222-0000-4000-8000-000000000002",
        "33333333-0000-4000-8000-000000000003",
    )
    cluster.put_topic(topic, ManagedLedgerInfo((offloaded(1, old),)))
    store = open_store(f"file://{tmp_path / 'bucket'}")
    for uid, lid in ((old, 1), (new, 2), (gone, 3)):
        store.put(data_key(uid, lid), b"d", pulsar_metadata("data", ml))
        store.put(index_key(uid, lid), b"i", pulsar_metadata("index", ml))
    with open_cluster_source(zk_server.url(cluster.chroot)) as source:
        refs = co.read_references(source)  # what the read beside the listing saw
        audit = co.ClusterAudit(store.url, source.location, 0)
        for uid, lid in ((new, 2), (gone, 3)):
            for key in (data_key(uid, lid), index_key(uid, lid)):
                audit.objects.append(co.ClusterOrphan(key, 1, co.LEDGER_GONE, 0, uid, lid, ml))
        # meanwhile the broker starts offloading ledger 2 under `new`
        cluster.put_topic(
            topic, ManagedLedgerInfo((offloaded(1, old), offloaded(2, new, complete=False)))
        )
        co._recheck(source, refs, audit)
        assert {(o.uuid, o.ledger_id) for o in audit.objects} == {(gone, 3)}
        later = int(time.time() * 1000) + 1000
        full = co.audit_cluster_bucket(source, store, min_age_ms=0, now_ms=lambda: later)
    assert {o.key for o in full.objects} == {data_key(gone, 3), index_key(gone, 3)}
    assert {o.reason for o in full.objects} == {co.LEDGER_GONE}
