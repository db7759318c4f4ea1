"""``offloader namespaces ...`` through click's CliRunner: pulsar-admin's strings and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import json_lines, ok, one_line_error, run

NS = "tenant/ns"
POLICY_FIELDS = {
    "offload_threshold_bytes",
    "offload_threshold_seconds",
    "offload_deletion_lag_ms",
    "retention_size_bytes",
    "retention_time_seconds",
    "read_priority",
    "transform_compression",
    "transform_level",
    "transform_encryption",
    "transform_key_id",
}


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", NS)
    return home


def test_create_text_json_and_duplicate(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert ok(home, "namespaces", "create", NS).stdout == f"Created namespace {NS}\n"
    record = json_lines(ok(home, "--json", "namespaces", "create", "tenant/two"))[0]
    assert record["namespace"] == "tenant/two" and isinstance(record["created_ms"], int)
    assert set(record["policies"]) == POLICY_FIELDS
    assert record["policies"]["offload_threshold_bytes"] == -1
    assert NS in one_line_error(run(home, "namespaces", "create", NS))


def test_create_invalid_name(tmp_path: Path) -> None:
    one_line_error(run(tmp_path / "h", "namespaces", "create", "no-slash"))


def test_list_text_and_json(home: Path) -> None:
    ok(home, "namespaces", "create", "alpha/beta")
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "10M")
    lines = ok(home, "namespaces", "list").stdout.splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "OFFLOAD_THRESHOLD", "THRESHOLD_SECONDS", "DELETION_LAG_MS"
    ]  # fmt: skip
    assert [line.split() for line in lines[1:]] == [
        ["alpha/beta", "-1", "-1", "-"],
        [NS, str(10 * 1024**2), "-1", "-"],
    ]
    assert len({len(line) for line in lines[1:]}) == 1  # aligned
    records = json_lines(ok(home, "--json", "namespaces", "list"))
    assert [r["namespace"] for r in records] == ["alpha/beta", NS]


def test_offload_threshold_pulsar_strings(home: Path) -> None:
    assert ok(home, "namespaces", "get-offload-threshold", NS).stdout == (
        "offloadThresholdInBytes: -1\noffloadThresholdInSeconds: -1\n"
    )
    result = ok(home, "namespaces", "set-offload-threshold", NS, "-s", "10M", "-t", "1h")
    assert result.stdout == "offloadThresholdInBytes: 10485760\noffloadThresholdInSeconds: 3600\n"
    assert ok(home, "namespaces", "get-offload-threshold", NS).stdout == result.stdout
    record = json_lines(ok(home, "--json", "namespaces", "get-offload-threshold", NS))[0]
    assert record == {
        "namespace": NS,
        "offload_threshold_bytes": 10485760,
        "offload_threshold_seconds": 3600,
    }
    ok(home, "namespaces", "set-offload-threshold", NS, "--size", "-1")
    assert (
        "offloadThresholdInBytes: -1" in ok(home, "namespaces", "get-offload-threshold", NS).stdout
    )
    record = json_lines(
        ok(home, "--json", "namespaces", "set-offload-threshold", NS, "--size", "0")
    )[0]
    assert record["policies"]["offload_threshold_bytes"] == 0


@pytest.mark.parametrize(
    ("lag", "text"),
    [
        ("4h", "240 minute(s)"),
        ("10m", "10 minute(s)"),
        ("0", "0 minute(s)"),
        ("2w", "20160 minute(s)"),
        # not a whole number of minutes: exact, never rounded down to "0 minute(s)"
        ("30s", "30 second(s)"),
        ("90s", "90 second(s)"),
    ],
)
def test_deletion_lag_text(home: Path, lag: str, text: str) -> None:
    result = ok(home, "namespaces", "set-offload-deletion-lag", NS, "--lag", lag)
    assert result.stdout == f"{text}\n"
    assert ok(home, "namespaces", "get-offload-deletion-lag", NS).stdout == f"{text}\n"


def test_deletion_lag_unset_clear_and_json(home: Path) -> None:
    unset = "Unset for namespace. Defaulting to broker setting.\n"
    assert ok(home, "namespaces", "get-offload-deletion-lag", NS).stdout == unset
    ok(home, "namespaces", "set-offload-deletion-lag", NS, "-l", "3d")
    record = json_lines(ok(home, "--json", "namespaces", "get-offload-deletion-lag", NS))[0]
    assert record == {"namespace": NS, "offload_deletion_lag_ms": 3 * 86_400_000}
    assert ok(home, "namespaces", "clear-offload-deletion-lag", NS).stdout == unset
    record = json_lines(ok(home, "--json", "namespaces", "get-offload-deletion-lag", NS))[0]
    assert record["offload_deletion_lag_ms"] is None
    never = ok(home, "namespaces", "set-offload-deletion-lag", NS, "--lag", "-1").stdout
    assert never.startswith("-1")


def test_set_retention_and_get_policies(home: Path) -> None:
    result = ok(home, "namespaces", "set-retention", NS, "--size", "10G", "--time", "7d")
    assert result.stdout == "retentionSizeInBytes: 10737418240\nretentionTimeInSeconds: 604800\n"
    ok(home, "namespaces", "set-retention", NS, "--time", "1d")  # size unchanged
    policies = json.loads(ok(home, "namespaces", "get-policies", NS).stdout)
    assert set(policies) == POLICY_FIELDS
    assert policies["retention_size_bytes"] == 10 * 1024**3
    assert policies["retention_time_seconds"] == 86400
    record = json_lines(ok(home, "--json", "namespaces", "get-policies", NS))[0]
    assert record == {"namespace": NS, "policies": policies}


def test_get_retention(home: Path) -> None:
    unset = "retentionSizeInBytes: 0\nretentionTimeInSeconds: 0\n"
    assert ok(home, "namespaces", "get-retention", NS).stdout == unset
    result = ok(home, "namespaces", "set-retention", NS, "--size", "1G", "--time", "2d")
    assert ok(home, "namespaces", "get-retention", NS).stdout == result.stdout
    record = json_lines(ok(home, "--json", "namespaces", "get-retention", NS))[0]
    assert record == {
        "namespace": NS,
        "retention_size_bytes": 1024**3,
        "retention_time_seconds": 2 * 86400,
    }


@pytest.mark.parametrize("spelling", ["bookkeeper-first", "local-first"])
def test_read_priority_shows_pulsar_names(home: Path, spelling: str) -> None:
    out = ok(home, "namespaces", "set-offloaded-read-priority", NS, "-p", spelling)
    assert out.stdout == "offloadedReadPriority: bookkeeper-first\n"
    policies = json.loads(ok(home, "namespaces", "get-policies", NS).stdout)
    assert policies["read_priority"] == "bookkeeper-first"
    record = json_lines(ok(home, "--json", "namespaces", "get-policies", NS))[0]
    assert record["policies"]["read_priority"] == "bookkeeper-first"
    out = ok(home, "namespaces", "set-offloaded-read-priority", NS, "-p", "tiered-storage-first")
    assert out.stdout == "offloadedReadPriority: tiered-storage-first\n"


@pytest.mark.parametrize(
    "args",
    [
        ("set-offload-threshold", NS, "-s", "99999999999999999999999T"),
        ("set-offload-threshold", NS, "-s", "9223372036854775808"),
        ("set-offload-threshold", NS, "-s", "1M", "-t", "99999999999999999999w"),
        ("set-retention", NS, "-t", "99999999999999999999w"),
        ("set-retention", NS, "-s", "99999999999T"),
        ("set-retention", NS, "-s", "9" * 5000),
        ("set-offload-deletion-lag", NS, "--lag", "9223372036854775807"),
    ],
)
def test_values_too_large_to_store_are_usage_errors(home: Path, args: tuple[str, ...]) -> None:
    result = run(home, "namespaces", *args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    assert "too large" in result.stderr or "invalid size" in result.stderr


def test_largest_storable_values_round_trip(home: Path) -> None:
    big = str(2**63 - 1)
    ok(home, "namespaces", "set-offload-threshold", NS, "-s", big)
    ok(home, "namespaces", "set-offload-deletion-lag", NS, "--lag", str((2**63 - 1) // 1000))
    policies = json.loads(ok(home, "namespaces", "get-policies", NS).stdout)
    assert policies["offload_threshold_bytes"] == 2**63 - 1
    assert policies["offload_deletion_lag_ms"] == (2**63 - 1) // 1000 * 1000


@pytest.mark.parametrize(
    "args",
    [
        ("get-policies", "tenant/missing"),
        ("get-offload-threshold", "tenant/missing"),
        ("set-offload-threshold", "tenant/missing", "--size", "1M"),
        ("set-offload-deletion-lag", "tenant/missing", "--lag", "1h"),
        ("get-offload-deletion-lag", "tenant/missing"),
        ("clear-offload-deletion-lag", "tenant/missing"),
        ("set-retention", "tenant/missing", "--size", "1G"),
        ("get-retention", "tenant/missing"),
    ],
)
def test_unknown_namespace_is_one_line_error(home: Path, args: tuple[str, ...]) -> None:
    assert "tenant/missing" in one_line_error(run(home, "namespaces", *args))
    assert one_line_error(run(home, "--json", "namespaces", *args))


def test_a_missing_namespace_names_the_command_that_creates_it(tmp_path: Path) -> None:
    home = tmp_path / "h"
    error = one_line_error(
        run(home, "topics", "produce", "persistent://nope/ns/t1", "--synthetic", "3")
    )
    assert "namespace nope/ns does not exist" in error
    assert "offloader namespaces create nope/ns" in error
    ok(home, "namespaces", "create", "nope/ns")
    ok(home, "topics", "produce", "persistent://nope/ns/t1", "--synthetic", "3")
