"""bench/cpu_roles.py: CPU seconds of this process tree by role, from /proc (real processes)."""

from __future__ import annotations

import os
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


@pytest.mark.s3  # starts moto's server in a child process
def test_moto_in_a_child_process_is_the_s3_server_role() -> None:
    """bench.moto_process: the server's CPU (a few hundred PUTs) lands in ``s3_server``, not
    in ``driver``, while it runs; it stops when the context ends."""
    from bench import cpu_roles
    from bench.moto_process import start_moto_process

    with start_moto_process() as endpoint:
        (pid,) = cpu_roles.SERVER_PIDS
        client = endpoint.client()
        bucket = endpoint.new_bucket()
        before = role_cpu_seconds()
        for i in range(300):
            client.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x" * 1000)
        delta = role_delta(before, role_cpu_seconds())
        assert delta is not None and delta["s3_server"] > 0.05, delta
    assert not cpu_roles.SERVER_PIDS
    with pytest.raises(OSError):
        os.kill(pid, 0)
