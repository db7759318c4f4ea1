"""Reading topics through the metadata store: each ledger from whichever tier holds it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from devservers.endpoint import S3Endpoint
from formats.extension import crc32c
from formats.keys import data_key, index_key
from offloader.config import OffloadSettings
from offloader.ledgers import LedgerStore
from offloader.metadata import open_metadata_store
from offloader.metadata.base import DriverMetadata
from offloader.selection import TopicSelection
from offloader.spark import offloaded_rdd, register
from offloader.spark.plan import LocalLedgerTask, plan_topics
from offloader.spark.rdd import plan as rdd_plan
from offloader.spark.tasks import read_open_entries
from tests.spark.conftest import TOPIC_A, TOPIC_B, payloads_of, records_digest, sha, upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]
NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def home(s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two topics; on each, one offloaded ledger (local copy deleted), one offloaded ledger
    whose local copy is still there, one closed ledger only local, and an open ledger (read up
    to the entry count of its metadata: 3 entries appended after that are not read)."""
    root = tmp_path_factory.mktemp("home")
    bucket = s3_endpoint.new_bucket()
    ledgers = LedgerStore(root)
    meta = open_metadata_store(root)
    expected = []
    opened = []  # the open ledgers' writers, left open (their files keep the writer's lock)
    meta.create_namespace("public/default", NOW)
    for topic, ml_name in (TOPIC_A, TOPIC_B):
        meta.create_topic(topic, NOW)
        for kind in ("offloaded", "offloaded-local-kept", "local", "open"):
            lid = meta.allocate_ledger_id()
            meta.add_ledger(topic, lid, NOW)
            payloads = payloads_of(lid, 120, 0, 300, empty_every=7)
            writer = ledgers.create_ledger(topic, lid)
            for p in payloads:
                writer.append(p)
            if kind == "open":
                meta.update_ledger_stats(lid, len(payloads), sum(map(len, payloads)))
                for extra in payloads_of(lid + 100, 3, 1, 50):  # appended, not counted yet
                    writer.append(extra)
                writer.flush()
                expected += [(topic, lid, i, sha(p)) for i, p in enumerate(payloads)]
                opened.append(writer)
                continue
            writer.close()
            meta.close_ledger(lid, NOW, len(payloads), sum(map(len, payloads)))
            expected += [(topic, lid, i, sha(p)) for i, p in enumerate(payloads)]
            if kind == "local":
                continue
            up = upload_ledger(
                s3_endpoint, bucket, lid, payloads, 2048, managed_ledger_name=ml_name
            )
            driver = DriverMetadata(
                "aws-s3", {"store_url": f"s3://{bucket}", "endpoint": s3_endpoint.url}
            )
            meta.begin_offload(
                lid,
                up.uuid,
                driver,
                NOW,
                data_key=data_key(up.uuid, lid),
                index_key=index_key(up.uuid, lid),
            )
            meta.complete_offload(
                lid,
                up.uuid,
                NOW,
                data_size=up.blocks[-1][3],
                index_size=len(up.index),
                index_crc32c=crc32c(up.index),
            )
            if kind == "offloaded":
                meta.mark_local_deleted(lid, up.uuid)
                ledgers.delete_ledger(topic, lid)  # only the object store has it now
    meta.close()
    return {"home": str(root), "expected": sorted(expected), "writers": opened}


