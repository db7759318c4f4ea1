"""The export's pure parts: names, partitions, settings, plans, reset points (no Spark, no I/O)."""

from __future__ import annotations

import pytest

from offloader.errors import ConfigError
from offloader.export.manage import parse_reset_point, straddle_free
from offloader.export.naming import (
    Partitioning,
    file_name,
    is_temp_name,
    parse_file_name,
    topic_dir,
    topic_of_dir,
)
from offloader.export.plan import Held, TopicPlan, WrittenFile, before, hold_back, topic_plan
from offloader.export.settings import ExportSpec, normalize_target, parse_time_ms
from offloader.metadata.base import LedgerRecord

T0 = 1_750_000_000_000  # 2025-06-15T15:06:40Z


def test_file_names_round_trip_and_say_what_they_hold() -> None:
    name = file_name(3, 12, 0, 499, "2025-06-15T15")
    assert name == "g3-12-0-499-2025-06-15T15.parquet"
    parsed = parse_file_name(f"topic=x/dt=2025-06-15/hr=15/{name}", 10)
    assert parsed is not None
    assert (parsed.generation, parsed.first, parsed.last, parsed.size) == (
        3,
        (12, 0),
        (12, 499),
        10,
    )
    assert parsed.directory == "topic=x/dt=2025-06-15/hr=15"
    for bad in ("g1-1-2.parquet", "part-0.parquet", "g1-1-2-3-2025-6-1.parquet", "_SUCCESS"):
        assert parse_file_name(bad) is None
    assert is_temp_name(f"a/.{name}.tmp-abc") and not is_temp_name(name)


def test_topic_directories_are_escaped_like_hive() -> None:
    topic = "persistent://public/default/a b=c"
    assert topic_dir(topic) == "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fa%20b%3Dc"
    assert topic_of_dir(topic_dir(topic)) == topic


def test_partitions_by_day_and_hour_utc() -> None:
    hours, days = Partitioning("dt,hr"), Partitioning("dt")
    b = hours.bucket(T0)
    assert hours.directory(b) == "dt=2025-06-15/hr=15" and hours.value(b) == "2025-06-15T15"
    assert hours.bucket_of_value("2025-06-15T15") == b
    assert hours.end_ms(b) == 1_750_003_200_000
    d = days.bucket(T0)
    assert days.directory(d) == "dt=2025-06-15" and days.bucket_of_value("2025-06-15") == d
    assert days.directory(None) == "dt=__invalid__"
    assert hours.directory(None) == "dt=__invalid__/hr=__invalid__"
    assert hours.value(None) == "invalid"
    with pytest.raises(ConfigError):
        Partitioning("hr")


def test_spec_validation_and_fingerprint() -> None:
    assert normalize_target("s3://b/p/") == "s3://b/p"
    assert normalize_target("file:///tmp/x") == "/tmp/x"
    with pytest.raises(ConfigError):
        normalize_target("s3://key:secret@b/p")
    with pytest.raises(ConfigError):
        normalize_target("hdfs://b")
    assert normalize_target("gs://b/p/") == "gs://b/p"
    assert normalize_target("abfs://c@acct.dfs.core.windows.net/lake") == "az://c/lake"
    with pytest.raises(ConfigError):
        normalize_target("gs://key:secret@b/p")
    for bad in (
        {"generation": 0},
        {"max_file_size": 10},
        {"value_format": "json"},
        {"value_format": "xml"},
        {"flatten": True},
        {"time_field": ""},
    ):
        with pytest.raises(ConfigError):
            ExportSpec("/tmp/x", **bad)  # type: ignore[arg-type]
    a = ExportSpec("/tmp/x")
    assert a.fingerprint() == ExportSpec("/tmp/x", until_ms=5, generation=2).fingerprint()
    assert a.fingerprint() != ExportSpec("/tmp/x", partition_by="dt").fingerprint()
    assert ExportSpec("/t", time_field="value.meta.ts").field_path == ("meta", "ts")
    assert ExportSpec("/t").field_path is None


