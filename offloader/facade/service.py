"""The facade's cluster and background service: this broker's id, topic owners and brokers
on a shared metadata store, and the service pass (ledgers, Kafka uploads and retention, the
metrics it publishes)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from offloader.api_types import (
    TickReport,
)
from offloader.errors import (
    OffloaderError,
)
from offloader.facade.base import FacadeBase
from offloader.logs import get_logger
from offloader.metadata.cluster_base import LEASE_KAFKA_RETENTION, BrokerRecord
from offloader.naming import TopicName

if TYPE_CHECKING:
    pass


log = get_logger(__name__)


class ServiceFacade(FacadeBase):
    """The cluster view and the service loop (mixed into :class:`offloader.api.Offloader`)."""

    # --- the cluster (a shared metadata store) ----------------------------------------------
    @property
    def broker_id(self) -> str:
        """This broker's id ("local" on the embedded store: one broker)."""
        return self._rt.me

    @property
    def shared_metadata(self) -> bool:
        """True when the metadata store is shared by several brokers (PostgreSQL)."""
        return self._rt.cluster.shared

    def topic_owner(self, topic: str) -> str | None:
        """The id of the broker owning the topic; None when it has no owner (never written, or
        unloaded) and on the embedded store."""
        owner = self._rt.cluster.get_topic_owner(str(TopicName.parse(topic)))
        return None if owner is None else owner.broker_id

    def brokers(self) -> list[BrokerRecord]:
        """Every broker registered in the shared store (this one only, on the embedded one)."""
        if not self._rt.cluster.shared:
            self._rt.cluster.register_broker(
                self._rt.me, socket.gethostname(), str(self._rt.home), self._rt.now_ms()
            )
        return self._rt.cluster.list_brokers()

    def topic_owners(self) -> dict[str, str]:
        """Owned topics and their owners (empty on the embedded store)."""
        return {t: o.broker_id for t, o in self._rt.cluster.list_topic_owners().items()}

    def unload_topic(self, topic: str) -> list[int]:
        """Release this broker's ownership of the topic (``topics unload``): see
        :meth:`offloader.topics.managed_ledger.ManagedLedger.unload`."""
        ml = self._ml(topic)
        self._rt.meta.get_topic(ml.name)
        return ml.unload()

    # --- background service ----------------------------------------------------------------
    def service_tick(self, *, should_stop: Callable[[], bool] | None = None) -> TickReport:
        """One pass: rollover by age, thresholds, deletion lag, retention, retries, orphans."""
        from offloader.service import ServiceState
        from offloader.service import tick as service_tick

        started = time.perf_counter()
        if self._service is None:
            self._service = ServiceState()
        work = service_tick(self._rt, self._service, should_stop)
        uploaded, deleted = self._kafka_pass(work.errors, should_stop or (lambda: False))
        ok = not (work.errors or work.offload_failures or work.verification_failures)
        self._rt.metrics.record_tick(time.perf_counter() - started, ok)
        return TickReport(
            kafka_uploaded=tuple(uploaded),
            kafka_deleted=tuple(deleted),
            rolled_over=tuple(work.rolled_over),
            offloaded=tuple(work.offloaded),
            offload_failures=tuple(work.offload_failures),
            local_deleted=tuple(work.local_deleted),
            trimmed=tuple(work.trimmed),
            orphans_removed=work.orphans_removed,
            verification_failures=tuple(work.verification_failures),
            errors=tuple(work.errors),
        )

    def _kafka_pass(
        self, errors: list[str], should_stop: Callable[[], bool]
    ) -> tuple[list[str], list[str]]:
        """The service's Kafka work: upload from each configured log directory, then remote
        retention. Problems go to ``errors``; the pass carries on."""
        from offloader.service import TickWork, holds_lease

        uploaded: list[str] = []
        deleted: list[str] = []
        broker = self._rt.broker
        for log_dir in broker.kafka_log_dirs:
            if should_stop():
                return uploaded, deleted
            try:
                report = self.kafka().upload(Path(log_dir), broker.kafka_topics)
            except OffloaderError as exc:
                errors.append(f"kafka {log_dir}: {type(exc).__name__}: {exc}")
                continue
            for s in report.segments:
                if s.kind == "uploaded":
                    uploaded.append(f"{s.topic}-{s.partition}@{s.base_offset}")
                    self._rt.metrics.record_kafka_copy(s.topic, s.size_bytes, True)
                elif s.kind in ("corrupt", "failed"):
                    errors.append(f"kafka {s.topic}-{s.partition}@{s.base_offset}: {s.detail}")
                    self._rt.metrics.record_kafka_copy(s.topic, s.size_bytes, False)
        if (
            broker.kafka_log_dirs
            and not should_stop()
            and holds_lease(self._rt, LEASE_KAFKA_RETENTION, TickWork())
        ):
            try:
                deleted = self.kafka().apply_retention()
            except OffloaderError as exc:
                errors.append(f"kafka retention: {type(exc).__name__}: {exc}")
        if broker.kafka_log_dirs and self._rt.metrics.enabled:
            self._publish_kafka_lag(broker.kafka_log_dirs, broker.kafka_topics)
        return uploaded, deleted

    def _publish_kafka_lag(self, log_dirs: Iterable[str], topics: str | None) -> None:
        """KIP-405's copy lag of every configured log directory and the size of every
        partition's remote log, into the metrics."""
        lags = []
        for log_dir in log_dirs:
            try:
                lags += self.kafka().copy_lag(Path(log_dir), topics)
            except OffloaderError as exc:
                log.warning("kafka copy lag not computed", log_dir=log_dir, error=str(exc))
        self._rt.metrics.set_kafka_copy_lag(lags)
        try:
            self._rt.metrics.set_kafka_remote_log_size(self.kafka().remote_log_sizes())
        except OffloaderError as exc:
            log.warning("kafka remote log size not computed", error=str(exc))
