"""The contract every :class:`~offloader.kafka_cluster.base.KafkaClusterView` backend passes,
over the ``writer`` fixture (one per backend, ``conftest.WRITERS``): metadata written as
Kafka writes it, read back through the view, across leader changes, config changes while the
view is open, and a topic deleted and re-created with a new id."""

from __future__ import annotations

from offloader.kafka_cluster.base import KAFKA_DEFAULTS, PartitionState
from tests.kafka_cluster.writers import ClusterWriter

ID1 = "vH8B7dzFR2-2sPSvS9vV2w"
ID2 = "AAAAAAAAQACAAAAAAAAAAQ"


def test_topics_partitions_and_leaders(writer: ClusterWriter) -> None:
    writer.create_topic("orders", ID1, {0: [1, 2, 3], 1: [2, 3, 1]}, {"retention.ms": "1000"})
    writer.create_topic("events", ID2, {0: [3, 1, 2]})
    with writer.open_view() as view:
        view.refresh()
        assert view.topics() == ["events", "orders"]
        orders = view.topic("orders")
        assert orders is not None
        assert orders.topic_id == ID1
        assert sorted(orders.partitions) == [0, 1]
        assert view.partition("orders", 0) == PartitionState(
            "orders", 0, 1, 0, (1, 2, 3), (1, 2, 3)
        )
        p1 = view.partition("orders", 1)
        assert p1 is not None and p1.leader == 2 and p1.replicas == (2, 3, 1)
        assert view.topic("missing") is None
        assert view.partition("orders", 7) is None


def test_a_leader_change_is_seen_after_refresh(writer: ClusterWriter) -> None:
    writer.create_topic("orders", ID1, {0: [1, 2, 3]})
    with writer.open_view() as view:
        view.refresh()
        writer.set_leader("orders", 0, 2, 1, [2, 3])
        view.refresh()
        state = view.partition("orders", 0)
        assert state is not None
        assert (state.leader, state.leader_epoch, state.isr) == (2, 1, (2, 3))
        writer.set_leader("orders", 0, None, 2, [])
        view.refresh()
        offline = view.partition("orders", 0)
        assert offline is not None and offline.leader is None and offline.leader_epoch == 2


def test_effective_config_overrides_over_defaults(writer: ClusterWriter) -> None:
    writer.create_topic("t", ID1, {0: [1]}, {"remote.storage.enable": "true"})
    with writer.open_view() as view:
        view.refresh()
        topic = view.topic("t")
        assert topic is not None
        config = topic.config
        assert config.remote_storage_enable
        assert config.overrides == frozenset({"remote.storage.enable"})
        assert config.retention_ms == int(KAFKA_DEFAULTS["retention.ms"])
        assert not config.compacted and not config.remote_log_copy_disable
        assert config.remote_copy_lag_ms is None


def test_config_changes_while_running(writer: ClusterWriter) -> None:
    writer.create_topic("t", ID1, {0: [1]})
    with writer.open_view() as view:
        view.refresh()
        writer.set_default_config("retention.ms", "5000")
        writer.set_config("t", "cleanup.policy", "compact,delete")
        writer.set_config("t", "remote.copy.lag.ms", "60000")
        view.refresh()
        topic = view.topic("t")
        assert topic is not None
        assert topic.config.retention_ms == 5000
        assert topic.config.compacted
        assert topic.config.remote_copy_lag_ms == 60000
        writer.set_config("t", "retention.ms", "7")
        writer.set_config("t", "cleanup.policy", None)
        view.refresh()
        topic = view.topic("t")
        assert topic is not None
        assert topic.config.retention_ms == 7 and not topic.config.compacted
        writer.set_config("t", "remote.log.copy.disable", "true")
        view.refresh()
        topic = view.topic("t")
        assert topic is not None and topic.config.remote_log_copy_disable


def test_a_topic_deleted_and_recreated_with_a_new_id(writer: ClusterWriter) -> None:
    writer.create_topic("t", ID1, {0: [1, 2]}, {"retention.ms": "9"})
    with writer.open_view() as view:
        view.refresh()
        writer.delete_topic("t")
        view.refresh()
        assert view.topic("t") is None and view.topics() == []
        writer.create_topic("t", ID2, {0: [2, 1], 1: [1, 2]})
        view.refresh()
        topic = view.topic("t")
        assert topic is not None
        assert topic.topic_id == ID2
        assert sorted(topic.partitions) == [0, 1]
        assert topic.config.retention_ms == int(KAFKA_DEFAULTS["retention.ms"])
        p0 = view.partition("t", 0)
        assert p0 is not None and p0.leader == 2 and p0.leader_epoch == 0


def test_a_new_topic_appears_without_reopening(writer: ClusterWriter) -> None:
    with writer.open_view() as view:
        view.refresh()
        assert view.topics() == []
        writer.create_topic("late", ID1, {0: [4]}, {"remote.storage.enable": "true"})
        view.refresh()
        late = view.topic("late")
        assert late is not None and late.config.remote_storage_enable
        p = view.partition("late", 0)
        assert p is not None and p.leader == 4


def test_location_names_the_backend(writer: ClusterWriter) -> None:
    with writer.open_view() as view:
        assert view.location.startswith(("zk:", "kraft:"))
