"""What is particular to the PostgreSQL metadata store (the contract suites cover the rest):
schema migrations and refusals, error translation (unreachable server, lock timeout, values out
of range, no password in messages), reconnecting after a server restart, the selection by URL,
and the ClusterMetadata methods (topic owners, leases) raced by real connections."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from devservers.postgres import PgServer, free_port
from offloader.errors import (
    MetadataBusy,
    MetadataError,
    MetadataUnavailable,
    SchemaVersionError,
)
from offloader.metadata import open_kafka_metadata_store, open_metadata_store
from offloader.metadata.cluster_base import ClusterMetadata
from offloader.metadata.postgres.db import PgDatabase
from offloader.metadata.postgres.kafka import PgKafkaMetadataStore
from offloader.metadata.postgres.schema import PG_MIGRATIONS, PG_SCHEMA_VERSION
from offloader.metadata.postgres.store import PgMetadataStore

pytestmark = pytest.mark.postgres

NS = "public/default"
TOPIC = "persistent://public/default/orders"


def _version(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version FROM offloader_schema").fetchone()
    assert row is not None
    return int(row[0])


def test_migrates_a_version_1_schema_keeping_its_data(pg_url: str) -> None:
    PgDatabase(pg_url, migrations=PG_MIGRATIONS[:1]).close()
    assert _version(pg_url) == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO namespaces (name, created_ms) VALUES ('t/ns', 7)")
    with PgMetadataStore(pg_url) as store:
        assert store.get_namespace("t/ns").created_ms == 7
        store.create_namespace(NS, 1)
        store.create_topic(TOPIC, 2)
        assert store.claim_topic(TOPIC, "b1", 3).broker_id == "b1"  # a version 2 table
    assert _version(pg_url) == PG_SCHEMA_VERSION == len(PG_MIGRATIONS)


def test_refuses_a_newer_schema_and_foreign_tables(pg_server: PgServer, pg_url: str) -> None:
    PgMetadataStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE offloader_schema SET version = 99")
    with pytest.raises(SchemaVersionError, match="newer"):
        PgMetadataStore(pg_url)
    foreign = pg_server.new_url()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE topics (id int)")
    with pytest.raises(SchemaVersionError, match="not a ledger-offloader"):
        PgMetadataStore(foreign)


def test_unreachable_server_is_a_typed_error_without_the_password() -> None:
    url = f"postgresql://offloader:s3cret-pw@127.0.0.1:{free_port()}/offloader"
    with pytest.raises(MetadataUnavailable) as info:
        PgMetadataStore(url)
    assert "s3cret-pw" not in str(info.value) and "127.0.0.1" in str(info.value)


def test_open_functions_choose_postgresql_by_url(pg_url: str, tmp_path: Path) -> None:
    meta = open_metadata_store(pg_url)
    kafka = open_kafka_metadata_store(pg_url)
    try:
        assert isinstance(meta, PgMetadataStore) and isinstance(meta, ClusterMetadata)
        assert isinstance(kafka, PgKafkaMetadataStore)
    finally:
        meta.close()
        kafka.close()
    local = open_metadata_store(tmp_path)
    assert not isinstance(local, ClusterMetadata)
    local.close()


def test_a_row_locked_too_long_is_metadata_busy(pg_url: str) -> None:
    store = PgMetadataStore(pg_url, busy_timeout_s=0.3)
    store.create_namespace(NS, 1)
    store.create_topic(TOPIC, 2)
    ledger = store.allocate_ledger_id()
    store.add_ledger(TOPIC, ledger, 3)
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT 1 FROM ledgers WHERE ledger_id = %s FOR UPDATE", (ledger,))
        with pytest.raises(MetadataBusy):
            store.update_ledger_stats(ledger, 1, 10)
    assert store.update_ledger_stats(ledger, 1, 10).entries == 1  # released: it works
    store.close()


def test_out_of_range_values_are_refused_cleanly(pg_url: str) -> None:
    with PgMetadataStore(pg_url) as store:
        store.create_namespace(NS, 1)
        store.create_topic(TOPIC, 2)
        with pytest.raises(MetadataError, match="too large"):
            store.add_ledger(TOPIC, 2**63, 3)
        assert store.list_ledgers(TOPIC) == []


def test_reconnects_after_a_server_restart() -> None:
    from devservers.postgres import start_postgres

    with start_postgres() as server:
        store = PgMetadataStore(server.new_url())
        store.create_namespace(NS, 1)
        server.restart("immediate")
        store.create_topic(TOPIC, 2)  # the dropped connection is replaced at BEGIN
        server.stop("fast")
        with pytest.raises(MetadataUnavailable):
            store.list_topics()
        server.start()
        assert [t.name for t in store.list_topics()] == [TOPIC]
        store.close()
        with pytest.raises(MetadataError, match="closed"):
            store.list_topics()


def test_claims_race_to_one_owner_and_leases_expire(pg_url: str) -> None:
    stores = [PgMetadataStore(pg_url) for _ in range(4)]
    try:
        stores[0].create_namespace(NS, 1)
        stores[0].create_topic(TOPIC, 2)
        barrier = threading.Barrier(len(stores))
        owners: list[str] = []

        def claim(i: int) -> None:
            barrier.wait(10)
            owners.append(stores[i].claim_topic(TOPIC, f"broker-{i}", 5).broker_id)

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(owners) == 4 and len(set(owners)) == 1
        owner = owners[0]
        other = next(f"broker-{i}" for i in range(4) if f"broker-{i}" != owner)
        assert not stores[1].release_topic(TOPIC, other)
        assert stores[1].get_topic_owner(TOPIC).broker_id == owner  # type: ignore[union-attr]
        assert stores[2].release_topic(TOPIC, owner)
        assert stores[3].claim_topic(TOPIC, other, 9).broker_id == other
        # leases: free -> held, renewed by the holder, refused to others until expiry
        a, b = stores[0], stores[1]
        assert a.try_acquire_lease("gc", "a", 1000, 500)
        assert a.try_acquire_lease("gc", "a", 1400, 500)  # renewed until 1900
        assert not b.try_acquire_lease("gc", "b", 1800, 500)
        assert b.try_acquire_lease("gc", "b", 1900, 500)
        lease = a.get_lease("gc")
        assert lease is not None and (lease.holder, lease.acquired_ms) == ("b", 1900)
        assert not a.release_lease("gc", "a") and b.release_lease("gc", "b")
        assert a.get_lease("gc") is None
        # brokers and heartbeats
        a.register_broker("b1", "host", "/h1", 10)
        a.broker_heartbeat("b1", 20)
        assert [(r.broker_id, r.heartbeat_ms) for r in b.list_brokers()] == [("b1", 20)]
        # deleting the topic drops its owner
        a.delete_topic(TOPIC)
        assert b.get_topic_owner(TOPIC) is None
    finally:
        for s in stores:
            s.close()
