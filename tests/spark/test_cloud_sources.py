"""The ``offloaded-ledger`` Spark source (real PySpark, local[2]) over ledgers offloaded to
``gs://`` (fake-gcs-server) and ``az://`` (Azurite), and ``kafka-segments`` over a Kafka tier
there: executors open the store from the source's
options with credentials from their environment (``STORAGE_EMULATOR_HOST``,
``AZURE_STORAGE_CONNECTION_STRING``), never from the plan."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from formats.kafka.batch import iter_records
from offloader.api import KafkaSettings, Offloader, Position
from offloader.spark import register
from tests.cloud_env import cloud_root
from tests.kafka.logdir import write_partition

pytestmark = pytest.mark.spark

TOPIC = "persistent://public/default/clouds"


@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_offloaded_ledger_source_on_each_cloud(
    spark: Any,
    cloud: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the local executors inherit the environment cloud_root sets
    store = cloud_root(cloud, request, monkeypatch) + "/offload"
    payloads = [f"entry-{i}".encode() * (i % 7 + 1) for i in range(400)]
    home = tmp_path / "home"
    with Offloader.from_settings(home, store) as off:
        off.create_namespace("public/default")
        off.produce(TOPIC, payloads[:200])
        off.roll_over(TOPIC)
        off.produce(TOPIC, payloads[200:])
        off.roll_over(TOPIC)
        off.offload_prefix(TOPIC, position=Position(2, 0))
        offloaded = [r for r in off.runtime.meta.list_ledgers(TOPIC) if r.offload is not None]
        assert [r.ledger_id for r in offloaded] == [0, 1]
        for r in offloaded:  # read from the cloud only
            off.runtime.ledgers.delete_ledger(TOPIC, r.ledger_id)
    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("home", str(home))
        .option("store", store)
        .option("topics", TOPIC)
        .load()
    )
    rows = sorted((r["ledger_id"], r["entry_id"], bytes(r["payload"])) for r in df.collect())
    assert [hashlib.sha256(p).hexdigest() for _, _, p in rows] == [
        hashlib.sha256(p).hexdigest() for p in payloads
    ]


@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_kafka_segments_source_on_each_cloud(
    spark: Any,
    cloud: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kafka-segments`` over a Kafka tier on the cloud: the executors open the store from the
    ``store`` option, with the cloud's credentials from their environment."""
    store = cloud_root(cloud, request, monkeypatch) + "/k"
    root = tmp_path / "logs"
    layout = write_partition(root, "orders", 0, records=400)
    home = tmp_path / "home"
    with Offloader.from_settings(home, store) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
    expected = sorted(
        (
            (r.offset, r.value)
            for base, _ in layout.segments[:-1]
            for h, r in iter_records((layout.path / f"{base:020d}.log").read_bytes())
            if not h.is_control
        ),
        key=lambda row: row[0],
    )
    assert expected
    register(spark)
    df = spark.read.format("kafka-segments").option("home", str(home)).option("store", store)
    rows = df.load().select("offset", "value").collect()
    got = [(r["offset"], None if r["value"] is None else bytes(r["value"])) for r in rows]
    assert sorted(got, key=lambda row: row[0]) == expected
