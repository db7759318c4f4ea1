"""Spark reads of offloaded ledgers: an RDD with one partition per data block.

With :mod:`offloader.spark.source` (the DataFrame source), the only modules that import pyspark.
The driver plans the read (:mod:`offloader.spark.plan`): it reads each ledger's index and makes one
picklable :class:`~offloader.spark.plan.BlockTask` per block; ``sc.parallelize(tasks,
numSlices=len(tasks))`` puts exactly one task in each partition, and each executor task opens its
own store client and yields ``(topic, ledger_id, entry_id, payload)`` records.

Sources of :func:`offloaded_rdd`:

* a list of ``(ledger_id, uuid)`` pairs plus ``store_url`` (no metadata store);
* ``"discover"`` plus ``store_url``: every ``*-index`` key in the store;
* topic names (a string or a list of strings) plus ``home``: the metadata store lists each
  topic's ledgers; offloaded ones are read from the object store, the others (the open ledger
  too, up to the entries the metadata counts when the plan is made) from the local ledger
  store, so a topic reads completely whichever tier holds each ledger.

Credentials never travel in descriptors: the ``AWS_*`` variables of the driver's environment are
copied into ``sc.environment`` (the environment of the Python workers Spark starts from then on).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark import RDD, SparkContext

from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.selection import TopicSelection
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.plan import (
    Record,
    StoreSpec,
    Task,
    plan_discover,
    plan_pairs,
    plan_topics,
)
from offloader.spark.session import propagate_aws_env
from offloader.spark.tasks import read_task

__all__ = ["DISCOVER", "offloaded_rdd", "plan", "tasks_rdd"]

DISCOVER = "discover"
#: where the metadata store and local ledgers live unless told (the CLI's default ``--home``)
DEFAULT_HOME = ".offloader"

Source = str | Sequence[str] | Sequence[tuple[int, str]]


def plan(
    source: Source,
    settings: OffloadSettings | None = None,
    *,
    store_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    home: str | None = None,
    entry_filter: EntryFilter | None = None,
    metadata: str | None = None,
) -> list[Task]:
    """The tasks (one per block, or per chunk of a local ledger) of a source, pruned. A
    source given as one string other than ``discover`` is a topic selection in the one form
    of :mod:`offloader.selection` (names, a namespace, or a regex); a list holds exact names."""
    settings = settings or OffloadSettings()
    if isinstance(source, str) and source == DISCOVER:
        spec = StoreSpec(_need_store(store_url, "discover"), endpoint_url, region, settings)
        return list(plan_discover(spec, entry_filter=entry_filter))
    items = [source] if isinstance(source, str) else list(source)
    if all(isinstance(i, str) for i in items):
        return plan_topics(
            home or DEFAULT_HOME,
            TopicSelection.parse(source) if isinstance(source, str) else [str(i) for i in items],
            settings,
            store_url=store_url,
            endpoint_url=endpoint_url,
            region=region,
            entry_filter=entry_filter,
            metadata=metadata,
        )
    if all(isinstance(i, tuple | list) and len(i) == 2 for i in items):
        spec = StoreSpec(
            _need_store(store_url, "(ledger_id, uuid) pairs"), endpoint_url, region, settings
        )
        pairs = [(int(i[0]), str(i[1])) for i in items]
        return list(plan_pairs(spec, pairs, entry_filter=entry_filter))
    raise ConfigError(
        "source must be 'discover', a list of (ledger_id, uuid) pairs, or topic names"
    )


def _need_store(store_url: str | None, what: str) -> str:
    if not store_url:
        raise ConfigError(f"reading {what} needs store_url (s3://bucket[/prefix] or file://)")
    return store_url


def tasks_rdd(
    sc: SparkContext,
    tasks: Sequence[Task],
    entry_filter: EntryFilter | None = None,
    *,
    get_counter: Any = None,
) -> RDD[Record]:
    """An RDD with exactly one partition per task. ``get_counter`` (an int accumulator) adds
    the number of GETs each block read issued."""
    propagate_aws_env(sc)
    if not tasks:
        return sc.emptyRDD()
    flt = entry_filter

    def read_partition(part: Iterable[Task]) -> Iterator[Record]:
        on_gets = get_counter.add if get_counter is not None else None
        return itertools.chain.from_iterable(read_task(task, flt, on_gets=on_gets) for task in part)

    rdd = sc.parallelize(list(tasks), numSlices=len(tasks))
    return rdd.mapPartitions(read_partition, preservesPartitioning=True)


def offloaded_rdd(
    sc: SparkContext,
    source: Source,
    settings: OffloadSettings | None = None,
    *,
    store_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    home: str | None = None,
    metadata: str | None = None,
    ledger_ids: Iterable[int] | None = None,
    entry_range: tuple[int, int] | None = None,
    get_counter: Any = None,
) -> RDD[Record]:
    """An RDD of ``(topic, ledger_id, entry_id, payload bytes)``, one partition per block.

    ``ledger_ids`` / ``entry_range`` (inclusive) restrict the read: blocks that cannot hold a
    matching entry are not fetched, and entries outside the range are dropped. ``settings``
    gives the read buffer (``read_buffer_size``, 1 MiB) and the S3 client's timeouts.
    ``metadata`` (a ``postgresql://`` URL): topics are looked up in the shared store, so
    every broker's offloaded ledgers are read.
    Corrupt blocks fail the job with the typed error (``ChecksumMismatchError`` ...).
    """
    flt = EntryFilter.from_options(ledger_ids, entry_range)
    propagate_aws_env(sc)
    tasks = plan(
        source,
        settings,
        store_url=store_url,
        endpoint_url=endpoint_url,
        region=region,
        home=home,
        entry_filter=flt,
        metadata=metadata,
    )
    return tasks_rdd(sc, tasks, flt, get_counter=get_counter)
