"""``local_session`` starts quietly: a fresh process that starts a session, runs a job and
stops prints nothing on standard error (no "Setting default log level" banner, no Hadoop
NativeCodeLoader or JVM incubator-module warning), while an error still reaches it; and the
filter of the JVM's standard error drops only the start-up lines it names."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from offloader.spark.session import _forward

ROOT = Path(__file__).resolve().parents[2]

JOB = """
import sys
from offloader.spark import local_session
spark = local_session("quiet")
print(spark.range(10).count(), flush=True)
print("after the start", file=sys.stderr, flush=True)
spark.stop()
"""


@pytest.mark.spark
def test_a_fresh_session_prints_nothing_on_stderr() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", JOB],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "10\n"
    assert proc.stderr == "after the start\n"


def test_the_filter_drops_the_jvm_start_up_lines_only() -> None:
    source_r, source_w = os.pipe()
    target_r, target_w = os.pipe()
    thread = threading.Thread(target=_forward, args=(source_r, target_w))
    thread.start()
    with os.fdopen(source_w, "wb") as jvm:
        jvm.write(b"WARNING: Using incubator modules: jdk.incubator.vector\n")
        jvm.write(b"26/11/27 21:00:00 ERROR Executor: Exception in task 0.0\n")
        jvm.write(b"a last line without a newline")
    thread.join(timeout=10)
    with os.fdopen(target_r, "rb") as out:
        assert out.read() == (
            b"26/11/27 21:00:00 ERROR Executor: Exception in task 0.0\n"
            b"a last line without a newline"
        )


def test_the_filter_drains_its_pipe_when_stderr_is_gone() -> None:
    source_r, source_w = os.pipe()
    target_r, target_w = os.pipe()
    os.close(target_r)  # writes to target_w now fail (EPIPE)
    thread = threading.Thread(target=_forward, args=(source_r, target_w))
    thread.start()
    with os.fdopen(source_w, "wb") as jvm:
        for _ in range(4096):  # 256 KiB: more than a pipe holds, so a stopped reader blocks
            jvm.write(b"x" * 63 + b"\n")
    thread.join(timeout=10)
    assert not thread.is_alive()
