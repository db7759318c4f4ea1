"""The Prometheus exporter: :class:`PrometheusMetrics` (a :class:`~offloader.metrics.base.Metrics`
on its own ``CollectorRegistry``) and :func:`serve_metrics`, the HTTP endpoint of
``service run --metrics-addr``. The only module that imports ``prometheus_client``.

Pulsar's names and labels come from its ``LedgerOffloaderStatsImpl`` (``brk_ledgeroffloader_*``,
labels ``namespace`` and ``topic`` as with topic-level metrics on, ``status`` for deletions,
latencies as Summaries in microseconds); ``spec/metrics.md`` lists every metric with its source.
Metrics of our own are ``offloader_*``; Kafka's copy lag is named as a JMX exporter with
lower-case output names publishes Kafka's ``BrokerTopicMetrics`` (``kafka_server_*``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.exposition import generate_latest, start_http_server

from offloader.errors import ConfigError, InvalidName
from offloader.logs import get_logger
from offloader.metrics.addr import MetricsAddress
from offloader.metrics.base import TopicLag
from offloader.naming import TopicName

__all__ = ["MetricsServer", "PrometheusMetrics", "serve_metrics"]

log = get_logger(__name__)

UNKNOWN = "unknown"
TOPIC_LABELS = ("namespace", "topic")
STORE_LABELS = ("backend", "operation", "outcome")
#: object-store request latencies: a few milliseconds (a HEAD nearby) to a minute (a 64M part)
STORE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: a remote fetch: a ranged GET nearby (milliseconds) to KIP-1018's seconds-long tails
FETCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: GETs per fetch: 1 is the goal (an index GET the first time a segment is read adds one)
GETS_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 16, 32)
TICK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
MICROS = 1_000_000


@functools.lru_cache(maxsize=4096)
def topic_labels(topic: str) -> tuple[str, str]:
    """``(namespace, topic)`` as Pulsar labels them; ``unknown`` for what does not parse."""
    if not topic:
        return UNKNOWN, UNKNOWN
    try:
        return str(TopicName.parse(topic).namespace_name), topic
    except (InvalidName, ValueError):
        return UNKNOWN, topic


class PrometheusMetrics:
    """The metrics set, registered on a registry of its own (never the global one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry

        def counter(name: str, doc: str, labels: tuple[str, ...] = TOPIC_LABELS) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = TOPIC_LABELS) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        def summary(name: str, doc: str) -> Summary:
            return Summary(name, doc, TOPIC_LABELS, registry=r)

        p = "brk_ledgeroffloader_"
        self.offload_error = counter(p + "offload_error", "Ledger offloads that failed")
        self.offload_bytes = counter(p + "offload_bytes", "Entry bytes of ledgers offloaded")
        self.offload_rate = gauge(p + "offload_rate", "Offloaded bytes per second")
        self.write_storage_error = counter(
            p + "write_storage_error", "Offloads that failed writing to the object store"
        )
        self.read_offload_error = counter(p + "read_offload_error", "Offloaded reads that failed")
        self.read_bytes = counter(p + "read_bytes", "Entry bytes read from offloaded ledgers")
        self.read_offload_rate = gauge(p + "read_offload_rate", "Offloaded bytes read per second")
        self.read_offload_index_latency = summary(
            p + "read_offload_index_latency",
            "Opening an offloaded ledger (index), microseconds",
        )
        self.read_offload_data_latency = summary(
            p + "read_offload_data_latency", "Reading offloaded entries, microseconds"
        )
        self.read_ledger_latency = summary(
            p + "read_ledger_latency", "Reading a local ledger for its offload, microseconds"
        )
        self.delete_offload_ops = counter(
            p + "delete_offload_ops",
            "Deletions of offloaded objects, by status (succeed, failed)",
            (*TOPIC_LABELS, "status"),
        )
        self.offload_lag_ledgers = gauge(
            "offloader_offload_lag_ledgers", "Closed ledgers eligible for offload, not offloaded"
        )
        self.offload_lag_bytes = gauge(
            "offloader_offload_lag_bytes", "Bytes of ledgers eligible for offload, not offloaded"
        )
        self.deletion_backlog_ledgers = gauge(
            "offloader_deletion_backlog_ledgers",
            "Offloaded ledgers past their deletion lag whose local copy still exists",
        )
        self.deletion_backlog_bytes = gauge(
            "offloader_deletion_backlog_bytes",
            "Bytes of local copies past their deletion lag, not deleted yet",
        )
        export = (*TOPIC_LABELS, "target")
        self.export_lag_entries = gauge(
            "offloader_export_lag_entries",
            "Entries after the export's watermark, as export status shows them",
            export,
        )
        self.export_lag_seconds = gauge(
            "offloader_export_lag_seconds",
            "Now minus the publish time of the export watermark's message (0 when caught up)",
            export,
        )
        kafka = ("topic", "partition")
        self.kafka_copy_lag_bytes = gauge(
            "kafka_server_brokertopicmetrics_remotecopylagbytes",
            "Bytes of closed segments eligible for tiering, not in remote storage yet "
            "(KIP-405 RemoteCopyLagBytes)",
            kafka,
        )
        self.kafka_copy_lag_segments = gauge(
            "kafka_server_brokertopicmetrics_remotecopylagsegments",
            "Closed segments eligible for tiering, not in remote storage yet "
            "(KIP-405 RemoteCopyLagSegments)",
            kafka,
        )
        self.kafka_copy_requests = counter(
            "kafka_server_brokertopicmetrics_remotecopyrequests",
            "Segment copies to remote storage (KIP-405 RemoteCopyRequestsPerSec)",
            ("topic",),
        )
        self.kafka_copy_bytes = counter(
            "kafka_server_brokertopicmetrics_remotecopybytes",
            "Bytes of segments copied to remote storage (KIP-405 RemoteCopyBytesPerSec)",
            ("topic",),
        )
        self.kafka_copy_errors = counter(
            "kafka_server_brokertopicmetrics_remotecopyerrors",
            "Segment copies that failed (KIP-405 RemoteCopyErrorsPerSec)",
            ("topic",),
        )
        self.kafka_fetch_requests = counter(
            "kafka_server_brokertopicmetrics_remotefetchrequests",
            "Fetches of records from remote storage (KIP-405 RemoteFetchRequestsPerSec)",
            ("topic",),
        )
        self.kafka_fetch_bytes = counter(
            "kafka_server_brokertopicmetrics_remotefetchbytes",
            "Bytes read from remote storage by fetches (KIP-405 RemoteFetchBytesPerSec)",
            ("topic",),
        )
        self.kafka_fetch_errors = counter(
            "kafka_server_brokertopicmetrics_remotefetcherrors",
            "Fetches from remote storage that failed (KIP-405 RemoteFetchErrorsPerSec)",
            ("topic",),
        )
        self.kafka_fetch_seconds = Histogram(
            "offloader_kafka_remote_fetch_duration_seconds",
            "Latency of a fetch from remote storage, from the call to its last byte "
            "(Kafka's RemoteLogReaderFetchRateAndTimeMs, in seconds)",
            ("topic",),
            registry=r,
            buckets=FETCH_BUCKETS,
        )
        self.kafka_fetch_gets = Histogram(
            "offloader_kafka_remote_fetch_gets",
            "Object-store GETs per fetch from remote storage",
            ("topic",),
            registry=r,
            buckets=GETS_BUCKETS,
        )
        self.kafka_delete_requests = counter(
            "kafka_server_brokertopicmetrics_remotedeleterequests",
            "Remote segment deletions (KIP-405 RemoteDeleteRequestsPerSec)",
            ("topic",),
        )
        self.kafka_delete_errors = counter(
            "kafka_server_brokertopicmetrics_remotedeleteerrors",
            "Remote segment deletions that failed (KIP-405 RemoteDeleteErrorsPerSec)",
            ("topic",),
        )
        self.kafka_remote_log_size = gauge(
            "kafka_server_brokertopicmetrics_remotelogsizebytes",
            "Bytes of the partition's segments in remote storage (KIP-963 RemoteLogSizeBytes)",
            kafka,
        )
        self.kafka_remote_log_segments = gauge(
            "kafka_server_brokertopicmetrics_remotelogmetadatacount",
            "Segments of the partition in remote storage (KIP-963 RemoteLogMetadataCount)",
            kafka,
        )
        self.store_requests = counter(
            "offloader_store_requests", "Object store requests", STORE_LABELS
        )
        self.store_request_seconds = Histogram(
            "offloader_store_request_duration_seconds",
            "Object store request latency",
            STORE_LABELS,
            registry=r,
            buckets=STORE_BUCKETS,
        )
        self.ticks = counter("offloader_service_ticks", "Service passes, by outcome", ("outcome",))
        self.tick_seconds = Histogram(
            "offloader_service_tick_duration_seconds",
            "Service pass duration",
            registry=r,
            buckets=TICK_BUCKETS,
        )
        self.last_tick = Gauge(
            "offloader_service_last_tick_timestamp_seconds",
            "When the last service pass ended (Unix time)",
            registry=r,
        )
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self._last_refresh = time.monotonic()
        self._lag_labels: set[tuple[str, str]] = set()
        self._kafka_labels: set[tuple[str, str]] = set()
        self._remote_size_labels: set[tuple[str, str]] = set()
        self._store_children: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}

    @property
    def enabled(self) -> bool:
        return True

    def exposition(self) -> bytes:
        """The registry in the text format, as the endpoint serves it."""
        return generate_latest(self.registry)

    # --- Pulsar's LedgerOffloaderStats ----------------------------------------------------
    def record_offload_bytes(self, topic: str, size: int) -> None:
        labels = topic_labels(topic)
        self.offload_bytes.labels(*labels).inc(size)
        with self._lock:
            self._pending[labels][0] += size

    def record_offload_error(self, topic: str) -> None:
        self.offload_error.labels(*topic_labels(topic)).inc()

    def record_write_to_storage_error(self, topic: str) -> None:
        self.write_storage_error.labels(*topic_labels(topic)).inc()

    def record_read_ledger_latency(self, topic: str, seconds: float) -> None:
        self.read_ledger_latency.labels(*topic_labels(topic)).observe(seconds * MICROS)

    def record_read_offload_error(self, topic: str) -> None:
        self.read_offload_error.labels(*topic_labels(topic)).inc()

    def record_read_offload_bytes(self, topic: str, size: int) -> None:
        labels = topic_labels(topic)
        self.read_bytes.labels(*labels).inc(size)
        with self._lock:
            self._pending[labels][1] += size

    def record_read_offload_index_latency(self, topic: str, seconds: float) -> None:
        self.read_offload_index_latency.labels(*topic_labels(topic)).observe(seconds * MICROS)

    def record_read_offload_data_latency(self, topic: str, seconds: float) -> None:
        self.read_offload_data_latency.labels(*topic_labels(topic)).observe(seconds * MICROS)

    def record_delete_offload_ops(self, topic: str, succeed: bool) -> None:
        status = "succeed" if succeed else "failed"
        self.delete_offload_ops.labels(*topic_labels(topic), status).inc()

    # --- ours -----------------------------------------------------------------------------
    def record_store_request(
        self, backend: str, operation: str, outcome: str, seconds: float
    ) -> None:
        key = (backend, operation, outcome)
        children = self._store_children.get(key)
        if children is None:  # label lookups cost more than the update: keep the children
            children = (self.store_requests.labels(*key), self.store_request_seconds.labels(*key))
            self._store_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def record_tick(self, seconds: float, ok: bool) -> None:
        self.ticks.labels("ok" if ok else "error").inc()
        self.tick_seconds.observe(seconds)
        self.last_tick.set(time.time())

    def set_topic_lags(self, lags: dict[str, TopicLag]) -> None:
        with self._lock:
            seen = set()
            for topic, lag in lags.items():
                labels = topic_labels(topic)
                seen.add(labels)
                self.offload_lag_ledgers.labels(*labels).set(lag.offload_ledgers)
                self.offload_lag_bytes.labels(*labels).set(lag.offload_bytes)
                self.deletion_backlog_ledgers.labels(*labels).set(lag.deletion_ledgers)
                self.deletion_backlog_bytes.labels(*labels).set(lag.deletion_bytes)
            for gone in self._lag_labels - seen:
                for g in (
                    self.offload_lag_ledgers,
                    self.offload_lag_bytes,
                    self.deletion_backlog_ledgers,
                    self.deletion_backlog_bytes,
                ):
                    g.remove(*gone)
            self._lag_labels = seen

    def set_kafka_copy_lag(self, lags: Iterable[tuple[str, int, int, int]]) -> None:
        with self._lock:
            seen = set()
            for topic, partition, size, segments in lags:
                labels = (topic, str(partition))
                seen.add(labels)
                self.kafka_copy_lag_bytes.labels(*labels).set(size)
                self.kafka_copy_lag_segments.labels(*labels).set(segments)
            for gone in self._kafka_labels - seen:
                self.kafka_copy_lag_bytes.remove(*gone)
                self.kafka_copy_lag_segments.remove(*gone)
            self._kafka_labels = seen

    def record_kafka_copy(self, topic: str, size: int, ok: bool) -> None:
        self.kafka_copy_requests.labels(topic).inc()
        if ok:
            self.kafka_copy_bytes.labels(topic).inc(size)
        else:
            self.kafka_copy_errors.labels(topic).inc()

    def record_kafka_fetch(
        self, topic: str, size: int, seconds: float, gets: int, ok: bool
    ) -> None:
        self.kafka_fetch_requests.labels(topic).inc()
        self.kafka_fetch_bytes.labels(topic).inc(size)
        if not ok:
            self.kafka_fetch_errors.labels(topic).inc()
        self.kafka_fetch_seconds.labels(topic).observe(seconds)
        self.kafka_fetch_gets.labels(topic).observe(gets)

    def record_kafka_delete(self, topic: str, ok: bool) -> None:
        self.kafka_delete_requests.labels(topic).inc()
        if not ok:
            self.kafka_delete_errors.labels(topic).inc()

    def set_kafka_remote_log_size(self, sizes: Iterable[tuple[str, int, int, int]]) -> None:
        with self._lock:
            seen = set()
            for topic, partition, size, segments in sizes:
                labels = (topic, str(partition))
                seen.add(labels)
                self.kafka_remote_log_size.labels(*labels).set(size)
                self.kafka_remote_log_segments.labels(*labels).set(segments)
            for gone in self._remote_size_labels - seen:
                self.kafka_remote_log_size.remove(*gone)
                self.kafka_remote_log_segments.remove(*gone)
            self._remote_size_labels = seen

    def set_export_lag(self, topic: str, target: str, entries: int, seconds: float | None) -> None:
        labels = (*topic_labels(topic), target)
        self.export_lag_entries.labels(*labels).set(entries)
        if seconds is None:  # nothing exported yet: no time to measure from
            with contextlib.suppress(KeyError):
                self.export_lag_seconds.remove(*labels)
        else:
            self.export_lag_seconds.labels(*labels).set(seconds)

    def refresh_rates(self) -> None:
        """Pulsar's periodic ``run()``: bytes since the last refresh over the time since it."""
        with self._lock:
            now = time.monotonic()
            elapsed = max(now - self._last_refresh, 1e-9)
            self._last_refresh = now
            pending = {labels: tuple(sums) for labels, sums in self._pending.items()}
            for sums in self._pending.values():  # Pulsar's sumThenReset: a quiet topic is 0
                sums[:] = [0, 0]
        for labels, (offloaded, read) in pending.items():
            self.offload_rate.labels(*labels).set(offloaded / elapsed)
            self.read_offload_rate.labels(*labels).set(read / elapsed)


@dataclass
class MetricsServer:
    """A running endpoint: ``url`` is what to scrape; :meth:`close` stops it."""

    metrics: PrometheusMetrics
    host: str
    port: int
    _server: object
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        shutdown = getattr(self._server, "shutdown", None)
        if callable(shutdown):
            shutdown()
        server_close = getattr(self._server, "server_close", None)
        if callable(server_close):
            server_close()
        self._thread.join(timeout=5)


def serve_metrics(
    address: MetricsAddress, metrics: PrometheusMetrics | None = None
) -> MetricsServer:
    """Serve ``metrics`` (a new set if None) over HTTP at ``address`` on a daemon thread.
    A port in use or a host that cannot be bound is a :class:`ConfigError` naming the address."""
    metrics = metrics or PrometheusMetrics()
    try:
        server, thread = start_http_server(address.port, address.host, registry=metrics.registry)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot serve metrics on {address}: {reason}") from None
    port = int(server.server_port)
    log.info("metrics endpoint serving", address=f"{address.host}:{port}")
    return MetricsServer(metrics, address.host, port, server, thread)
