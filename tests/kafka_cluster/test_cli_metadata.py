"""``--kafka-metadata`` on the command line and ``kafka_metadata`` in offloader.toml: upload
only what this broker leads, status with roles, epochs and reasons, a bad URL refused by name."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.kafka_cluster.brokers import topic_id, write_brokers
from tests.kafka_cluster.zk_writer import ZkClusterWriter

pytestmark = pytest.mark.zookeeper


def test_upload_and_status_with_the_cluster(
    tmp_path: Path, zk_server: Any, kafka_zk_admin: Any
) -> None:
    zk = ZkClusterWriter(kafka_zk_admin, zk_server, f"/kafka-{uuid.uuid4().hex[:12]}")
    dirs = write_brokers(tmp_path / "logs", {("orders", 0): 300, ("orders", 1): 300}, (1, 2))
    zk.create_topic(
        "orders", topic_id("orders"), {0: [1, 2], 1: [2, 1]}, {"remote.storage.enable": "true"}
    )
    home = tmp_path / "home"
    home.mkdir()
    url = f"zk://127.0.0.1:{zk_server.port}{zk.chroot}"
    lines = json_lines(
        ok(home, "--json", "kafka", "upload", "--once", "--log-dir", str(dirs[1]),
           "--kafka-metadata", url)
    )  # fmt: skip
    summary = lines[-1]
    assert summary["skipped"] == 1 and summary["uploaded"] >= 1
    assert {r["partition"] for r in lines[:-1] if r["outcome"] == "uploaded"} == {0}
    skipped = [r for r in lines[:-1] if r["outcome"] == "skipped"]
    assert skipped[0]["detail"] == "follower: broker 2 leads in epoch 0"
    # the same from offloader.toml; text status with the role and the reason
    (home / "offloader.toml").write_text(f'kafka_metadata = "{url}"\n')
    text = ok(home, "kafka", "status", "--log-dir", str(dirs[1])).stdout
    assert "ROLE" in text and "EPOCH" in text
    assert "orders-1: not uploading: follower: broker 2 leads in epoch 0" in text
    rows = json_lines(ok(home, "--json", "kafka", "status", "--log-dir", str(dirs[1])))
    roles = {r["partition"]: (r["role"], r["leader"], r["leader_epoch"]) for r in rows}
    assert roles == {0: ("leader", 1, 0), 1: ("follower", 2, 0)}
    # a bad option is a usage error naming it
    bad = run(home, "kafka", "upload", "--once", "--log-dir", str(dirs[1]), "--kafka-metadata",
              "etcd:h:1")  # fmt: skip
    assert bad.exit_code == 2 and "'--kafka-metadata'" in bad.stderr
    assert "unknown scheme" in bad.stderr and "Traceback" not in bad.stderr
    (home / "offloader.toml").write_text('kafka_metadata = "zk:h p:1"\n')
    assert "not host:port" in one_line_error(run(home, "kafka", "status"))


def test_service_run_with_the_cluster_and_without_it(
    tmp_path: Path, zk_server: Any, kafka_zk_admin: Any
) -> None:
    zk = ZkClusterWriter(kafka_zk_admin, zk_server, f"/kafka-{uuid.uuid4().hex[:12]}")
    dirs = write_brokers(tmp_path / "logs", {("orders", 0): 300, ("orders", 1): 300}, (2,))
    # records from 2023: Kafka's default retention.ms (7 days) would delete them remotely at once
    config = {"remote.storage.enable": "true", "retention.ms": "-1"}
    zk.create_topic("orders", topic_id("orders"), {0: [1, 2], 1: [2, 1]}, config)
    home = tmp_path / "home"
    home.mkdir()
    url = zk_server.url(zk.chroot)
    tick = json_lines(
        ok(home, "--json", "service", "run", "--once", "--kafka-log-dir", str(dirs[2]),
           "--kafka-metadata", url)
    )[0]  # fmt: skip
    assert tick["kafka_uploaded"] and all(s.startswith("orders-1@") for s in tick["kafka_uploaded"])
    assert tick["errors"] == []
    # ZooKeeper unreachable: reads never need it; an upload pass fails with one clear line
    from devservers.postgres import free_port

    down = f"zk:127.0.0.1:{free_port()}"
    (home / "offloader.toml").write_text(f'kafka_metadata = "{down}"\n')
    text = ok(home, "kafka", "status", "--kafka-metadata", url).stdout
    assert "broker 2 leads" in text and "follower" not in text  # no log dir: no role
    rows = json_lines(ok(home, "--json", "kafka", "read", "orders", "1", "--from-offset", "0",
                         "--count", "3"))  # fmt: skip
    assert [r["offset"] for r in rows] == [0, 1, 2]
    error = one_line_error(run(home, "kafka", "upload", "--once", "--log-dir", str(dirs[2])))
    assert "cannot reach ZooKeeper" in error
    rows = json_lines(ok(home, "--json", "kafka", "status", "--log-dir", str(dirs[2])))
    assert all("cluster metadata unavailable" in r["not_uploading"] for r in rows)
    # a log dir without meta.properties: the pass fails before any partition, naming the file
    (home / "offloader.toml").write_text(f'kafka_metadata = "{url}"\n')
    (dirs[2] / "meta.properties").unlink()
    error = one_line_error(run(home, "kafka", "upload", "--once", "--log-dir", str(dirs[2])))
    assert "meta.properties: no such file" in error
