"""Issue 21 item 13: floats, arrays, tables and booleans for a size or time key in
``offloader.toml`` are refused with the one-line error naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.errors import ConfigError
from offloader.units import parse_duration_seconds, parse_size
from tests.cli.helpers import one_line_error
from tests.cli.test_settings_cli import invoke


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("max_block_size = 1.5", "the float"),
        ("max_block_size = true", "the boolean"),
        ("max_ledger_size = [1, 2]", "the array"),
        ("read_buffer_size = {a = 1}", "the table"),
        ("min_rollover_time = true", "the boolean"),
        ("max_rollover_time = 2.5", "the float"),
        ("offload_deletion_lag = [1]", "the array"),
        ("orphan_min_age = false", "the boolean"),
    ],
)
def test_a_non_size_value_is_refused_naming_file_and_key(
    tmp_path: Path, line: str, kind: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = home / "offloader.toml"
    path.write_text(f"[broker]\n{line}\n")
    key = line.split(" ")[0]
    error = one_line_error(invoke(home, "topics", "list"))
    assert error.startswith(f"error: {path}: [broker] {key} must be a "), error
    assert kind in error, error


@pytest.mark.parametrize("value", [True, False, 1.5, [1], {"a": 1}])
def test_the_unit_parsers_refuse_non_numbers(value: object) -> None:
    with pytest.raises(ConfigError):
        parse_size(value)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        parse_duration_seconds(value)  # type: ignore[arg-type]
