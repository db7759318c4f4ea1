"""The Spark session of this tool's reads: a loopback ``local_session`` and the ``AWS_*``
environment copied to the Python workers (credentials never travel in task descriptors)."""

from __future__ import annotations

import os
import sys
from typing import Any

from offloader.spark.daemon import DAEMON_CONF, DAEMON_MODULE
from offloader.spark.plan import AWS_ENV_PREFIXES, aws_environment

__all__ = ["HIDE_TRACEBACK_CONF", "local_session", "propagate_aws_env"]

#: Spark shows a Python worker's error as its last line only (``type: message``), not the
#: traceback before it, so our one-line typed errors come first (planner and executors alike)
HIDE_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"


def local_session(
    app_name: str = "ledger-offloader", *, master: str = "local[2]", tracebacks: bool = False
) -> Any:
    """A SparkSession on this machine, kept on loopback (PYSPARK_PYTHON defaults to this
    interpreter, SPARK_LOCAL_IP and the driver address to 127.0.0.1; no UI). Its executors'
    Python workers are forked from :mod:`offloader.spark.daemon`, which imports the read path
    once for all of them. A Python worker's error reads as its message alone (the sources'
    errors are typed and name what failed), unless ``tracebacks`` asks for the whole Python
    traceback (:data:`HIDE_TRACEBACK_CONF`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.python.worker.reuse", "true")
        .config(DAEMON_CONF, DAEMON_MODULE)
        # the JVM talks to Python workers over a Unix socket: over loopback TCP, each task's
        # exchange stalls about 40 ms (Nagle and delayed ACKs), 3x the cost of a small task
        .config("spark.python.unix.domain.socket.enabled", "true")
        .config(HIDE_TRACEBACK_CONF, "false" if tracebacks else "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def propagate_aws_env(sc: Any) -> None:
    """Copy this process's store variables (``AWS_*``, GCS's and Azure's) into the environment
    of new Python workers."""
    env = sc.environment
    for key in [k for k in env if k.startswith(AWS_ENV_PREFIXES)]:
        del env[key]
    env.update(aws_environment())
