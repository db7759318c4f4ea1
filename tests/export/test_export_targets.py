"""Targets keyed by their real location, long topic names shortened to fit a file name, the
missing-file check's arithmetic and a repair plan's task choice, Kafka keys checked (no Spark,
no store)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from formats.kafka.errors import KafkaNameError
from offloader.errors import ConfigError
from offloader.export.kafka import split_key
from offloader.export.naming import (
    MAX_DIR_BYTES,
    ExportFile,
    file_name,
    is_shortened,
    parse_file_name,
    topic_dir,
    topic_of_dir,
)
from offloader.export.plan import TopicPlan
from offloader.export.run import missing_below, pulsar_spans
from offloader.export.settings import ExportSpec, normalize_target, same_target
from offloader.metadata.base import LedgerRecord
from offloader.metadata.export_base import ExportWatermark


def test_local_targets_are_keyed_by_their_real_location(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    (tmp_path / "link").symlink_to("lake")
    real = os.path.realpath(lake)
    for spelling in (
        str(lake),
        f"{lake}/",
        f"{lake}//",
        str(tmp_path / "link"),
        f"{tmp_path}/link/",
        f"{tmp_path}/lake/../link",
        f"file://{tmp_path}/link",
    ):
        assert normalize_target(spelling) == real, spelling
        assert ExportSpec(spelling).target == real
    # a directory not made yet: the existing part resolved, the rest kept
    assert normalize_target(f"{tmp_path}/link/sub/") == f"{real}/sub"
    # a watermark stored under an older spelling is the same target's
    assert same_target(str(tmp_path / "link"), real)
    assert not same_target(str(tmp_path / "other"), real)


def test_s3_prefixes_are_canonical() -> None:
    for spelling in ("s3://b/p/q", "s3://b/p/q/", "s3://b//p//q//", "s3a://b/p/q"):
        assert normalize_target(spelling) == "s3://b/p/q", spelling
    assert normalize_target("s3://b/") == "s3://b"
    assert same_target("s3://b//p/q/", "s3://b/p/q")
    for bad in ("s3://b/p/../q", "s3://b/./q", "s3://b/p?x=1"):
        with pytest.raises(ConfigError, match="segments"):
            normalize_target(bad)


def test_a_target_that_is_not_utf8_is_refused() -> None:
    name = os.fsdecode(b"/tmp/x/l\xffake")  # as the command line hands it over
    with pytest.raises(ConfigError, match=r"l\\xffake.*not valid UTF-8"):
        normalize_target(name)
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        ExportSpec(name)


def test_long_topic_names_get_a_directory_that_fits() -> None:
    short = "persistent://public/default/orders"
    assert topic_dir(short) == "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Forders"
    assert not is_shortened(topic_dir(short))
    kafka = "k" * 249  # Kafka's longest name fits as it is
    assert topic_dir(kafka) == f"topic={kafka}" and len(topic_dir(kafka)) == MAX_DIR_BYTES
    longest = "persistent://public/default/" + "t" * 254
    one, other = topic_dir(longest), topic_dir(longest[:-1] + "u")
    assert len(one.encode()) <= MAX_DIR_BYTES and len(other.encode()) <= MAX_DIR_BYTES
    assert is_shortened(one) and one != other
    assert one == topic_dir(longest)  # a pure function of the name
    assert one.startswith("topic=persistent%3A%2F%2Fpublic%2Fdefault%2Ftttt")
    assert topic_of_dir(one) is None  # the name is in the files
    # a plus sign is escaped, so no full name looks shortened
    assert "+" not in topic_dir("persistent://public/default/a+b")
    # escapes are never cut in two: every % is followed by two hex digits
    for n in range(70, 90):
        wide = topic_dir("persistent://public/default/" + "é" * n)
        head = wide.rpartition("+")[0]
        assert len(wide.encode()) <= MAX_DIR_BYTES
        assert all(head[i + 1 : i + 3].isalnum() and len(head[i + 1 : i + 3]) == 2
                   for i, c in enumerate(head) if c == "%")  # fmt: skip


def _file(ledger: int, first: int, last: int, value: str = "2025-06-15T15") -> ExportFile:
    name = file_name(1, ledger, first, last, value)
    parsed = parse_file_name(f"topic=t/dt=2025-06-15/hr=15/{name}")
    assert parsed is not None
    return parsed


def _ledger(lid: int, entries: int, state: str = "CLOSED") -> LedgerRecord:
    return LedgerRecord(lid, "t", entries, entries * 10, 0, None, state)  # type: ignore[arg-type]


def test_missing_files_are_counted_and_located() -> None:
    mark = ExportWatermark("/lake", "t", 1, 4, 9, files=5)
    files = [_file(1, 0, 9), _file(1, 20, 29), _file(4, 0, 4)]
    spans = pulsar_spans([_ledger(1, 30), _ledger(2, 0), _ledger(3, 5, "DELETED"),
                          _ledger(4, 20), _ledger(5, 8, "OPEN")], mark.position)  # fmt: skip
    assert spans == [(1, 0, 29), (4, 0, 9)]
    missing = missing_below(mark, files, spans)
    assert missing.count == 2
    assert missing.ranges == (((1, 10), (1, 19)), ((4, 5), (4, 9)))
    # every file there: nothing to say, whatever the gaps (entries without rows)
    assert missing_below(mark, files * 2, spans).count == 0
    assert missing_below(None, [], spans).count == 0
    # files of two partition values overlapping in range cover each other's gaps
    both = [_file(1, 0, 20), _file(1, 5, 29, "2025-06-15T16")]
    assert missing_below(mark, both, [(1, 0, 29)]).ranges == ()


def test_a_repair_reads_only_the_tasks_that_meet_its_ranges() -> None:
    present = (_file(1, 0, 9), _file(1, 20, 29))
    plan = TopicPlan("t", (-1, -1), (4, 9), (1, 4), present, (((1, 10), (1, 19)),))
    assert plan.contains(1, 0, 14) and plan.contains(1, 19, 40)
    assert (
        not plan.contains(1, 0, 9) and not plan.contains(1, 20, 29) and not plan.contains(4, 0, 9)
    )
    assert plan.present_of(1) == (("2025-06-15T15", 0, 9), ("2025-06-15T15", 20, 29))
    assert plan.present_of(4) == ()
    assert TopicPlan("t", (-1, -1), (4, 9), (1, 4)).present_of(1) is None
    everything = TopicPlan("t", (-1, -1), (4, 9), (1, 4), present)
    assert everything.contains(4, 0, 9) and not everything.contains(5, 0, 9)


def test_kafka_keys_are_checked() -> None:
    assert split_key("kafka:orders:3") == ("orders", 3)
    for bad in ("kafka:orders", "kafka::1", "kafka:orders:x", "orders:1", "kafka:orders:٣"):
        with pytest.raises(ConfigError, match=r"kafka:<topic>:<partition>"):
            split_key(bad)
    with pytest.raises(KafkaNameError, match="not a legal Kafka topic name"):
        split_key("kafka:" + os.fsdecode(b"cl\xffcks") + ":0")
