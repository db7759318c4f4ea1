"""Spark reads of offloaded ledgers: the RDD reader and the DataFrame sources.

The only package that imports pyspark. Its parts:

* ``plan``: the driver's planning (one picklable task per block; indexes read on the driver);
  importable without pyspark.
* ``tasks``: the executor side (each task opens its own store client and reads its block).
* ``entry_filter``: the pruning shared by the RDD reader and the DataFrame sources.
* ``buffers``: block buffers reused across tasks in a Python worker.
* ``session``: a loopback ``local_session`` and the ``AWS_*`` environment of the workers.
* ``daemon``: the Python worker daemon ``local_session`` names (``spark.python.daemon.module``).
* ``rdd``: :func:`offloaded_rdd`, one partition per block.
* ``source``: the ``offloaded-ledger`` DataFrame source (PySpark's Python Data Source API).
* ``messages`` and ``message_rows``: the ``pulsar-messages`` source (decoded Pulsar messages).
* ``kafka_source``: the ``kafka-segments`` source.
* ``sources``: :func:`register`, which registers the three sources with a session.

May import: ``formats``, the value modules, ``store``, ``metadata``, ``ledgers`` and
``read``. Must not import ``offload``, ``topics``, ``api`` or ``service``. The names below are
loaded on first use, so importing ``offloader.spark.plan`` does not import pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offloader.lazy import lazy_attribute

if TYPE_CHECKING:
    from offloader.spark.rdd import DISCOVER, offloaded_rdd, plan, tasks_rdd
    from offloader.spark.session import local_session, propagate_aws_env
    from offloader.spark.sources import register

__all__ = [
    "DISCOVER",
    "local_session",
    "offloaded_rdd",
    "plan",
    "propagate_aws_env",
    "register",
    "tasks_rdd",
]

_WHERE = {
    "DISCOVER": "offloader.spark.rdd",
    "offloaded_rdd": "offloader.spark.rdd",
    "plan": "offloader.spark.rdd",
    "tasks_rdd": "offloader.spark.rdd",
    "local_session": "offloader.spark.session",
    "propagate_aws_env": "offloader.spark.session",
    "register": "offloader.spark.sources",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, name)
