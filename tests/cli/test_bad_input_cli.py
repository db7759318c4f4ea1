"""Issue 34 items 7 and 8: bad input is one ``error:`` line, never a traceback.

Kafka topic names that no Kafka topic can have (bytes that are not UTF-8, spaces, 250
characters) are refused by every ``kafka`` subcommand that takes a topic, before any query; a
partition beyond Kafka's range is named as such; an ``offloader.toml`` that is not a regular
file or is huge is refused unread; a ``--home`` that is not a directory is one line; and a name
quoted in a message is escaped once, not twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.config_file import MAX_CONFIG_BYTES
from tests.cli.helpers import json_lines, ok, one_line_error, run

#: ``cl<0xff>cks`` as Python hands a command-line argument that is not UTF-8 to the program
UNDECODABLE = b"cl\xffcks".decode("utf-8", "surrogateescape")
#: how the error line shows it: the byte it was, escaped once
SHOWN = "'cl\\xffcks' is not a legal Kafka topic name"

TOPIC_COMMANDS: dict[str, tuple[str, ...]] = {
    "read": ("kafka", "read", "{t}", "0", "--from-offset", "0"),
    "status": ("kafka", "status", "{t}"),
    "set-retention": ("kafka", "set-retention", "{t}", "--time", "1d", "--size", "-1"),
    "get-retention": ("kafka", "get-retention", "{t}"),
    "apply-retention": ("kafka", "apply-retention", "{t}"),
    "set-offload-transform": ("kafka", "set-offload-transform", "{t}", "--compression", "zstd"),
    "get-offload-transform": ("kafka", "get-offload-transform", "{t}"),
    "remove-offload-transform": ("kafka", "remove-offload-transform", "{t}"),
}


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", "public/default")
    return home


def _args(command: str, topic: str) -> list[str]:
    return [topic if arg == "{t}" else arg for arg in TOPIC_COMMANDS[command]]


@pytest.mark.parametrize("command", sorted(TOPIC_COMMANDS))
def test_a_topic_name_that_is_not_utf8_is_one_error_line(home: Path, command: str) -> None:
    line = one_line_error(run(home, *_args(command, UNDECODABLE)))
    assert SHOWN in line and "\\\\" not in line


@pytest.mark.parametrize("command", sorted(TOPIC_COMMANDS))
@pytest.mark.parametrize("name", ["bad topic", "x" * 250, "..", "a/b"])
def test_every_topic_command_checks_kafka_names(home: Path, command: str, name: str) -> None:
    line = one_line_error(run(home, *_args(command, name)))
    assert "is not a legal Kafka topic name (1 to 249 of the characters" in line


def test_set_retention_stores_nothing_for_an_illegal_name(home: Path) -> None:
    one_line_error(run(home, "kafka", "set-retention", "bad topic", "--time", "1d", "--size", "1"))
    # a legal name (249 characters, the longest) is stored and read back
    longest = "t" * 249
    ok(home, "kafka", "set-retention", longest, "--time", "1d", "--size", "-1")
    record = json_lines(ok(home, "--json", "kafka", "get-retention", longest))[0]
    assert record == {"topic": longest, "retention_ms": 86_400_000, "retention_bytes": -1}


def test_the_console_script_with_a_raw_non_utf8_argument(home: Path) -> None:
    """The real thing: argv bytes that are not UTF-8, through the installed entry point."""
    script = Path(sys.executable).parent / "offloader"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]
    argv = [os.fsencode(a) for a in [*command, "--home", str(home), "kafka", "status"]]
    done = subprocess.run([*argv, b"cl\xffcks"], capture_output=True, timeout=120, check=False)
    stderr = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {SHOWN} (1 to 249"), stderr


@pytest.mark.parametrize("partition", ["2147483648", "99999999999999999999"])
def test_kafka_read_of_a_partition_beyond_kafkas_range(home: Path, partition: str) -> None:
    line = one_line_error(run(home, "kafka", "read", "clicks", partition, "--from-offset", "0"))
    assert line == f"error: partition {partition} is out of range: it must be 0..2147483647"


def test_kafka_read_of_the_largest_partition_is_not_refused(home: Path) -> None:
    line = one_line_error(run(home, "kafka", "read", "clicks", "2147483647", "--from-offset", "0"))
    assert "out of range" not in line and "clicks-2147483647" in line


# --- offloader.toml -------------------------------------------------------------------------
def test_offloader_toml_linked_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").symlink_to("/dev/zero")
    line = one_line_error(run(home, "topics", "list"))
    assert line == (
        f"error: {home}/offloader.toml: not a regular file (a FIFO or a device), not read; "
        "give a TOML file"
    )


def test_offloader_toml_as_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "offloader.toml")  # nobody writes: a blocking read would never return
    line = one_line_error(run(home, "namespaces", "create", "a/b"))
    assert "offloader.toml: not a regular file" in line


def test_offloader_toml_as_a_directory_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "offloader.toml").mkdir(parents=True)
    line = one_line_error(run(home, "topics", "list"))
    assert line == f"error: {home}/offloader.toml: is a directory, not a configuration file"


def test_a_huge_offloader_toml_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    comment = b"# " + b"x" * 1021 + b"\n"  # 1 KiB lines of valid TOML
    (home / "offloader.toml").write_bytes(comment * (MAX_CONFIG_BYTES // len(comment)))
    ok(home, "namespaces", "create", "a/b")  # 1 MiB exactly: read
    with (home / "offloader.toml").open("ab") as file:
        file.write(b"#\n")
    line = one_line_error(run(home, "topics", "list"))
    assert (
        line == f"error: {home}/offloader.toml: larger than 1024 KiB; a configuration file is small"
    )


# --- --home ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [("topics", "list"), ("namespaces", "create", "a/b")])
def test_home_dev_null_is_one_clear_line(command: tuple[str, ...]) -> None:
    line = one_line_error(run(Path("/dev/null"), *command))
    assert line == "error: offloader home /dev/null is not a directory (check --home)"


def test_a_home_under_a_file_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "plain"
    file.write_text("x")
    line = one_line_error(run(file / "home", "namespaces", "create", "a/b"))
    assert line == f"error: offloader home {file}/home: {file} is not a directory (check --home)"
    assert file.read_text() == "x"


def test_a_home_that_is_a_regular_file_is_a_usage_error(tmp_path: Path) -> None:
    file = tmp_path / "plain"
    file.write_text("x")
    result = run(file, "kafka", "status")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"Invalid value for '--home': Directory '{file}' is a file." in result.stderr


# --- names in messages are escaped once -----------------------------------------------------
def test_a_backslash_in_a_name_is_escaped_once(home: Path) -> None:
    line = one_line_error(run(home, "topics", "info", "a\\b"))
    # repr() escaped the backslash once; the error line does not escape it again
    assert line == "error: invalid topic name 'a\\\\b': the local name may not contain '\\'"


def test_a_backslash_in_a_kafka_name_is_escaped_once(home: Path) -> None:
    line = one_line_error(run(home, "kafka", "get-retention", "a\\b\x1b"))
    assert line.startswith("error: 'a\\\\b\\x1b' is not a legal Kafka topic name")


def test_control_characters_in_a_message_are_still_escaped(home: Path) -> None:
    line = one_line_error(run(home, "topics", "info", "persistent://x/y/a\x1b[31mb"))
    assert "\x1b" not in line and "\\x1b[31m" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("topics", "info", UNDECODABLE), "error: invalid topic name 'cl\\xffcks': not encodable"),
        (
            ("namespaces", "create", f"a/{UNDECODABLE}"),
            "error: invalid namespace name 'cl\\xffcks'",
        ),
    ],
)
def test_pulsar_names_that_are_not_utf8_show_the_byte(
    home: Path, args: tuple[str, ...], expected: str
) -> None:
    assert one_line_error(run(home, *args)).startswith(expected)


def test_a_metadata_url_that_is_not_utf8(home: Path) -> None:
    line = one_line_error(
        run(home, "--metadata", f"postgresql://h/{UNDECODABLE}", "topics", "list")
    )
    assert line == (
        "error: the metadata store URL holds bytes that are not UTF-8 text (check --metadata)"
    )