def test_times_and_reset_points() -> None:
    assert parse_time_ms("2025-06-15T15:06:40Z") == T0
    assert parse_time_ms("2025-06-15T15:06:40") == T0  # no zone: UTC
    assert parse_time_ms(str(T0)) == T0
    with pytest.raises(ConfigError):
        parse_time_ms("yesterday")
    assert parse_reset_point("12:40") == (12, 40)
    assert parse_reset_point("12:40:3") == (12, 40)
    assert parse_reset_point("2025-06-15T15:06:40Z") == T0


def _ledger(lid: int, entries: int, state: str = "CLOSED") -> LedgerRecord:
    return LedgerRecord(lid, "t", entries, entries * 10, 0, None, state)  # type: ignore[arg-type]


def test_plans_stop_at_the_last_closed_ledger() -> None:
    ledgers = [_ledger(1, 5), _ledger(2, 0), _ledger(4, 3), _ledger(7, 9, "OPEN")]
    plan = topic_plan("t", ledgers, (-1, -1))
    assert (plan.end, plan.ledger_ids) == ((4, 2), (1, 4))
    assert topic_plan("t", ledgers, (1, 2)).ledger_ids == (1, 4)
    done = topic_plan("t", ledgers, (4, 2))
    assert done.empty and done.end == (4, 2)
    assert plan.contains(1, 0, 4) and not topic_plan("t", ledgers, (1, 4)).contains(1, 0, 4)
    cut = plan.clipped(before((4, 0)))
    assert (cut.end, cut.ledger_ids) == ((4, -1), (1, 4)) and cut.contains(1, 3, 4)
    assert not cut.contains(4, 0, 2)
    assert plan.clipped(before((1, 0))).empty
    same = topic_plan("t", [_ledger(4, 3)], (4, 1))
    assert not same.empty and same.contains(4, 0, 2) and not same.contains(4, 0, 1)


def test_reset_never_leaves_a_file_straddling_the_watermark() -> None:
    files = [
        parse_file_name(file_name(1, 5, a, b, "2025-06-15")) for a, b in ((0, 9), (3, 20), (21, 30))
    ]
    assert straddle_free([f for f in files if f], (5, 25)) == (5, 20)
    assert straddle_free([f for f in files if f], (5, 5)) == (5, -1)
    assert straddle_free([f for f in files if f], (5, 30)) == (5, 30)


def test_hold_back_stops_the_plan_before_the_first_held_message() -> None:
    def written(topic: str, ledger: int, first: int, last: int) -> WrittenFile:
        return WrittenFile(topic, f"t/g1-{ledger}-{first}-{last}-x.parquet", ledger, first, last,
                           last - first + 1, 0, 10, T0)  # fmt: skip

    a = TopicPlan("a", (3, 9), (5, 40), (3, 4, 5))
    b = TopicPlan("b", (-1, -1), (7, 20), (7,))
    results = [
        written("a", 3, 10, 19),
        written("a", 4, 0, 11),  # the held task's file: it stops before its held message
        Held("a", 4, 30),
        Held("a", 4, 12),  # the first one held decides
        written("a", 4, 31, 50),  # another task's, past the watermark
        written("a", 5, 0, 40),
        written("b", 7, 0, 20),  # nothing held: all of it
    ]
    plans, kept, past = hold_back([a, b], results)
    assert plans[0] == TopicPlan("a", (3, 9), (4, 11), (3, 4))
    assert plans[1] == b
    assert [(f.topic, f.ledger_id, f.first_entry) for f in kept] == [
        ("a", 3, 10),
        ("a", 4, 0),
        ("b", 7, 0),
    ]
    assert [(f.ledger_id, f.first_entry) for f in past] == [(4, 31), (5, 0)]
    # held at the plan's first position: nothing of the topic moves
    (still,), _, gone = hold_back([a], [Held("a", 3, 10), written("a", 3, 11, 19)])
    assert still.end == still.start == (3, 9) and still.empty and len(gone) == 1