def test_topics_read_completely_across_tiers(
    spark: Any, home: dict[str, Any], aws_env: S3Endpoint
) -> None:
    settings = OffloadSettings(max_block_size=8 * 1024, enforce_min_block_size=False)
    rdd = offloaded_rdd(spark.sparkContext, [TOPIC_A[0], TOPIC_B[0]], settings, home=home["home"])
    got = records_digest(rdd.collect())
    assert got == home["expected"]
    # 4 ledgers x 2 topics (the open one too), each > 1 partition (2 KiB blocks / 8 KiB local
    # chunks)
    assert rdd.getNumPartitions() > 16

    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("home", home["home"])
        .option("topics", f"{TOPIC_A[0]},{TOPIC_B[0]}")
        .load()
    )
    assert records_digest([tuple(r) for r in df.collect()]) == home["expected"]
    # the one selection form (issue 35): a namespace, and a regex, select the same topics
    by_namespace = (
        spark.read.format("offloaded-ledger")
        .option("home", home["home"])
        .option("topics", "public/default")
        .load()
    )
    assert records_digest([tuple(r) for r in by_namespace.collect()]) == home["expected"]
    named = plan_topics(home["home"], [TOPIC_A[0], TOPIC_B[0]], settings)
    for text in (".*/spark-[ab]", "public/default", "spark-a,public/default/spark-b"):
        chosen = plan_topics(home["home"], TopicSelection.parse(text), settings)
        assert [repr(t) for t in chosen] == [repr(t) for t in named], text
    assert plan_topics(home["home"], TopicSelection.parse("spark-[c-z]"), settings) == []
    # offloaded_rdd's source as one string takes the same form
    by_text = rdd_plan("public/default/spark-.*", settings, home=home["home"])
    assert [repr(t) for t in by_text] == [repr(t) for t in named]


def test_topic_with_pruning(spark: Any, home: dict[str, Any], aws_env: S3Endpoint) -> None:
    from pyspark.sql import functions as F

    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("home", home["home"])
        .option("topics", TOPIC_B[0])
        .load()
    )
    lid = next(r[1] for r in home["expected"] if r[0] == TOPIC_B[0])
    rows = df.filter((F.col("ledger_id") == lid) & (F.col("entry_id").isin(3, 50, 119))).collect()
    assert sorted(r["entry_id"] for r in rows) == [3, 50, 119]
    assert Path(home["home"]).is_dir()


def test_open_ledger_planned_up_to_its_metadata_count(
    home: dict[str, Any], aws_env: S3Endpoint
) -> None:
    settings = OffloadSettings(max_block_size=8 * 1024, enforce_min_block_size=False)
    tasks = plan_topics(home["home"], [TOPIC_A[0]], settings)
    open_tasks = [t for t in tasks if isinstance(t, LocalLedgerTask) and t.open]
    assert len(open_tasks) > 1  # split like a closed local ledger
    assert {t.ledger_id for t in open_tasks} == {max(t.ledger_id for t in tasks)}
    assert [(t.first_entry_id, t.last_entry_id) for t in open_tasks][-1][1] == 119
    # each task scans the file only as far as its last entry: the 3 uncounted ones stay unread
    got = [e for t in open_tasks for e, _p in read_open_entries(t)]
    assert got == list(range(120))
    # a plan counting more than the file holds (a producer's writes the OS has not seen yet):
    # what the file holds is read, and a warning says how many were not
    ahead = dataclasses.replace(open_tasks[-1], last_entry_id=199)
    with capture_logs() as logs:
        got = [e for e, _p in read_open_entries(ahead)]
    assert got == list(range(ahead.first_entry_id, 123))
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["entries"] == 200 - 123


def test_pulsar_messages_over_raw_topics_names_or_skips_each_ledger(
    home: dict[str, Any], aws_env: S3Endpoint
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from formats.pulsar import NotPulsarMessagesError
    from offloader.spark.message_rows import messages_arrow_schema
    from offloader.spark.messages import PulsarMessagesReader

    schema = from_arrow_schema(messages_arrow_schema())
    options = {"home": home["home"], "topics": f"{TOPIC_A[0]},{TOPIC_B[0]}"}
    with pytest.raises(NotPulsarMessagesError, match="is not in Pulsar message format"):
        PulsarMessagesReader(options, schema).partitions()
    with capture_logs() as logs:
        parts = PulsarMessagesReader({**options, "on_error": "skip"}, schema).partitions()
    assert parts == []
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["ledgers"] == 8  # 4 ledgers x 2 topics, the open ones included
    assert warning["left_out"].count("open in the local ledger store") == 2
    assert warning["left_out"].count("closed in the local ledger store") == 2
