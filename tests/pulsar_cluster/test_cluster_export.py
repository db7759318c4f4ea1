"""``offloader --pulsar-metadata URL export run``: a real cluster's topic to Parquet exactly
once (the local engine: the same tasks without a JVM), up to the last offloaded ledger, the
watermark keyed by the cluster and the topic."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devservers.endpoint import S3Endpoint
from devservers.zookeeper import ZkServer
from formats.pulsar.encode import OutgoingMessage, encode_entry
from formats.pulsar.managed_ledger_info import LedgerInfo, ManagedLedgerInfo
from offloader.export.naming import topic_dir
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.pulsar_cluster.cluster_writer import ClusterWriter, offloaded, plain
from tests.spark.conftest import upload_ledger

pytestmark = pytest.mark.zookeeper
TOPIC = "persistent://public/default/metrics"
ML = "public/default/persistent/metrics"


def _entries(lid: int) -> list[bytes]:
    return [
        encode_entry(
            [OutgoingMessage(f"{lid}-{i}".encode())],
            producer_name="p",
            sequence_id=i,
            publish_time=1_700_000_000_000 + lid * 1000 + i,
            batch=False,
        )
        for i in range(5)
    ]


def _offload(endpoint: S3Endpoint, bucket: str, lid: int) -> LedgerInfo:
    up = upload_ledger(endpoint, bucket, lid, _entries(lid), 4096, managed_ledger_name=ML)
    return offloaded(lid, up.uuid, entries=5, bucket=bucket, endpoint=endpoint.url)


def _rows(lake: Path) -> list[tuple[int, int]]:
    out = []
    for path in sorted(lake.rglob("*.parquet")):
        table = pq.read_table(path)
        out.extend(zip(table["ledger_id"].to_pylist(), table["entry_id"].to_pylist(), strict=True))
    return sorted(out)


def test_export_run_of_a_cluster_topic_exactly_once(
    tmp_path: Path,
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = moto_endpoint.new_bucket()
    first = [_offload(moto_endpoint, bucket, 30), _offload(moto_endpoint, bucket, 31)]
    later = _offload(moto_endpoint, bucket, 33)
    cluster.put_topic(TOPIC, ManagedLedgerInfo((*first, plain(32, entries=5), later)))
    url = zk_server.url(cluster.chroot)
    lake = tmp_path / "lake"
    home = tmp_path / "home"
    args = ("--json", "--pulsar-metadata", url, "export", "run", "metrics", "--to", str(lake))
    (report,) = json_lines(ok(home, *args, "--engine", "local"))
    # ledger 32 is only in BookKeeper: the run stops before it, not past it
    assert report["topic"] == TOPIC
    assert report["rows"] == 10 and report["watermark"] == [31, 4]
    assert _rows(lake) == [(lid, i) for lid in (30, 31) for i in range(5)]
    # under the real topic's directory, as for the project's own topics
    assert {p.relative_to(lake).parts[0] for p in lake.rglob("*.parquet")} == {topic_dir(TOPIC)}
    (again,) = json_lines(ok(home, *args, "--engine", "local"))
    assert again["rows"] == 0 and again["watermark"] == [31, 4]
    # the broker offloads ledger 32: the next run exports 32 and 33, nothing twice
    cluster.put_topic(
        TOPIC, ManagedLedgerInfo((*first, _offload(moto_endpoint, bucket, 32), later))
    )
    (third,) = json_lines(ok(home, *args, "--engine", "local"))
    assert third["rows"] == 10 and third["previous"] == [31, 4] and third["watermark"] == [33, 4]
    assert _rows(lake) == [(lid, i) for lid in (30, 31, 32, 33) for i in range(5)]


def test_export_status_and_reset_of_a_cluster_topic(
    tmp_path: Path,
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = moto_endpoint.new_bucket()
    ledgers = (_offload(moto_endpoint, bucket, 30), _offload(moto_endpoint, bucket, 31))
    cluster.put_topic(TOPIC, ManagedLedgerInfo((*ledgers, plain(32, entries=7))))
    url = zk_server.url(cluster.chroot)
    lake, home = tmp_path / "lake", tmp_path / "home"
    base = ("--json", "--pulsar-metadata", url, "export")
    ok(home, *base, "run", "metrics", "--to", str(lake), "--engine", "local")
    (status,) = json_lines(ok(home, *base, "status", "metrics", "--to", str(lake)))
    assert status["topic"] == TOPIC and status["watermark"] == [31, 4]
    assert status["rows"] == 10 and status["lag_entries"] == 7  # ledger 32, in BookKeeper
    assert status["last_closed"] == [31, 4]  # the last entry an export can reach now
    # a watermark of this home's own topic of the same name is another stream
    own = one_line_error(run(home, "export", "status", "metrics", "--to", str(lake)))
    assert "metrics" in own
    (reset,) = json_lines(
        ok(home, *base, "reset", "metrics", "--target", str(lake), "--to", "31:0")
    )
    assert reset["topic"] == TOPIC and reset["watermark"] == [31, -1] and reset["removed"]
    assert _rows(lake) == [(30, i) for i in range(5)]
    (again,) = json_lines(ok(home, *base, "run", "metrics", "--to", str(lake), "--engine", "local"))
    assert again["previous"] == [31, -1] and again["rows"] == 5 and again["watermark"] == [31, 4]
    assert _rows(lake) == [(lid, i) for lid in (30, 31) for i in range(5)]


def test_export_run_of_a_cluster_topic_to_iceberg_exactly_once(
    tmp_path: Path,
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = moto_endpoint.new_bucket()
    first = [_offload(moto_endpoint, bucket, 30), _offload(moto_endpoint, bucket, 31)]
    cluster.put_topic(TOPIC, ManagedLedgerInfo((*first, plain(32, entries=5))))
    url = zk_server.url(cluster.chroot)
    home = tmp_path / "home"
    args = ("--json", "--pulsar-metadata", url, "export", "run", "metrics")
    table = ("--to", "iceberg://lake.metrics", "--engine", "local")
    (report,) = json_lines(ok(home, *args, *table))
    assert report["topic"] == TOPIC and report["rows"] == 10 and report["watermark"] == [31, 4]
    (again,) = json_lines(ok(home, *args, *table))
    assert again["rows"] == 0 and again["watermark"] == [31, 4]
    cluster.put_topic(TOPIC, ManagedLedgerInfo((*first, _offload(moto_endpoint, bucket, 32))))
    (third,) = json_lines(ok(home, *args, *table))
    assert third["previous"] == [31, 4] and third["rows"] == 5 and third["watermark"] == [32, 4]
    import pyarrow.parquet as pq_

    files = sorted(home.rglob("*.parquet"))
    rows = sorted(
        (lid, eid)
        for f in files
        for lid, eid in zip(
            pq_.read_table(f)["ledger_id"].to_pylist(),
            pq_.read_table(f)["entry_id"].to_pylist(),
            strict=True,
        )
    )
    assert rows == [(lid, i) for lid in (30, 31, 32) for i in range(5)]
    assert {t for f in files for t in pq_.read_table(f)["topic"].to_pylist()} == {TOPIC}


def test_export_status_and_reset_of_a_cluster_topic_in_iceberg(
    tmp_path: Path,
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.iceberg.helpers import scan

    for name, value in moto_endpoint.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = moto_endpoint.new_bucket()
    ledgers = (_offload(moto_endpoint, bucket, 30), _offload(moto_endpoint, bucket, 31))
    cluster.put_topic(TOPIC, ManagedLedgerInfo((*ledgers, plain(32, entries=7))))
    url = zk_server.url(cluster.chroot)
    home = tmp_path / "home"
    base = ("--json", "--pulsar-metadata", url, "export")
    table = "iceberg://lake.metrics"
    run_args = ("run", "metrics", "--to", table, "--engine", "local")
    ok(home, *base, *run_args)
    (status,) = json_lines(ok(home, *base, "status", "metrics", "--to", table))
    assert status["topic"] == TOPIC and status["watermark"] == [31, 4]
    assert status["total_records"] == 10 and status["lag_entries"] == 7  # 32: in BookKeeper
    assert status["last_closed"] == [31, 4]
    # this home's own topic of the same name is another stream
    own = one_line_error(run(home, "export", "status", "metrics", "--to", table))
    assert "metrics" in own
    # a reset inside ledger 31: rows 31:2.. deleted (the file holding 31:0..4 rewritten)
    (reset,) = json_lines(ok(home, *base, "reset", "metrics", "--target", table, "--to", "31:2"))
    assert reset["topic"] == TOPIC and reset["previous"] == [31, 4]
    assert reset["watermark"] == [31, 1] and reset["removed_rows"] == 3

    def ids(location: str) -> list[tuple[int, int]]:
        rows = scan(location, "ledger_id, entry_id", "ORDER BY 1, 2")
        return [(int(a), int(b)) for a, b in rows]

    assert ids(reset["metadata_location"]) == [(30, i) for i in range(5)] + [(31, 0), (31, 1)]
    (after,) = json_lines(ok(home, *base, "status", "metrics", "--to", table))
    assert after["watermark"] == [31, 1] and after["lag_entries"] == 3 + 7
    assert after["publish_time"] is not None
    # the next run exports exactly the rows removed, once
    (again,) = json_lines(ok(home, *base, *run_args))
    assert again["previous"] == [31, 1] and again["rows"] == 3 and again["watermark"] == [31, 4]
    assert ids(again["metadata_location"]) == [(lid, i) for lid in (30, 31) for i in range(5)]
    # a reset by time: every row published at or after ledger 31's first message
    (by_time,) = json_lines(
        ok(home, *base, "reset", "metrics", "--target", table, "--to", str(1_700_000_031_000))
    )
    assert by_time["watermark"] == [31, -1] and by_time["removed_rows"] == 5
    assert ids(by_time["metadata_location"]) == [(30, i) for i in range(5)]
    (third,) = json_lines(ok(home, *base, *run_args))
    assert third["rows"] == 5 and third["watermark"] == [31, 4]
    assert ids(third["metadata_location"]) == [(lid, i) for lid in (30, 31) for i in range(5)]
    # the watermark of a topic never exported, and of another cluster: refused by name
    other = ("--json", "--pulsar-metadata", "zk:elsewhere:2181", "export")
    err = one_line_error(run(home, *other, "reset", "metrics", "--target", table, "--to", "30:0"))
    assert "metrics" in err and "never exported" in err
