"""Shows the kill -9 harness's counts (kill points survived, entries checked) in the terminal
summary of every run, not only with ``-s``."""

from __future__ import annotations

import pytest

from tests.crash.harness import SUMMARIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in SUMMARIES:
        terminalreporter.write_line(f"crash harness: {line}")
