"""One copy per offset range on the shared PostgreSQL store (issue 34, item 2): two brokers
(two homes) uploading the same log directory at once copy each segment once; a version-4
schema holding duplicate copies migrates to one copy each; the key scheme is the tier's."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from offloader.api import KafkaSettings, UploadReport
from offloader.errors import ConfigError
from offloader.metadata.kafka_base import COPY_FINISHED, DELETE_STARTED
from offloader.metadata.postgres.db import PgDatabase
from offloader.metadata.postgres.kafka import PgKafkaMetadataStore
from offloader.metadata.postgres.schema import PG_MIGRATIONS
from tests.cluster.conftest import Broker
from tests.kafka.logdir import write_partition

pytestmark = pytest.mark.postgres


def test_two_brokers_uploading_at_once_copy_each_segment_once(
    tmp_path: Path, broker: Broker
) -> None:
    logs = tmp_path / "logs"
    layout = write_partition(logs, "orders", 0, records=600)
    write_partition(logs, "clicks", 0, records=300)
    a, b = broker("a"), broker("b")
    tiers = [a.kafka(KafkaSettings(stale_attempt_ms=0)), b.kafka(KafkaSettings(stale_attempt_ms=0))]
    reports: list[UploadReport] = []
    start = threading.Barrier(2)

    def one(index: int) -> None:
        start.wait()
        reports.append(tiers[index].upload(logs))

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in reports)
    meta = tiers[0].ctx.meta
    finished = meta.list_segments("orders", 0, states=[COPY_FINISHED])
    assert [(s.base_offset, s.end_offset) for s in finished] == layout.segments[:-1]
    uploaded = [s for r in reports for s in r.of("uploaded") if s.topic == "orders"]
    assert len(uploaded) == len(finished)
    rows = [r.offset for r in tiers[1].read("orders", 0, from_offset=0)]
    assert rows == list(range(layout.segments[-2][1] + 1))


def test_a_schema_with_duplicate_copies_migrates_to_one(pg_url: str) -> None:
    PgDatabase(pg_url, migrations=PG_MIGRATIONS[:4]).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO kafka_partitions (topic, partition, topic_id, watermark, updated_ms) "
            "VALUES ('orders', 0, 'AAAAAAAAAAAAAAAAAAAAAA', 19, 1)"
        )
        for sid, started in (("s2", 20), ("s1", 20), ("s0", 30)):
            conn.execute(
                "INSERT INTO kafka_remote_segments (segment_id, topic, partition, topic_id, "
                "base_offset, end_offset, max_timestamp, size_bytes, leader_epochs, "
                "object_keys, state, started_ms, updated_ms) VALUES (%s, 'orders', 0, "
                "'AAAAAAAAAAAAAAAAAAAAAA', 0, 19, 5, 100, '{}', '{}', "
                "'COPY_SEGMENT_FINISHED', %s, %s)",
                (sid, started, started),
            )
    with PgKafkaMetadataStore(pg_url) as meta:
        states = {s.segment_id: s.state for s in meta.list_segments("orders", 0)}
        # earliest started, then the smallest id, is kept
        assert states == {"s1": COPY_FINISHED, "s2": DELETE_STARTED, "s0": DELETE_STARTED}
        assert meta.get_segment("s1").start_offset == 0


def test_every_broker_uses_the_persisted_key_scheme(tmp_path: Path, broker: Broker) -> None:
    logs = tmp_path / "logs"
    write_partition(logs, "orders", 0, records=300)
    write_partition(logs, "clicks", 0, records=300)
    a, b = broker("a"), broker("b")
    first = a.kafka(KafkaSettings(prefix="tiered", cluster="east", entropy_bits=6))
    assert first.upload(logs, "orders").ok
    second = b.kafka()  # what service run uses: no key options
    assert second.upload(logs, "clicks").ok
    for seg in second.ctx.meta.list_segments(states=[COPY_FINISHED]):
        prefix, entropy, cluster, _ = seg.keys["log"].split("/", 3)
        assert (prefix, len(entropy), set(entropy) <= {"0", "1"}, cluster) == (
            "tiered",
            6,
            True,
            "east",
        )
    c = broker("c")
    with pytest.raises(ConfigError, match="cluster 'east'"):
        c.kafka(KafkaSettings(hash_prefix_len=2)).upload(logs)
