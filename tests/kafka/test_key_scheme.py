"""The tier's one key scheme (issue 34, item 9): persisted by the first upload, used by
``kafka upload`` without options and by ``service run``; a conflicting option is a one-line
error; Pinterest's form (prefix, entropy bits, cluster) and the hash form."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import pytest

from formats.kafka.errors import KafkaNameError
from formats.kafka.names import (
    KafkaKeyScheme,
    entropy_digits,
    parse_remote_key,
    scheme_key,
    uuid_to_kafka,
)
from offloader.metadata.kafka_base import COPY_FINISHED
from offloader.metadata.sqlite.kafka import SqliteKafkaMetadataStore
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.kafka.logdir import write_partition

TOPIC_ID = uuid_to_kafka(uuid.UUID(int=7))
SEGMENT_ID = uuid_to_kafka(uuid.UUID(int=9))


def test_pinterest_form_and_hash_form() -> None:
    pinterest = KafkaKeyScheme("base/", cluster="east-1", entropy_bits=5)
    key = scheme_key(pinterest, "orders", TOPIC_ID, 3, 120, SEGMENT_ID, "log")
    digest = int.from_bytes(hashlib.md5(b"east-1/orders-3").digest(), "big")
    bits = format(digest >> 123, "05b")
    assert key == f"base/{bits}/east-1/orders-{TOPIC_ID}/3/{120:020d}-{SEGMENT_ID}.log"
    assert entropy_digits("east-1", "orders", 3, 5) == bits
    parsed = parse_remote_key(key)
    assert (parsed.topic, parsed.partition, parsed.base_offset) == ("orders", 3, 120)
    # without entropy bits: prefix and cluster only
    plain = scheme_key(KafkaKeyScheme("base", cluster="east-1"), "orders", TOPIC_ID, 3, 0,
                       SEGMENT_ID, "index")  # fmt: skip
    assert plain.startswith(f"base/east-1/orders-{TOPIC_ID}/3/")
    hashed = scheme_key(KafkaKeyScheme("kafka", 4), "orders", TOPIC_ID, 3, 0, SEGMENT_ID, "log")
    assert re.match(rf"^[0-9a-f]{{4}}/kafka/orders-{TOPIC_ID}/3/", hashed)
    for bad in (
        {"cluster": "east", "hash_prefix_len": 2},
        {"entropy_bits": 3},
        {"cluster": "a/b"},
        {"cluster": "east", "entropy_bits": 33},
    ):
        with pytest.raises(KafkaNameError):
            KafkaKeyScheme(**bad)  # type: ignore[arg-type]


def _keys(home: Path) -> list[str]:
    with SqliteKafkaMetadataStore(home / "metadata.db") as meta:
        return [s.keys["log"] for s in meta.list_segments(states=[COPY_FINISHED])]


def test_the_first_upload_persists_the_scheme_every_uploader_uses(tmp_path: Path) -> None:
    logs, other = tmp_path / "logs", tmp_path / "other"
    write_partition(logs, "orders", 0, records=300)
    write_partition(other, "clicks", 0, records=300)
    home = tmp_path / "home"
    home.mkdir()
    ok(home, "kafka", "upload", "--log-dir", str(logs), "--once", "--hash-prefix", "4")
    # service run has no key options: it uses the persisted scheme
    tick = json_lines(
        ok(home, "--json", "service", "run", "--once", "--kafka-log-dir", str(other))
    )[0]
    assert tick["kafka_uploaded"] and tick["errors"] == []
    keys = _keys(home)
    assert {k.split("/", 2)[1] for k in keys} == {"kafka"}
    assert all(re.match(r"^[0-9a-f]{4}/kafka/", k) for k in keys)
    # one partition's keys have one hash whoever uploaded them
    clicks = {k.split("/", 1)[0] for k in keys if "/clicks-" in k}
    assert len(clicks) == 1
    # repeating the persisted value is fine; another one is a one-line error, nothing done
    ok(home, "kafka", "upload", "--log-dir", str(logs), "--once", "--hash-prefix", "4")
    line = one_line_error(
        run(home, "kafka", "upload", "--log-dir", str(logs), "--once", "--hash-prefix", "2")
    )
    assert "--hash-prefix 2" in line and "hash prefix 4" in line
    line = one_line_error(
        run(home, "kafka", "upload", "--log-dir", str(logs), "--once", "--cluster", "east")
    )
    assert "--cluster east" in line
    assert len(_keys(home)) == len(keys)


def test_pinterest_form_from_the_cli(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_partition(logs, "orders", 0, records=300)
    home = tmp_path / "home"
    home.mkdir()
    args = ["kafka", "upload", "--log-dir", str(logs), "--once"]
    ok(home, *args, "--prefix", "tiered", "--cluster", "east", "--entropy-bits", "3")
    bits = entropy_digits("east", "orders", 0, 3)
    assert all(k.startswith(f"tiered/{bits}/east/orders-") for k in _keys(home))
    line = one_line_error(run(tmp_path / "fresh", *args, "--entropy-bits", "3"))
    assert "cluster" in line  # entropy bits need a cluster name
