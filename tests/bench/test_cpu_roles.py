"""bench/cpu_roles.py: CPU seconds of this process tree by role, from /proc (real processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.cpu_roles import ROLES, role_cpu_seconds, role_delta

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def test_a_busy_child_counts_as_driver_cpu() -> None:
    before = role_cpu_seconds()
    assert before is not None and set(before) == set(ROLES)
    subprocess.run([sys.executable, "-c", BUSY], check=True)  # reaped: counted with us
    delta = role_delta(before, role_cpu_seconds())
    assert delta is not None
    assert delta["driver"] >= 0.25  # (a session's JVM or RGW may be running too: not judged)
    assert all(value >= 0 for value in delta.values())


def test_unknown_root_and_missing_samples() -> None:
    assert role_cpu_seconds(root=2**22 + 12345) is None  # above Linux's largest pid
    assert role_delta(None, {role: 1.0 for role in ROLES}) is None
