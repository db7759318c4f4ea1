"""PySpark's Python worker daemon, with this package's read path imported before it forks.

Spark starts one daemon per worker module (``python -m <daemon module> <worker module>``) and
forks every Python worker of that module from it. PySpark's own daemon (``pyspark.daemon``)
imports nothing heavy, so each forked executor worker imports pyarrow, the sources, botocore
and the ``formats`` C speedups itself: 0.5-0.9 CPU-s per worker, paid again whenever Spark
re-forks a worker (it stops those idle for a minute). Set

    spark.python.daemon.module=offloader.spark.daemon

(:func:`offloader.spark.session.local_session` does; with ``spark-submit``, pass it as
``--conf``) and the daemon imports them once, before forking: every worker then starts with
them loaded (copy-on-write). The daemon then freezes its objects out of the garbage
collector's sight (``gc.freeze``): PySpark's daemon runs a full ``gc.collect()`` in the worker
after every task, which walks every object the imports made (about 110,000, 44 ms of CPU per
task here) unless they are frozen. Nothing here connects, looks up credentials or starts a
thread (PySpark's daemon forks, and a thread started before a fork does not survive it): the
one S3 client built to parse the model has placeholder keys and is closed unused. Spark uses
this setting for executor workers only: the data source planner workers
(``pyspark.sql.worker.*``) always run ``pyspark.daemon``.

A module that fails to import is skipped (the worker then imports it, or reports the error,
as it would without this daemon).
"""

from __future__ import annotations

import gc
import importlib

__all__ = ["DAEMON_CONF", "DAEMON_MODULE", "PRELOAD", "main", "preload", "prepare"]

DAEMON_CONF = "spark.python.daemon.module"
DAEMON_MODULE = "offloader.spark.daemon"

#: what every executor worker of a scan imports: PySpark's worker itself, Arrow, the three
#: sources (the data source classes are unpickled by reference, which imports them) and the
#: S3 store (boto3 and botocore)
PRELOAD = (
    "pyspark.worker",
    "pyarrow",
    "offloader.spark.source",
    "offloader.spark.messages",
    "offloader.spark.kafka_source",
    "offloader.spark.rdd",
    "offloader.store.s3",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules`` and parse the S3 client's service model into the shared botocore
    loader (:func:`offloader.store.s3_client.warm_loader`; a new client in a worker then costs
    ~15 ms of CPU, not ~130 ms); the names of the modules that imported."""
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the worker imports (and reports) it again
            continue
        loaded.append(name)
    try:
        from offloader.store.s3_client import warm_loader

        warm_loader()
    except Exception:  # the first client of a worker parses the model itself
        pass
    return loaded


def prepare() -> list[str]:
    """:func:`preload`, then freeze every object so far out of the collector's sight (forked
    workers inherit the frozen generation); the names of the modules that imported."""
    from pyspark import daemon  # noqa: F401 - frozen with the rest

    loaded = preload()
    gc.collect()
    gc.freeze()
    return loaded


def main() -> None:
    """Prepare, then run PySpark's daemon (its worker module is still ``sys.argv[1]``)."""
    prepare()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":  # pragma: no cover - started by Spark's PythonWorkerFactory
    main()
