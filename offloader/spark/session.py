"""The Spark session of this tool's reads: a loopback ``local_session`` (quiet: its JVM logs
errors only, see ``log4j2.properties`` beside this module) and the ``AWS_*`` environment copied
to the Python workers (credentials never travel in task descriptors)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offloader.spark.daemon import DAEMON_CONF, DAEMON_MODULE
from offloader.spark.plan import AWS_ENV_PREFIXES, aws_environment

__all__ = ["HIDE_TRACEBACK_CONF", "JVM_NOISE", "QUIET_LOG4J2", "local_session", "propagate_aws_env"]

#: Spark shows a Python worker's error as its last line only (``type: message``), not the
#: traceback before it, so our one-line typed errors come first (planner and executors alike)
HIDE_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"

#: the JVM's log4j2 configuration: errors only, so a session starts without Spark's INFO/WARN
#: lines (the "Setting default log level" banner, Hadoop's NativeCodeLoader warning)
QUIET_LOG4J2 = Path(__file__).with_name("log4j2.properties")

#: what the JVM itself prints on standard error as it starts (before any logging), dropped
JVM_NOISE = (b"WARNING: Using incubator modules:",)


def _forward(source: int, target: int) -> None:
    """Copy lines from fd ``source`` to fd ``target`` until EOF, without :data:`JVM_NOISE`.
    It reads to the end whatever happens to ``target``: a pipe nobody drains would block the
    JVM's next write to its standard error."""
    with os.fdopen(source, "rb") as lines, os.fdopen(target, "wb", buffering=0) as out:
        for line in lines:
            if not line.startswith(JVM_NOISE):
                with contextlib.suppress(OSError, ValueError):
                    out.write(line)


@contextlib.contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """While the JVM is spawned, standard error (fd 2, which the JVM inherits) is a pipe that a
    daemon thread copies back to the real standard error for the JVM's whole life, dropping
    :data:`JVM_NOISE`; this process's fd 2 is restored on exit."""
    try:
        saved = os.dup(2)
    except OSError:  # no standard error at all: nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    threading.Thread(
        target=_forward, args=(read_end, os.dup(saved)), name="jvm-stderr", daemon=True
    ).start()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def local_session(
    app_name: str = "ledger-offloader", *, master: str = "local[2]", tracebacks: bool = False
) -> Any:
    """A SparkSession on this machine, kept on loopback (PYSPARK_PYTHON defaults to this
    interpreter, SPARK_LOCAL_IP and the driver address to 127.0.0.1; no UI; quiet: the JVM
    logs errors only, from its start (:data:`QUIET_LOG4J2`), and its own start-up warnings are
    dropped from its standard error (:data:`JVM_NOISE`)). Its executors' Python workers are
    forked from :mod:`offloader.spark.daemon`, which imports the read path once for all of
    them. A Python worker's error reads as its message alone (the sources' errors are typed and
    name what failed), unless ``tracebacks`` asks for the whole Python traceback
    (:data:`HIDE_TRACEBACK_CONF`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    starts_jvm = SparkContext._gateway is None
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J2}")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.python.worker.reuse", "true")
        .config(DAEMON_CONF, DAEMON_MODULE)
        # the JVM talks to Python workers over a Unix socket: over loopback TCP, each task's
        # exchange stalls about 40 ms (Nagle and delayed ACKs), 3x the cost of a small task
        .config("spark.python.unix.domain.socket.enabled", "true")
        .config(HIDE_TRACEBACK_CONF, "false" if tracebacks else "true")
    )
    with _jvm_stderr_filtered() if starts_jvm else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def propagate_aws_env(sc: Any) -> None:
    """Copy this process's store variables (``AWS_*``, GCS's and Azure's) into the environment
    of new Python workers."""
    env = sc.environment
    for key in [k for k in env if k.startswith(AWS_ENV_PREFIXES)]:
        del env[key]
    env.update(aws_environment())
