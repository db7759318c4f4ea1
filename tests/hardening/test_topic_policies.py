"""Issue 21 item 3: topic-level offload policies, applied over the namespace's (over the
broker's) everywhere the namespace policy is read: auto-offload on produce, the service's
thresholds and deletion lag, the read priority of reads; the CLI; the schema migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from offloader.errors import ConfigError, NotFound
from offloader.metadata.sqlite.db import MIGRATIONS, SCHEMA_VERSION, Database
from offloader.metadata.sqlite.store import SqliteMetadataStore
from offloader.policies import NamespacePolicies, TopicPolicies
from tests.cli.helpers import json_lines, ok, run

TOPIC = "persistent://public/default/t"


def _produce(home: Path, count: int = 100) -> dict[str, object]:
    result = ok(
        home,
        "--json", "topics", "produce", "t", "--synthetic", str(count), "--size", "100",
        "--max-entries-per-ledger", "50", "--min-rollover-time", "0",
    )  # fmt: skip
    return json_lines(result)[0]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    ok(tmp_path, "namespaces", "create", "public/default")
    ok(tmp_path, "topics", "produce", "t", "--synthetic", "1")  # the topic, ledger 0 open
    return tmp_path


def _ledgers(home: Path) -> list[dict[str, object]]:
    (info,) = json_lines(ok(home, "--json", "topics", "info", "t"))
    ledgers: list[dict[str, object]] = info["ledgers"]  # type: ignore[assignment]
    return ledgers


def test_topic_threshold_turns_auto_offload_on(home: Path) -> None:
    # the namespace has no threshold (-1): nothing offloads; the topic's 0 wins
    assert _produce(home)["ledgers_offloaded"] == []
    ok(home, "topics", "set-offload-policies", "t", "-t", "0")
    assert _produce(home)["ledgers_offloaded"] != []


def test_topic_threshold_turns_auto_offload_off(home: Path) -> None:
    ok(home, "namespaces", "set-offload-threshold", "public/default", "-s", "0")
    ok(home, "topics", "set-offload-policies", "t", "-t", "-1")
    assert _produce(home)["ledgers_offloaded"] == []
    ok(home, "topics", "remove-offload-policies", "t")
    assert _produce(home)["ledgers_offloaded"] != []


def test_the_service_uses_the_topic_thresholds_and_deletion_lag(home: Path) -> None:
    _produce(home)
    (idle,) = json_lines(ok(home, "--json", "service", "run", "--once"))
    assert idle["offloaded"] == [] and idle["local_deleted"] == []
    ok(home, "topics", "set-offload-policies", "t", "-t", "0", "-dl", "0")
    (report,) = json_lines(ok(home, "--json", "service", "run", "--once"))
    assert report["offloaded"] == [0, 1]
    (report,) = json_lines(ok(home, "--json", "service", "run", "--once"))
    assert report["local_deleted"] == [0, 1]  # the broker's 4 h lag would keep them


def test_the_topic_read_priority_decides_the_tier(home: Path) -> None:
    _produce(home)
    ok(home, "topics", "offload-prefix", "t", "-s", "0")

    def tier() -> str:
        (entry,) = json_lines(ok(home, "--json", "topics", "read", "t", "-n", "1"))
        return str(entry["tier"])

    assert tier() == "offloaded"
    ok(home, "topics", "set-offload-policies", "t", "-orp", "bookkeeper-first")
    assert tier() == "local"
    ok(home, "namespaces", "set-offloaded-read-priority", "public/default", "-p", "local-first")
    ok(home, "topics", "set-offload-policies", "t", "-orp", "tiered-storage-first")
    assert tier() == "offloaded"  # the topic's over the namespace's


def test_get_offload_policies_own_and_applied(home: Path) -> None:
    ok(home, "namespaces", "set-offload-deletion-lag", "public/default", "--lag", "2h")
    ok(home, "topics", "set-offload-policies", "t", "-t", "10M")
    (own,) = json_lines(ok(home, "--json", "topics", "get-offload-policies", "t"))
    assert own == {
        "topic": TOPIC,
        "offload_threshold_bytes": 10 << 20,
        "offload_threshold_seconds": None,
        "offload_deletion_lag_ms": None,
        "read_priority": None,
    }
    (applied,) = json_lines(ok(home, "--json", "topics", "get-offload-policies", "t", "-ap"))
    assert applied["offload_threshold_bytes"] == 10 << 20
    assert applied["offload_deletion_lag_ms"] == 2 * 3600 * 1000
    assert applied["sources"] == {
        "offload_threshold_bytes": "topic",
        "offload_threshold_seconds": "namespace",
        "offload_deletion_lag_ms": "namespace",
        "read_priority": "namespace",
    }
    text = ok(home, "topics", "get-offload-policies", "t", "--applied").output
    assert "offloadThresholdInBytes: 10485760 (from topic)" in text
    assert "offloadDeletionLagInMillis: 7200000 (from namespace)" in text


def test_set_without_a_policy_is_a_usage_error_and_unknown_topics_fail(home: Path) -> None:
    assert run(home, "topics", "set-offload-policies", "t").exit_code == 2
    result = run(home, "topics", "set-offload-policies", "nope", "-t", "1M")
    assert result.exit_code == 1 and "does not exist" in result.stderr


def test_policies_go_with_the_topic(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.db")
    store.create_namespace("a/b", 0)
    store.create_topic("persistent://a/b/t", 0)
    store.set_topic_policies("persistent://a/b/t", TopicPolicies(offload_threshold_bytes=5))
    assert store.get_topic_policies("persistent://a/b/t").offload_threshold_bytes == 5
    store.delete_topic("persistent://a/b/t")
    store.create_topic("persistent://a/b/t", 0)
    assert store.get_topic_policies("persistent://a/b/t").is_empty
    with pytest.raises(NotFound):
        store.get_topic_policies("persistent://a/b/none")
    store.close()


def test_the_migration_adds_topic_policies_to_an_old_database(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    Database(path, migrations=MIGRATIONS[:2]).close()  # a database of the previous version
    store = SqliteMetadataStore(path)
    store.create_namespace("a/b", 0)
    store.create_topic("persistent://a/b/t", 0)
    store.set_topic_policies("persistent://a/b/t", TopicPolicies(read_priority="local-first"))
    assert store.get_topic_policies("persistent://a/b/t").read_priority == "bookkeeper-first"
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_topic_policies_over_namespace_policies() -> None:
    namespace = NamespacePolicies(offload_threshold_bytes=5, offload_deletion_lag_ms=7)
    assert TopicPolicies().over(namespace) == namespace
    merged = TopicPolicies(offload_threshold_bytes=-1, read_priority="bookkeeper-first").over(
        namespace
    )
    assert merged.offload_threshold_bytes == -1 and merged.offload_deletion_lag_ms == 7
    assert merged.prefers_local
    with pytest.raises(ConfigError):
        TopicPolicies(read_priority="fastest")
    with pytest.raises(ConfigError):
        TopicPolicies(offload_threshold_bytes=True)
