"""``offloader --pulsar-metadata URL topics read TOPIC --decode pulsar``: a real cluster's
topic decoded as Pulsar messages (ZooKeeper from Debian, the objects on moto over HTTP), from a
position across the managed ledger's offloaded ledgers, at most ``--count`` messages."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from devservers.endpoint import S3Endpoint
from devservers.zookeeper import ZkServer
from formats.pulsar.encode import OutgoingMessage, encode_entry
from formats.pulsar.managed_ledger_info import ManagedLedgerInfo
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.pulsar_cluster.cluster_writer import ClusterWriter, offloaded, plain
from tests.spark.conftest import upload_ledger

pytestmark = [pytest.mark.zookeeper, pytest.mark.s3]

TOPIC = "persistent://public/default/metrics"


def _entries(ledger: int, n: int) -> list[bytes]:
    """``n`` entries, each a batch of two messages ``L<ledger>-<i>-a|b`` keyed ``k<i>``."""
    return [
        encode_entry(
            [
                OutgoingMessage(f"L{ledger}-{i}-a".encode(), key=f"k{i}"),
                OutgoingMessage(f"L{ledger}-{i}-b".encode(), key=f"k{i}"),
            ],
            producer_name="p",
            sequence_id=i,
            publish_time=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]


@pytest.fixture()
def metrics(
    zk_server: ZkServer,
    cluster: ClusterWriter,
    moto_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    for key, value in moto_endpoint.env().items():
        if key != "AWS_ENDPOINT_URL":  # the driver metadata names the endpoint
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    bucket = moto_endpoint.new_bucket()
    items = []
    for lid in (7, 8):
        up = upload_ledger(
            moto_endpoint,
            bucket,
            lid,
            _entries(lid, 4),
            512,
            managed_ledger_name="public/default/persistent/metrics",
        )
        items.append(offloaded(lid, up.uuid, entries=4, bucket=bucket, endpoint=moto_endpoint.url))
    items.append(plain(9, entries=3))  # still in BookKeeper: not read
    cluster.put_topic(TOPIC, ManagedLedgerInfo(tuple(items)))
    return zk_server.url(cluster.chroot)


def test_decode_pulsar_from_a_position_across_ledgers(tmp_path: Path, metrics: str) -> None:
    base = ("--json", "--pulsar-metadata", metrics, "topics", "read", "metrics")
    rows = json_lines(ok(tmp_path, *base, "--decode", "pulsar", "--from", "7:3", "--count", "3"))
    values = [base64.b64decode(r["value_b64"]).decode() for r in rows]
    assert [(r["ledger_id"], r["entry_id"], v) for r, v in zip(rows, values, strict=True)] == [
        (7, 3, "L7-3-a"),
        (7, 3, "L7-3-b"),
        (8, 0, "L8-0-a"),
    ]
    assert [r["key"] for r in rows] == ["k3", "k3", "k0"]
    every = json_lines(ok(tmp_path, *base, "--decode", "pulsar"))
    assert len(every) == 2 * 2 * 4  # two offloaded ledgers of four entries of two messages
    text = ok(
        tmp_path, "--pulsar-metadata", metrics, "topics", "read", "metrics", "--decode", "pulsar"
    )
    assert text.stdout.splitlines()[0].startswith("MESSAGE_ID")
    assert "L8-3-b" in text.stdout


def test_decode_pulsar_refuses_payload_and_names_a_bad_position(
    tmp_path: Path, metrics: str
) -> None:
    base = ("--pulsar-metadata", metrics, "topics", "read", "metrics", "--decode", "pulsar")
    result = run(tmp_path, *base, "--payload")
    assert result.exit_code == 2 and "--payload does not apply" in result.stderr
    assert "ledger 9 is not offloaded" in one_line_error(run(tmp_path, *base, "--from", "9:0"))
