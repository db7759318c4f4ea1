"""Issue 21 item 11: hostile text (object keys with newlines, escape sequences) reaches the
terminal escaped: one table row per object, no raw control characters, in tables and in the
``error:`` line."""

from __future__ import annotations

from cli.main import _one_line
from cli.render import safe_text, table

HOSTILE = "x\n\x1b[31mred\r\tz\\\x7f\x9b\u202e"


def test_table_rows_stay_one_line_each_with_no_control_characters() -> None:
    lines = table(("KEY", "SIZE"), [(HOSTILE, 3), ("plain-ledger-1", 4)])
    assert len(lines) == 3
    for line in lines:
        assert all(ch.isprintable() for ch in line), repr(line)
    assert "x\\n\\x1b[31mred\\r\\tz\\\\\\x7f\\x9b\\u202e" in lines[1]
    assert lines[2].startswith("plain-ledger-1")


def test_safe_text_keeps_printable_unicode() -> None:
    assert safe_text("café/ключ") == "café/ключ"


def test_the_error_line_escapes_too() -> None:
    line = _one_line(RuntimeError(f"object {HOSTILE} is odd"))
    assert all(ch.isprintable() for ch in line), repr(line)
    assert "\\x1b[31m" in line
