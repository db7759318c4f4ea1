"""Metrics: what the flows record (:class:`Metrics`, a no-op by default), the lag computations
the service publishes, and the ``--metrics-addr`` parser.

The Prometheus exporter (:mod:`offloader.metrics.prometheus`, the only module that imports
``prometheus_client``) is not imported here: a process without ``--metrics-addr`` never loads it.
"""

from __future__ import annotations

from offloader.metrics.addr import MetricsAddress, parse_metrics_addr
from offloader.metrics.base import NO_METRICS, KafkaFetchMeter, Metrics, NullMetrics, TopicLag
from offloader.metrics.lag import Lag, deletion_backlog, kafka_copy_lag, offload_lag

__all__ = [
    "NO_METRICS",
    "KafkaFetchMeter",
    "Lag",
    "Metrics",
    "MetricsAddress",
    "NullMetrics",
    "TopicLag",
    "deletion_backlog",
    "kafka_copy_lag",
    "offload_lag",
    "parse_metrics_addr",
]
