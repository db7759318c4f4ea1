"""The crash harnesses' worker launcher (:mod:`tests.crash.launcher`): a worker forked from the
zygote behaves as a fresh ``python -m`` would (argv, environment, working directory, exit code,
stderr, its own crash point, SIGKILL by pid), in both modes."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from offloader import crashpoints
from tests.crash import launcher

PROBE = "tests.crash.probe_worker"


@pytest.fixture(params=["zygote", "fresh"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(launcher.FRESH_ENV, "1" if request.param == "fresh" else "0")
    return str(request.param)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    return {**env, **extra}


def test_runs_like_python_dash_m(mode: str) -> None:
    worker = launcher.spawn(PROBE, ["3"], _env(PROBE=f"value-{mode}"))
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 3
    lines = out.splitlines()
    assert lines[0] == "READY" and lines[-1] == "DONE", out
    assert lines[1] == f"argv=['3'] cwd={launcher.REPO} PROBE=value-{mode}"
    assert lines[2:4] == ["passed 1", "passed 2"]
    assert err.strip().splitlines()[-1] == "to stderr", err


def test_dies_at_its_own_crash_point(mode: str) -> None:
    worker = launcher.spawn(PROBE, ["0"], _env(**{crashpoints.ENV_VAR: "probe.point:2"}))
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == -signal.SIGKILL
    assert "passed 1" in out and "passed 2" not in out and "DONE" not in out
    after = launcher.spawn(PROBE, ["0"], _env())  # the next one is not armed
    out, _ = after.communicate(timeout=60)
    assert after.returncode == 0 and out.endswith("DONE\n")


def test_kill_by_pid_after_ready(mode: str) -> None:
    worker = launcher.spawn(PROBE, ["0", "60"], _env())
    assert worker.stdout is not None and worker.stdout.readline() == "READY\n"
    assert worker.poll() is None
    os.kill(worker.pid, 0)  # a process of its own
    with pytest.raises(subprocess.TimeoutExpired):
        worker.wait(timeout=0.2)
    worker.kill()
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == -signal.SIGKILL and "DONE" not in out


def test_a_missing_module_fails_with_its_error(mode: str) -> None:
    worker = launcher.spawn("tests.crash.no_such_worker", [], _env())
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 1 and out == ""
    assert "No module named tests.crash.no_such_worker" in err, err
