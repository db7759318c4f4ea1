"""The metrics set the flows record into: the :class:`Metrics` Protocol and its no-op default.

The :class:`~offloader.runtime.Runtime` carries one (``rt.metrics``); the offload commit
protocol, the tiered read, the store wrapper (:mod:`offloader.store.metered`) and the service
call its ``record_*`` and ``set_*`` methods without knowing whether anything is exported.
:class:`NullMetrics` (``NO_METRICS``) is what they get when metrics are off: every method does
nothing. :class:`~offloader.metrics.prometheus.PrometheusMetrics` is the exporting one.

Topics are full names (``persistent://tenant/namespace/topic``); times are seconds (the
exporter converts to the units of Pulsar's metric where Pulsar uses microseconds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class TopicLag:
    """What a topic has left to do, as the service last computed it.

    ``offload_*``: closed ledgers the offload thresholds (or a pending retry) make eligible whose
    offload is not complete. ``deletion_*``: offloaded ledgers whose deletion lag has passed and
    whose local copy still exists (the deletion backlog)."""

    offload_ledgers: int = 0
    offload_bytes: int = 0
    deletion_ledgers: int = 0
    deletion_bytes: int = 0


@runtime_checkable
class Metrics(Protocol):
    """What the flows record. Every method is cheap and thread-safe, and never raises."""

    @property
    def enabled(self) -> bool:
        """False for the no-op set: callers may skip work done only to record (lag scans)."""
        ...

    # --- Pulsar's LedgerOffloaderStats ------------------------------------------------------
    def record_offload_bytes(self, topic: str, size: int) -> None: ...

    def record_offload_error(self, topic: str) -> None: ...

    def record_write_to_storage_error(self, topic: str) -> None: ...

    def record_read_ledger_latency(self, topic: str, seconds: float) -> None: ...

    def record_read_offload_error(self, topic: str) -> None: ...

    def record_read_offload_bytes(self, topic: str, size: int) -> None: ...

    def record_read_offload_index_latency(self, topic: str, seconds: float) -> None: ...

    def record_read_offload_data_latency(self, topic: str, seconds: float) -> None: ...

    def record_delete_offload_ops(self, topic: str, succeed: bool) -> None: ...

    # --- ours ---------------------------------------------------------------------------------
    def record_store_request(
        self, backend: str, operation: str, outcome: str, seconds: float
    ) -> None:
        """One object-store request (``outcome``: ``success`` or the error's kind)."""
        ...

    def record_tick(self, seconds: float, ok: bool) -> None:
        """One service pass; ``ok`` False when a step of it failed."""
        ...

    def set_topic_lags(self, lags: dict[str, TopicLag]) -> None:
        """The lag of every topic the service knows (topics not listed are dropped)."""
        ...

    def set_kafka_copy_lag(self, lags: Iterable[tuple[str, int, int, int]]) -> None:
        """``(topic, partition, bytes, segments)`` of every partition of the configured log
        directories (partitions not listed are dropped)."""
        ...

    def record_kafka_copy(self, topic: str, size: int, ok: bool) -> None:
        """One Kafka segment copy to remote storage (KIP-405's RemoteCopy* meters)."""
        ...

    def set_export_lag(self, topic: str, target: str, entries: int, seconds: float | None) -> None:
        """An export's lag after its run, as ``export status`` shows it: the entries after its
        watermark and how far behind the watermark's publish time is (None: nothing exported
        yet, the time is unknown)."""
        ...

    def refresh_rates(self) -> None:
        """Turn the bytes recorded since the last refresh into the ``*_rate`` gauges."""
        ...


class NullMetrics:
    """Metrics off: every method does nothing."""

    @property
    def enabled(self) -> bool:
        return False

    def record_offload_bytes(self, topic: str, size: int) -> None:
        pass

    def record_offload_error(self, topic: str) -> None:
        pass

    def record_write_to_storage_error(self, topic: str) -> None:
        pass

    def record_read_ledger_latency(self, topic: str, seconds: float) -> None:
        pass

    def record_read_offload_error(self, topic: str) -> None:
        pass

    def record_read_offload_bytes(self, topic: str, size: int) -> None:
        pass

    def record_read_offload_index_latency(self, topic: str, seconds: float) -> None:
        pass

    def record_read_offload_data_latency(self, topic: str, seconds: float) -> None:
        pass

    def record_delete_offload_ops(self, topic: str, succeed: bool) -> None:
        pass

    def record_store_request(
        self, backend: str, operation: str, outcome: str, seconds: float
    ) -> None:
        pass

    def record_tick(self, seconds: float, ok: bool) -> None:
        pass

    def set_topic_lags(self, lags: dict[str, TopicLag]) -> None:
        pass

    def set_kafka_copy_lag(self, lags: Iterable[tuple[str, int, int, int]]) -> None:
        pass

    def record_kafka_copy(self, topic: str, size: int, ok: bool) -> None:
        pass

    def set_export_lag(self, topic: str, target: str, entries: int, seconds: float | None) -> None:
        pass

    def refresh_rates(self) -> None:
        pass


#: the shared no-op set (stateless)
NO_METRICS: Metrics = NullMetrics()
