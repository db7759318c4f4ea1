"""The facade the CLI, the service and Spark call: everything an operator can ask for.

:meth:`Offloader.from_settings` builds the parts (object store, SQLite metadata store, local
ledger store, managed ledgers) from a home directory and a store URL. Every method returns
plain frozen dataclasses (or records from :mod:`offloader.metadata.base`) that the CLI renders
as text or JSON; errors are :class:`~offloader.errors.OffloaderError` subclasses.

The work is done by :mod:`offloader.topics.managed_ledger` (produce, rollover),
:mod:`offloader.topics.tasks` (offload-prefix, auto-offload, deletion lag, retention, topic
deletion), :mod:`offloader.offload.commit` (the per-ledger commit protocol),
:mod:`offloader.read.tiered`, :mod:`offloader.offload.verification`,
:mod:`offloader.offload.orphans` and :mod:`offloader.service`; this module only translates. The
values it takes and returns are defined in :mod:`offloader.api_types` and re-exported here.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from formats.index import OffloadIndex
from offloader.api_types import (
    AppliedOffloadPolicies,
    BrokerSettings,
    EntryRecord,
    MissingObject,
    OffloadTrigger,
    OrphanObject,
    OrphanReport,
    OrphanUpload,
    PolicySource,
    Position,
    ProduceResult,
    TickReport,
    TopicInfo,
    VerifyResult,
)
from offloader.errors import (
    ConfigError,
    NotFound,
    OffloaderError,
    VerificationError,
)
from offloader.export.manage import (
    ExportStatus,
    ResetReport,
    export_status,
    parse_reset_point,
    reset_export,
)
from offloader.export.run import TopicExportReport, run_export
from offloader.export.settings import ExportJob, ExportSpec, normalize_target, parse_time_ms
from offloader.export.target import TargetSpec
from offloader.kafka.orphans import KafkaAudit, audit_kafka, collect_kafka, is_kafka_key
from offloader.kafka.report import orphan_report
from offloader.kafka.settings import KafkaSettings
from offloader.kafka.tier import KafkaTier
from offloader.kafka.types import KafkaRecordRow, PartitionStatus, SegmentOutcome, UploadReport
from offloader.keyring import KeyInfo, KeyRing, key_ring_path
from offloader.ledgers import FsyncPolicy, LedgerStore
from offloader.ledgers.info import FSYNC_POLICIES
from offloader.logs import get_logger
from offloader.metadata import (
    ExportMetadataStore,
    check_home,
    cluster_of,
    is_postgres_url,
    open_export_metadata_store,
    open_kafka_metadata_store,
    open_metadata_store,
)
from offloader.metadata.base import NamespaceRecord, TopicOffloadStatus
from offloader.metadata.cluster_base import LEASE_KAFKA_RETENTION, BrokerRecord
from offloader.metrics import Metrics, MetricsAddress, parse_metrics_addr
from offloader.naming import NamespaceName, TopicName
from offloader.offload.orphans import Audit, collect_garbage, find_orphans
from offloader.offload.rekey import RekeyOutcome, rekey_offloads
from offloader.offload.verification import check_offload
from offloader.policies import (
    TOPIC_POLICY_FIELDS,
    NamespacePolicies,
    TopicPolicies,
    TransformPolicy,
)
from offloader.read.tiered import read_entries_from
from offloader.read.transformed import decode_named_object
from offloader.runtime import Runtime, broker_id_for, driver_metadata_for, wall_clock_ms
from offloader.service import ServiceState, TickWork, after_rollover, holds_lease
from offloader.service import run as run_service_loop
from offloader.service import tick as service_tick
from offloader.store import MeteredObjectStore, open_store
from offloader.topics import tasks as topic_tasks
from offloader.topics.managed_ledger import ManagedLedger
from offloader.topics.messages import MessageOptions, MessageRecord, decode_records, encode_values

if TYPE_CHECKING:
    from offloader.metrics.prometheus import MetricsServer

__all__ = [
    "AppliedOffloadPolicies",
    "BrokerRecord",
    "BrokerSettings",
    "EntryRecord",
    "ExportJob",
    "ExportSpec",
    "ExportStatus",
    "KafkaRecordRow",
    "KafkaSettings",
    "KafkaTier",
    "KeyInfo",
    "MessageOptions",
    "MessageRecord",
    "Metrics",
    "MetricsAddress",
    "MissingObject",
    "OffloadTrigger",
    "Offloader",
    "OrphanObject",
    "OrphanReport",
    "OrphanUpload",
    "PartitionStatus",
    "Position",
    "ProduceResult",
    "ProgressCallback",
    "RekeyOutcome",
    "ResetReport",
    "SegmentOutcome",
    "TickReport",
    "TopicExportReport",
    "TopicInfo",
    "TopicPolicies",
    "TransformPolicy",
    "UploadReport",
    "VerifyResult",
    "create_key",
    "decode_stored_data",
    "list_keys",
    "parse_metrics_addr",
    "parse_time_ms",
    "start_metrics_server",
]

log = get_logger(__name__)


ProgressCallback = Callable[[int, int], None]


class Offloader:
    """The whole system behind one object. Use as a context manager (closes stores)."""

    def __init__(self, runtime: Runtime) -> None:
        """Prefer :meth:`from_settings`; tests may build a :class:`Runtime` by hand (for
        example around a :class:`~offloader.store.faulty.FaultyObjectStore`)."""
        self._rt = runtime
        self._service = ServiceState()
        self._closed = False
        self._kafka: KafkaTier | None = None
        self._exports: ExportMetadataStore | None = None
        self._spark: object | None = None

    @classmethod
    def from_settings(
        cls,
        home: str | Path = ".offloader",
        store_url: str | None = None,
        *,
        metadata_url: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        broker: BrokerSettings | None = None,
        clock_ms: Callable[[], int] | None = None,
        create_store: bool = True,
        read_only: bool = False,
        metrics: Metrics | None = None,
    ) -> Offloader:
        """``store_url`` defaults to ``file://<home>/objects``; ``create_store=False`` refuses a
        local store directory that does not exist (``ObjectNotFound``) instead of creating it.

        ``read_only`` (commands that only read): the home must exist already (a mistyped home
        is ``NotFound``, not a new empty one), and a home that cannot be written (a read-only
        filesystem) is opened for reading only. Without it, a home that cannot be written is
        refused up front with a MetadataError saying so.

        ``metrics`` (a :class:`MetricsServer`'s ``metrics``): what the flows record into; the
        object store is then wrapped to record every request. None: nothing is recorded.

        ``metadata_url`` (``postgresql://...``): the metadata store shared by several brokers
        instead of ``<home>/metadata.db``; the home still holds this broker's local ledgers and
        its broker id, registered (with a heartbeat) in the shared store."""
        broker = broker or BrokerSettings()
        home_path = Path(home).expanduser().resolve()
        missing_home: NotFound | None = None
        shared = is_postgres_url(metadata_url)
        try:
            # the shared store needs no metadata file in the home (a new broker's is empty)
            open_read_only = check_home(home_path, read_only=read_only and not shared)
        except NotFound as exc:
            if not (store_url or "").lower().startswith("s3://"):
                raise
            missing_home, open_read_only = exc, True  # after the S3 settings' own checks
        if open_read_only:
            create_store = False
        else:
            home_path.mkdir(parents=True, exist_ok=True)
        if broker.offload.key_ring is None:  # transforms: $OFFLOADER_KEY_RING or <home>/keys
            offload = broker.offload.replace(key_ring=str(key_ring_path(home_path)))
            broker = dataclasses.replace(broker, offload=offload)
        url = store_url or f"file://{home_path}/objects"
        store = open_store(
            url,
            endpoint_url=endpoint_url,
            region=region,
            settings=broker.offload,
            create=create_store,
        )
        if missing_home is not None:
            store.close()
            raise missing_home
        try:
            if shared and metadata_url is not None:
                meta = open_metadata_store(metadata_url)
            else:
                meta = open_metadata_store(home_path, read_only=open_read_only)
        except BaseException:
            store.close()
            raise
        cluster = cluster_of(meta)
        broker_id = ""
        if shared:
            try:
                broker_id = broker_id_for(home_path)
                cluster.register_broker(
                    broker_id, socket.gethostname(), str(home_path), (clock_ms or wall_clock_ms)()
                )
            except BaseException:
                meta.close()
                store.close()
                raise
        clock = clock_ms or wall_clock_ms
        fsync = broker.fsync
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync policy {fsync!r} is not one of {', '.join(FSYNC_POLICIES)}")
        ledgers = LedgerStore(home_path, fsync=cast(FsyncPolicy, fsync), clock_ms=clock)
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
        driver = driver_metadata_for(store, region=region, endpoint_url=endpoint)
        if metrics is not None:
            store = MeteredObjectStore(store, metrics)
        runtime = Runtime(
            home=home_path,
            meta=meta,
            store=store,
            ledgers=ledgers,
            broker=broker,
            clock_ms=clock,
            driver=driver,
            cluster=cluster,
            broker_id=broker_id,
            metadata_url=metadata_url if shared and metadata_url is not None else "",
        )
        if metrics is not None:
            runtime.metrics = metrics
        return cls(runtime)

    @property
    def runtime(self) -> Runtime:
        """The parts (stores, clock, settings) this facade drives."""
        return self._rt

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._kafka is not None:
                self._kafka.close()
            if self._exports is not None:
                self._exports.close()
            self._rt.meta.close()
        finally:
            self._rt.store.close()

    def __enter__(self) -> Offloader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kafka(self, settings: KafkaSettings | None = None) -> KafkaTier:
        """The Kafka tier (segments of broker log directories) on this store and home; opened
        on first use, closed with this facade. ``settings`` apply when it is first opened."""
        if self._kafka is None:
            self._kafka = KafkaTier(
                self._rt.store,
                open_kafka_metadata_store(self._rt.metadata_location),
                settings or KafkaSettings(),
                self._rt.clock_ms,
            )
        return self._kafka

    def _ml(self, topic: str) -> ManagedLedger:
        return ManagedLedger(self._rt, TopicName.parse(topic))

    # --- topic-level offload policies -----------------------------------------------------
    @staticmethod
    def topic_name(topic: str) -> TopicName:
        """``t`` -> ``persistent://public/default/t`` (ConfigError/InvalidName if invalid)."""
        return TopicName.parse(topic)

    def get_topic_policies(self, topic: str) -> TopicPolicies:
        """The topic's own offload policies (fields None where it sets none)."""
        return self._rt.meta.get_topic_policies(str(TopicName.parse(topic)))

    def set_topic_policies(self, topic: str, policies: TopicPolicies) -> TopicPolicies:
        """Replace the topic's own offload policies (``topics set-offload-policies``)."""
        return self._rt.meta.set_topic_policies(str(TopicName.parse(topic)), policies)

    def remove_topic_policies(self, topic: str) -> None:
        """Drop the topic's own offload policies: its namespace's apply again."""
        self._rt.meta.set_topic_policies(str(TopicName.parse(topic)), TopicPolicies())

    def applied_topic_policies(self, topic: str) -> AppliedOffloadPolicies:
        """The offload policies in force for the topic: topic > namespace > broker."""
        name = TopicName.parse(topic)
        own = self._rt.meta.get_topic_policies(str(name))
        namespace = self._rt.meta.get_namespace(name.namespace).policies
        applied = own.over(namespace)
        sources: dict[str, PolicySource] = {
            field: "topic" if getattr(own, field) is not None else "namespace"
            for field in TOPIC_POLICY_FIELDS
        }
        if applied.offload_deletion_lag_ms is None:
            sources["offload_deletion_lag_ms"] = "broker"
        return AppliedOffloadPolicies(
            offload_threshold_bytes=applied.offload_threshold_bytes,
            offload_threshold_seconds=applied.offload_threshold_seconds,
            offload_deletion_lag_ms=self._rt.deletion_lag_ms(applied),
            read_priority=applied.read_priority,
            sources=sources,
        )

    # --- namespaces ------------------------------------------------------------------------
    def create_namespace(self, namespace: str) -> NamespaceRecord:
        name = str(NamespaceName.parse(namespace))
        return self._rt.meta.create_namespace(name, self._rt.now_ms())

    def list_namespaces(self) -> list[NamespaceRecord]:
        return self._rt.meta.list_namespaces()

    def get_policies(self, namespace: str) -> NamespacePolicies:
        return self._rt.meta.get_namespace(str(NamespaceName.parse(namespace))).policies

    def _update(self, namespace: str, **changes: object) -> NamespacePolicies:
        name = str(NamespaceName.parse(namespace))
        policies = self._rt.meta.get_namespace(name).policies.replace(**changes)
        return self._rt.meta.set_policies(name, policies).policies

    def set_offload_threshold(
        self, namespace: str, size_bytes: int, seconds: int = -1
    ) -> NamespacePolicies:
        return self._update(
            namespace, offload_threshold_bytes=size_bytes, offload_threshold_seconds=seconds
        )

    def set_offload_deletion_lag(self, namespace: str, lag_ms: int | None) -> NamespacePolicies:
        """``None`` clears it (the broker default applies)."""
        return self._update(namespace, offload_deletion_lag_ms=lag_ms)

    def set_retention(self, namespace: str, size_bytes: int, seconds: int) -> NamespacePolicies:
        return self._update(
            namespace, retention_size_bytes=size_bytes, retention_time_seconds=seconds
        )

    def set_read_priority(self, namespace: str, priority: str) -> NamespacePolicies:
        return self._update(namespace, read_priority=priority)

    def rekey(self, to_key: str, *, dry_run: bool = False) -> list[RekeyOutcome]:
        """Re-wrap the data keys of every encrypted offloaded object with ``to_key``,
        rewriting only index objects (``objects rekey``; safe to interrupt and re-run)."""
        rt = self._rt
        return rekey_offloads(rt.store, rt.meta, rt.broker.offload.key_ring, to_key,
                              dry_run=dry_run)  # fmt: skip

    def set_offload_transform(self, namespace: str, policy: TransformPolicy) -> NamespacePolicies:
        """Set how NEW data objects of the namespace are stored (spec/transforms.md); objects
        already written keep theirs. With encryption, the key (``policy.key_id``, else the
        ring's active key) must be in the key ring now (``MissingKeyError``/``KeyRingError``)."""
        if policy.encrypted:
            ring = KeyRing(key_ring_path(self._rt.home))
            if policy.key_id is None:
                ring.active_key_id()
            else:
                ring.key(policy.key_id)
        return self._update(
            namespace,
            transform_compression=policy.compression,
            transform_level=policy.level,
            transform_encryption=policy.encryption,
            transform_key_id=policy.key_id,
        )

    # --- topics ----------------------------------------------------------------------------
    def produce(
        self, topic: str, payloads: Iterable[bytes], *, progress: ProgressCallback | None = None
    ) -> ProduceResult:
        """Append entries (creating the topic if its namespace exists), rolling ledgers over
        by entry count / size / age and running the namespace's auto-offload on rollover.

        ``progress`` gets ``(entries_done, bytes_done)``. Entries are acknowledged once this
        returns; a failure of the housekeeping after a rollover (trim, deletion lag,
        auto-offload) is logged, never raised (the service retries it)."""
        ml = self._ml(topic)
        outcome = ml.produce(payloads, progress)
        offloaded: tuple[int, ...] = ()
        if outcome.ledgers_closed:
            offloaded = tuple(self._after_rollover(ml).offloaded)
        return ProduceResult(
            topic=ml.name,
            entries=outcome.entries,
            bytes=outcome.bytes,
            first=None if outcome.first is None else Position(*outcome.first),
            last=None if outcome.last is None else Position(*outcome.last),
            ledgers_closed=outcome.ledgers_closed,
            ledgers_offloaded=offloaded,
        )

    def _after_rollover(self, ml: ManagedLedger) -> TickWork:
        work = TickWork()
        try:
            after_rollover(ml, work, self._rt.now_ms())
        except OffloaderError as exc:
            log.error("housekeeping after rollover failed", topic=ml.name, error=str(exc))
        return work

    def list_topics(self, namespace: str | None = None) -> list[str]:
        if namespace is not None:
            namespace = str(NamespaceName.parse(namespace))
        return [t.name for t in self._rt.meta.list_topics(namespace)]

    def topic_info(self, topic: str) -> TopicInfo:
        ml = self._ml(topic)
        ledgers = tuple(ml.ledgers())
        return TopicInfo(
            topic=ml.name,
            managed_ledger_name=ml.managed_ledger_name,
            ledgers=ledgers,
            entries=sum(r.entries for r in ledgers),
            size_bytes=sum(r.size_bytes for r in ledgers),
            offloaded_size_bytes=sum(r.size_bytes for r in ledgers if r.offload_complete),
            local_size_bytes=sum(r.size_bytes for r in ledgers if not r.local_deleted),
            owner=self.topic_owner(ml.name),
        )

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

    def roll_over(self, topic: str) -> int | None:
        """Close the current ledger now (if non-empty); returns its id."""
        ml = self._ml(topic)
        self._rt.meta.get_topic(ml.name)
        closed = ml.roll_over()
        if closed is not None:
            self._after_rollover(ml)
        return closed

    def offload_prefix(
        self,
        topic: str,
        *,
        position: Position | None = None,
        size_threshold: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> OffloadTrigger:
        """Pulsar's offload-prefix (exactly one of ``position`` / ``size_threshold``), run in
        the foreground; OffloadInProgress if another process is offloading the topic."""
        if (position is None) == (size_threshold is None):
            raise ConfigError("give exactly one of position or size_threshold")
        ml = self._ml(topic)
        run = topic_tasks.offload_prefix(
            ml,
            position=None if position is None else (position.ledger_id, position.entry_id),
            size_threshold=size_threshold,
            progress=progress,
        )
        if run.nothing or run.first_retained is None:
            return OffloadTrigger(topic=ml.name, position=None)
        return OffloadTrigger(
            topic=ml.name,
            position=Position(run.first_retained, 0),
            ledgers=run.ledgers,
            offloaded=run.offloaded,
            failed=run.failed,
        )

    def offload_status(self, topic: str) -> TopicOffloadStatus:
        """The status of the topic's last offload run; one whose process died while running
        is reported as ERROR (see :func:`offloader.topics.tasks.offload_status`)."""
        return topic_tasks.offload_status(self._ml(topic))

    def read(
        self, topic: str, *, start: Position | None = None, count: int | None = None
    ) -> Iterator[EntryRecord]:
        """Entries from ``start`` (default: the first), from whichever tier holds each ledger
        (read priority policy), at most ``count``. A missing topic, or a ``start`` in a ledger
        the topic does not have (:class:`EntryOutOfRange`), raises here, before any read."""
        ml = self._ml(topic)
        begin = None if start is None else (start.ledger_id, start.entry_id)
        entries = read_entries_from(ml, begin, count)
        return (EntryRecord(ml.name, *entry) for entry in entries)

    def produce_messages(
        self,
        topic: str,
        values: Iterable[bytes],
        options: MessageOptions | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> tuple[ProduceResult, int]:
        """Append ``values`` as Pulsar-format messages (``options``: batch size, compression,
        key, properties); returns the produce result and the number of messages written."""
        counter = [0]
        opts = options or MessageOptions()
        entries = encode_values(values, opts, self._rt.now_ms, counter)
        return self.produce(topic, entries, progress=progress), counter[0]

    def read_messages(
        self,
        topic: str,
        *,
        start: Position | None = None,
        count: int | None = None,
        decrypt_key_pem: bytes | None = None,
    ) -> Iterator[MessageRecord]:
        """The topic's entries decoded as Pulsar messages (batches split, chunks reassembled;
        encrypted ones flagged unless ``decrypt_key_pem`` opens them), at most ``count``.
        Entries that are not Pulsar messages raise a typed :class:`PulsarMessageError`."""
        entries = self.read(topic, start=start)
        name = self._ml(topic).name
        triples = ((e.ledger_id, e.entry_id, e.payload) for e in entries)
        return decode_records(name, triples, decrypt_key_pem=decrypt_key_pem, count=count)

    def delete_topic(self, topic: str) -> None:
        """Delete the topic, its local ledgers and its offloaded objects (nothing orphaned)."""
        topic_tasks.delete_topic(self._ml(topic))

    def apply_deletion_lag(self, topic: str) -> list[int]:
        """Run the deletion lag for one topic now: the ledgers whose local copy was deleted.
        Raises :class:`VerificationError` (after handling the others) if a ledger's objects
        failed verification; its local copy is kept."""
        deleted, problems = topic_tasks.delete_local_copies(self._ml(topic), self._rt.now_ms())
        if problems:
            ledger_id, problem = problems[0]
            raise VerificationError(
                f"ledger {ledger_id}: offloaded objects failed verification, local copy kept: "
                f"{problem}"
            )
        return deleted

    def apply_retention(self, topic: str) -> list[int]:
        """Run retention trimming for one topic now: the ledgers trimmed."""
        return topic_tasks.trim_for_retention(self._ml(topic), self._rt.now_ms())

    # --- objects ---------------------------------------------------------------------------
    def verify(
        self, topic: str | None = None, *, ledger_id: int | None = None, checksums: bool = False
    ) -> list[VerifyResult]:
        names = [self._ml(topic).name] if topic is not None else self.list_topics()
        results: list[VerifyResult] = []
        for name in names:
            for record in self._rt.meta.list_ledgers(name):
                if ledger_id is not None and record.ledger_id != ledger_id:
                    continue
                if not record.offload_complete:
                    if ledger_id is not None:
                        results.append(
                            VerifyResult(
                                name,
                                record.ledger_id,
                                "",
                                False,
                                None,
                                None,
                                False,
                                f"ledger {ledger_id} is not offloaded",
                            )
                        )
                    continue
                assert record.offload is not None
                check = check_offload(
                    self._rt.store,
                    record,
                    checksums=checksums,
                    read_buffer=self._rt.broker.offload.read_buffer_size,
                    key_ring=self._rt.broker.offload.key_ring,
                )
                results.append(
                    VerifyResult(
                        name,
                        record.ledger_id,
                        record.offload.uuid,
                        check.ok,
                        check.data_size,
                        check.index_size,
                        check.checked_checksums,
                        check.problem,
                    )
                )
        return results

    def _audit(self, min_age_seconds: int | None) -> tuple[Audit, KafkaAudit]:
        age = self._rt.broker.orphan_min_age_seconds if min_age_seconds is None else min_age_seconds
        audit = find_orphans(self._rt, max(age, 0) * 1000, foreign=is_kafka_key)
        kafka = self.kafka().ctx
        listed = [o for o in self._rt.store.list() if is_kafka_key(o.key)]
        uploads = self._rt.store.list_multipart_uploads()
        kafka_audit = audit_kafka(kafka, listed, uploads, self._rt.wall_ms(), max(age, 0) * 1000)
        return audit, kafka_audit

    def orphans(self, *, min_age_seconds: int | None = None) -> OrphanReport:
        return orphan_report(*self._audit(min_age_seconds), False)

    def gc(self, *, dry_run: bool = False, min_age_seconds: int | None = None) -> OrphanReport:
        audit, kafka = self._audit(min_age_seconds)
        removed = collect_garbage(self._rt, audit, dry_run=dry_run)
        if not dry_run:
            removed += collect_kafka(self.kafka().ctx, kafka)
        return orphan_report(audit, kafka, removed > 0)

    # --- background service ----------------------------------------------------------------
    def service_tick(self, *, should_stop: Callable[[], bool] | None = None) -> TickReport:
        """One pass: rollover by age, thresholds, deletion lag, retention, retries, orphans."""
        started = time.perf_counter()
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
        """KIP-405's copy lag of every configured log directory, into the metrics."""
        lags = []
        for log_dir in log_dirs:
            try:
                lags += self.kafka().copy_lag(Path(log_dir), topics)
            except OffloaderError as exc:
                log.warning("kafka copy lag not computed", log_dir=log_dir, error=str(exc))
        self._rt.metrics.set_kafka_copy_lag(lags)

    def run_service(
        self,
        *,
        interval_seconds: float = 30.0,
        once: bool = False,
        should_stop: Callable[[], bool] | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
        exports: Iterable[ExportJob] = (),
        on_export: Callable[[list[TopicExportReport]], None] | None = None,
    ) -> None:
        """The service loop; after each pass, the ``exports`` run (continuous mode: a failed
        export is logged and retried next pass, the loop carries on)."""
        stop = should_stop or (lambda: False)
        jobs = list(exports)

        def one() -> None:
            report = self.service_tick(should_stop=stop)
            if on_tick is not None:
                on_tick(report)
            for job in jobs:
                if stop():
                    return
                try:
                    done = self.export_run(job.topics, job.spec, engine=job.engine)
                except OffloaderError as exc:
                    log.warning("export.failed", target=job.spec.target, error=str(exc))
                    continue
                if on_export is not None:
                    on_export(done)

        run_service_loop(one, interval_seconds=interval_seconds, once=once, should_stop=stop)

    # --- exports to Parquet (spec/export.md) ----------------------------------------------
    def _export_meta(self) -> ExportMetadataStore:
        if self._exports is None:
            # the runtime's store: a shared PostgreSQL one keeps every broker's watermarks
            location = self._rt.metadata_location
            read_only = not self._rt.metadata_url and not os.access(self._rt.home, os.W_OK)
            self._exports = open_export_metadata_store(location, read_only=read_only)
        return self._exports

    def export_run(
        self,
        topics: Iterable[str],
        spec: ExportSpec,
        *,
        spark: object | None = None,
        engine: str = "spark",
        kafka: bool = False,
    ) -> list[TopicExportReport]:
        """Export each topic's messages after its watermark, up to its last closed ledger (or
        ``spec.until_ms``), to Parquet under ``spec.target``, exactly once (spec/export.md).
        ``spark``: a SparkSession (default: a ``local[2]`` session made on first use);
        ``engine="local"`` runs the same tasks in this process, without Spark. ``kafka``: the
        topics are Kafka topics (their remote segments; a watermark per partition)."""
        from offloader.spark.export_job import LocalRunner, SparkRunner

        if engine not in ("spark", "local"):
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        if kafka:
            return self._export_kafka(list(topics), spec, spark, engine)
        runner: SparkRunner
        if engine == "local":
            runner = LocalRunner(str(self._rt.home), spec, metadata_url=self._rt.metadata_url)
        elif engine == "spark":
            if spark is None:
                from offloader.spark import local_session

                if self._spark is None:
                    self._spark = local_session("ledger-offloader-export")
                spark = self._spark
            runner = SparkRunner(
                spark, str(self._rt.home), spec, metadata_url=self._rt.metadata_url
            )
        else:
            raise ConfigError(f"export engine {engine!r}: choose spark or local")
        owners = self._rt.cluster.list_topic_owners() if self._rt.cluster.shared else {}
        return run_export(
            self._rt.meta,
            self._export_meta(),
            self._rt.home,
            spec,
            list(topics),
            runner,
            self._rt.now_ms,
            foreign={t for t, o in owners.items() if o.broker_id != self._rt.me},
        )

    def _export_kafka(
        self, topics: list[str], spec: ExportSpec, spark: object | None, engine: str
    ) -> list[TopicExportReport]:
        from offloader.export.kafka import run_kafka_export
        from offloader.spark.export_kafka import KafkaRunner

        if engine == "spark" and spark is None:
            from offloader.spark import local_session

            if self._spark is None:
                self._spark = local_session("ledger-offloader-export")
            spark = self._spark
        props = self._rt.driver.properties
        runner = KafkaRunner(
            spark if engine == "spark" else None,
            str(self._rt.home),
            spec,
            store_url=self._rt.store.url,
            endpoint_url=props.get("endpoint") or None,
            region=props.get("region") or None,
            metadata_url=self._rt.metadata_url,
        )
        return run_kafka_export(
            self.kafka().ctx.meta,
            self._export_meta(),
            self._rt.home,
            spec,
            topics,
            runner,
            self._rt.now_ms,
        )

    def export_status(
        self,
        topic: str,
        target: str,
        *,
        generation: int = 1,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> ExportStatus:
        """The export's watermark, its committed files and its lag (entries and time)."""
        spec = TargetSpec(normalize_target(target), endpoint_url, region)
        kafka_meta = self.kafka().ctx.meta if topic.startswith("kafka:") else None
        return export_status(
            self._rt.meta,
            self._export_meta(),
            spec,
            topic,
            generation,
            self._rt.now_ms(),
            kafka_meta,
        )

    def export_reset(
        self,
        topic: str,
        target: str,
        to: str,
        *,
        generation: int = 1,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> ResetReport:
        """Move the watermark back to ``to`` (``ledger:entry[:batch]`` or a time) and remove
        exactly the files after it, so that the next run writes them again."""
        spec = TargetSpec(normalize_target(target), endpoint_url, region)
        return reset_export(
            self._export_meta(),
            self._rt.home,
            spec,
            topic,
            generation,
            parse_reset_point(to),
            self._rt.now_ms,
        )


# --- keys (no store or metadata needed) -------------------------------------------------------
def create_key(home: str | Path, key_id: str, *, activate: bool = False) -> KeyInfo:
    """Add a fresh 256-bit key-encryption key to the key ring (``$OFFLOADER_KEY_RING`` or
    ``<home>/keys``, created with mode 0600 if needed)."""
    return KeyRing(key_ring_path(Path(home).expanduser())).create(key_id, activate=activate)


def decode_stored_data(
    home: str | Path, index: OffloadIndex, stored: bytes, data_object_name: str
) -> bytes | None:
    """For ``objects inspect`` of files: None when ``index`` describes a plain object, else the
    original data object decoded from the stored one (identity from its stored name
    ``<uuid>-ledger-<id>``, key from the home's key ring)."""
    ring = str(key_ring_path(Path(home).expanduser()))
    return decode_named_object(index, stored, data_object_name, ring)


def start_metrics_server(address: MetricsAddress) -> MetricsServer:
    """Serve a new metrics set over HTTP at ``address`` (port 0: a free port; the server's
    ``port`` says which); pass its ``metrics`` to :meth:`Offloader.from_settings`. A port in
    use or an address that cannot be bound is a ``ConfigError``."""
    # prometheus_client (and its HTTP server) is loaded only by a process that serves metrics
    from offloader.metrics.prometheus import serve_metrics

    return serve_metrics(address)


def list_keys(home: str | Path) -> list[KeyInfo]:
    """The key ring's keys: ids, creation times and which is active (never key bytes)."""
    return KeyRing(key_ring_path(Path(home).expanduser())).list()
