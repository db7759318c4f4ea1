"""The Kafka tier on the shared PostgreSQL metadata store: broker a uploads the closed
segments of its log directory, broker b (another home, no log directory) reads the records
back remotely and sees a's partitions, and Kafka remote retention runs under a lease."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from offloader.metadata.cluster_base import LEASE_KAFKA_RETENTION
from tests.cluster.conftest import Broker
from tests.kafka.logdir import write_partition

pytestmark = pytest.mark.postgres


def test_another_broker_reads_uploaded_segments(tmp_path: Path, broker: Broker) -> None:
    logs = tmp_path / "logs-a"
    layout = write_partition(logs, "orders", 0, records=300)
    a, b = broker("a"), broker("b")
    report = a.kafka().upload(logs)
    assert report.ok
    remote_end = layout.segments[-2][1]  # the active segment stays local
    assert [(p.topic, p.watermark) for p in b.kafka().ctx.meta.list_partitions()] == [
        ("orders", remote_end)
    ]
    rows = list(b.kafka().read("orders", 0, from_offset=0))
    assert [r.offset for r in rows][-1] == remote_end and rows[0].offset == 0
    assert all(r.tier == "remote" for r in rows)
    # uploading the same log directory again from b's service uploads nothing twice
    again = b.kafka().upload(logs)
    assert not [s for s in again.segments if s.kind == "uploaded"]
    # Kafka remote retention is cluster work: one service at a time holds its lease
    for off in (a, b):
        off.runtime.broker = replace(off.runtime.broker, kafka_log_dirs=(str(logs),))
    assert not a.service_tick().errors
    lease = b.runtime.cluster.get_lease(LEASE_KAFKA_RETENTION)
    assert lease is not None and lease.holder == a.runtime.owner
    assert not b.service_tick().errors  # b uploads nothing new and leaves retention to a
    lease = b.runtime.cluster.get_lease(LEASE_KAFKA_RETENTION)
    assert lease is not None and lease.holder == a.runtime.owner
