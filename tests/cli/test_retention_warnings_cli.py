"""Issue 34 item 10: a retention not above the offload threshold trims ledgers that were never
offloaded. The commands that set either policy say so (a ``warning:`` line on stderr, a
``warnings`` list with ``--json``) and still set it; ``topics info`` lists the ledgers retention
trimmed before their offload."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.policies import NamespacePolicies, retention_warnings
from tests.cli.helpers import json_lines, ok

NS = "public/default"
SIZE_WARNING = (
    "warning: retention size 5.0 MiB (5242880 bytes) is not above the offload threshold "
    "10.0 MiB (10485760 bytes): ledgers will be trimmed by retention before the threshold "
    "offloads them (never offloaded)"
)
TIME_WARNING = (
    "warning: retention time 3600 s is not above the offload time threshold 7200 s: ledgers "
    "will be trimmed by retention before the threshold offloads them (never offloaded)"
)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", NS)
    return home


def test_set_offload_threshold_above_the_retention_size_warns(home: Path) -> None:
    ok(home, "namespaces", "set-retention", NS, "--size", "5M")
    result = ok(home, "namespaces", "set-offload-threshold", NS, "--size", "10M")
    assert result.stdout == "offloadThresholdInBytes: 10485760\noffloadThresholdInSeconds: -1\n"
    assert result.stderr.splitlines() == [SIZE_WARNING]


def test_set_retention_below_the_threshold_warns_and_is_set(home: Path) -> None:
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "10M")
    result = ok(home, "namespaces", "set-retention", NS, "--size", "5M")
    assert result.stderr.splitlines() == [SIZE_WARNING]
    record = json_lines(ok(home, "--json", "namespaces", "get-retention", NS))[0]
    assert record["retention_size_bytes"] == 5 * 1024 * 1024  # set all the same


def test_equal_sizes_warn_too(home: Path) -> None:
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "10M")
    result = ok(home, "namespaces", "set-retention", NS, "--size", "10M")
    assert "is not above the offload threshold" in result.stderr


def test_the_time_retention_below_the_time_threshold_warns(home: Path) -> None:
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "-1", "--time", "2h")
    result = ok(home, "namespaces", "set-retention", NS, "--time", "1h")
    assert result.stderr.splitlines() == [TIME_WARNING]


def test_json_carries_the_warnings(home: Path) -> None:
    ok(home, "namespaces", "set-retention", NS, "--size", "5M", "--time", "1h")
    record = json_lines(
        ok(home, "--json", "namespaces", "set-offload-threshold", NS, "-s", "10M", "-t", "2h")
    )[0]
    assert record["warnings"] == [
        SIZE_WARNING[len("warning: ") :],
        TIME_WARNING[len("warning: ") :],
    ]
    assert record["policies"]["offload_threshold_bytes"] == 10 * 1024 * 1024
    record = json_lines(ok(home, "--json", "namespaces", "set-retention", NS, "--size", "20M"))[0]
    assert record["warnings"] == [TIME_WARNING[len("warning: ") :]]


def test_no_warning_when_retention_is_above_or_a_side_is_off(home: Path) -> None:
    result = ok(home, "namespaces", "set-retention", NS, "--size", "5M", "--time", "1h")
    assert result.stderr == ""  # the thresholds are off (-1)
    result = ok(home, "namespaces", "set-offload-threshold", NS, "--size", "1M", "-t", "30m")
    assert result.stderr == ""
    record = json_lines(ok(home, "--json", "namespaces", "set-retention", NS, "--size", "-1"))[0]
    assert record["warnings"] == []


def test_a_topic_threshold_above_the_namespace_retention_warns(home: Path) -> None:
    ok(home, "namespaces", "set-retention", NS, "--size", "5M")
    _produce(home, 1)
    result = ok(home, "topics", "set-offload-policies", "t1", "-t", "10M")
    assert result.stderr.splitlines() == [SIZE_WARNING]
    record = json_lines(ok(home, "--json", "topics", "set-offload-policies", "t1", "-t", "1M"))[0]
    assert record["warnings"] == []
    record = json_lines(
        ok(home, "--json", "topics", "set-offload-policies", "t1", "-dl", "1h", "-t", "6M")
    )[0]
    assert len(record["warnings"]) == 1 and "6.0 MiB" in record["warnings"][0]


def _produce(home: Path, count: int) -> None:
    ok(
        home,
        "topics", "produce", "t1", "--synthetic", str(count), "--size", "100",
        "--max-entries-per-ledger", "10", "--min-rollover-time", "0",
    )  # fmt: skip


def test_topics_info_lists_ledgers_trimmed_before_offload(home: Path) -> None:
    # keep 2500 bytes (ledgers of 10 entries of 100 bytes), offload past 1M: never offloaded
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "1M")
    ok(home, "namespaces", "set-retention", NS, "--size", "2500")
    _produce(home, 60)
    info = json_lines(ok(home, "--json", "topics", "info", "t1"))[0]
    trimmed = info["trimmed_before_offload"]
    assert trimmed, info
    assert all(not r["offloaded"] and r["state"] == "DELETED" for r in trimmed)
    live = {r["ledger_id"] for r in info["ledgers"]}
    assert not live & {r["ledger_id"] for r in trimmed}
    assert sum(r["entries"] for r in trimmed) + info["entries"] == 60
    text = ok(home, "topics", "info", "t1").stdout
    ids = ", ".join(str(r["ledger_id"]) for r in trimmed)
    assert f"trimmed before offload: {len(trimmed)} ledgers ({ids}), " in text
    assert "their entries are in no tier" in text


def test_ledgers_trimmed_after_their_offload_are_not_listed(home: Path) -> None:
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "0")  # offload every ledger
    _produce(home, 60)
    ok(home, "namespaces", "set-retention", NS, "--size", "2500")
    ok(home, "service", "run", "--once")
    info = json_lines(ok(home, "--json", "topics", "info", "t1"))[0]
    assert info["entries"] < 60  # retention trimmed some ...
    assert info["trimmed_before_offload"] == []  # ... each of them offloaded first
    assert "trimmed before offload" not in ok(home, "topics", "info", "t1").stdout


def test_retention_warnings_is_pure_and_exact() -> None:
    assert retention_warnings(NamespacePolicies()) == ()
    both = NamespacePolicies(
        offload_threshold_bytes=100,
        offload_threshold_seconds=60,
        retention_size_bytes=100,
        retention_time_seconds=61,
    )
    (only,) = retention_warnings(both)  # the size is not above; the time is
    assert only.startswith("retention size 100 B (100 bytes) is not above the offload threshold")
    zero = NamespacePolicies(offload_threshold_bytes=0, retention_size_bytes=1)
    assert retention_warnings(zero) == ()
