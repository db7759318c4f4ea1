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

import time
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

    def record_kafka_fetch(
        self, topic: str, size: int, seconds: float, gets: int, ok: bool
    ) -> None:
        """One fetch of records from remote storage (KIP-405's RemoteFetch* meters):
        ``size`` bytes read from the store, ``gets`` object-store GETs it made, ``seconds``
        from the call to its last byte (:class:`KafkaFetchMeter` measures one)."""
        ...

    def record_kafka_delete(self, topic: str, ok: bool) -> None:
        """One remote segment deletion (KIP-405's RemoteDeleteRequestsPerSec and
        RemoteDeleteErrorsPerSec)."""
        ...

    def set_kafka_remote_log_size(self, sizes: Iterable[tuple[str, int, int, int]]) -> None:
        """``(topic, partition, bytes, segments)`` of every partition's remote log (the
        ``.log`` bytes and count of its copied segments: KIP-963's RemoteLogSizeBytes and
        RemoteLogMetadataCount); partitions not listed are dropped."""
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

    def record_kafka_fetch(
        self, topic: str, size: int, seconds: float, gets: int, ok: bool
    ) -> None:
        pass

    def record_kafka_delete(self, topic: str, ok: bool) -> None:
        pass

    def set_kafka_remote_log_size(self, sizes: Iterable[tuple[str, int, int, int]]) -> None:
        pass

    def set_export_lag(self, topic: str, target: str, entries: int, seconds: float | None) -> None:
        pass

    def refresh_rates(self) -> None:
        pass


#: the shared no-op set (stateless)
NO_METRICS: Metrics = NullMetrics()


class KafkaFetchMeter:
    """One remote fetch, measured: the hook a fetch calls. ``add_get()`` for each object-store
    GET it makes, ``add_bytes(n)`` for the bytes they bring; used as a context manager it
    records the fetch when the block ends (``ok`` False when it ends with an exception), else
    :meth:`done` records it once::

        with KafkaFetchMeter(ctx.metrics, topic) as meter:
            data = store.get_range(...)
            meter.add_get()
            meter.add_bytes(len(data))

    Cheap when metrics are off (nothing is timed)."""

    def __init__(self, metrics: Metrics, topic: str) -> None:
        self.metrics = metrics
        self.topic = topic
        self.gets = 0
        self.bytes = 0
        self._started = time.perf_counter() if metrics.enabled else 0.0
        self._recorded = False

    def add_get(self, count: int = 1) -> None:
        self.gets += count

    def add_bytes(self, size: int) -> None:
        self.bytes += size

    def done(self, ok: bool = True) -> None:
        """Record the fetch (once; later calls do nothing)."""
        if self._recorded or not self.metrics.enabled:
            return
        self._recorded = True
        seconds = time.perf_counter() - self._started
        self.metrics.record_kafka_fetch(self.topic, self.bytes, seconds, self.gets, ok)

    def __enter__(self) -> KafkaFetchMeter:
        return self

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        self.done(ok=kind is None)
