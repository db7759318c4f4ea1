"""Registration of this package's DataFrame sources with a Spark session: ``offloaded-ledger``
(:mod:`offloader.spark.source`), ``pulsar-messages`` (:mod:`offloader.spark.messages`) and
``kafka-segments`` (:mod:`offloader.spark.kafka_source`).

It sits above the three source modules, which import one another only downward
(``messages`` builds on ``source``), so no module of the package imports one that imports it.
"""

from __future__ import annotations

from typing import Any

from offloader.spark.kafka_source import KafkaSegmentsSource
from offloader.spark.messages import PulsarMessagesSource
from offloader.spark.session import propagate_aws_env
from offloader.spark.source import PUSHDOWN_CONF, OffloadedLedgerSource

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the sources (``offloaded-ledger``, ``pulsar-messages`` and ``kafka-segments``)
    and enable Python filter pushdown for this session; copies the driver's ``AWS_*``
    environment to the Python workers (register again after changing it)."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    propagate_aws_env(spark.sparkContext)
    spark.dataSource.register(OffloadedLedgerSource)
    spark.dataSource.register(PulsarMessagesSource)
    spark.dataSource.register(KafkaSegmentsSource)
