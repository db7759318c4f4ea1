"""The Spark session of this tool's reads: a loopback ``local_session`` (quiet: its JVM logs
errors only, see ``log4j2.properties`` beside this module) and the ``AWS_*`` environment copied
to the Python workers (credentials never travel in task descriptors)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from offloader.spark.daemon import DAEMON_CONF, DAEMON_MODULE
from offloader.spark.plan import aws_environment

__all__ = ["QUIET_LOG4J2", "local_session", "propagate_aws_env"]

#: the JVM's log4j2 configuration: errors only, so a session starts without Spark's INFO/WARN
#: lines (the "Setting default log level" banner, Hadoop's NativeCodeLoader warning)
QUIET_LOG4J2 = Path(__file__).with_name("log4j2.properties")


def local_session(app_name: str = "ledger-offloader", *, master: str = "local[2]") -> Any:
    """A SparkSession on this machine, kept on loopback (PYSPARK_PYTHON defaults to this
    interpreter, SPARK_LOCAL_IP and the driver address to 127.0.0.1; no UI; the JVM logs errors
    only, from its start: :data:`QUIET_LOG4J2`). Its executors' Python workers are forked from
    :mod:`offloader.spark.daemon`, which imports the read path once for all of them."""
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
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J2}")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.python.worker.reuse", "true")
        .config(DAEMON_CONF, DAEMON_MODULE)
        # the JVM talks to Python workers over a Unix socket: over loopback TCP, each task's
        # exchange stalls about 40 ms (Nagle and delayed ACKs), 3x the cost of a small task
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def propagate_aws_env(sc: Any) -> None:
    """Copy this process's ``AWS_*`` variables into the environment of new Python workers."""
    env = sc.environment
    for key in [k for k in env if k.startswith("AWS_")]:
        del env[key]
    env.update(aws_environment())
