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
:class:`Offloader` is assembled from the parts in :mod:`offloader.facade` (building the runtime,
administration, the cluster and the service); this module holds the topics' methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

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
    Position,
    ProduceResult,
    TickReport,
    TopicInfo,
    VerifyResult,
)
from offloader.errors import (
    ConfigError,
    OffloaderError,
    VerificationError,
)
from offloader.facade import AdminFacade, ExportFacade, build_runtime
from offloader.kafka.settings import KafkaSettings
from offloader.kafka.tier import KafkaTier
from offloader.kafka.types import KafkaRecordRow, PartitionStatus, SegmentOutcome, UploadReport
from offloader.kafka_cluster.identity import parse_kafka_metadata_url
from offloader.keyring import KeyInfo, KeyRing, key_ring_path
from offloader.lazy import lazy_attribute
from offloader.logs import get_logger
from offloader.metadata.base import TopicOffloadStatus
from offloader.metadata.cluster_base import BrokerRecord
from offloader.metrics import Metrics, MetricsAddress, parse_metrics_addr
from offloader.offload.rekey import RekeyOutcome
from offloader.policies import (
    TopicPolicies,
    TransformPolicy,
)
from offloader.read.transformed import decode_named_object
from offloader.selection import TOPICS_HELP, TOPICS_METAVAR, TopicSelection

if TYPE_CHECKING:
    # loaded on first use (module __getattr__ below): the exports, the Pulsar cluster view,
    # rebuild and the Pulsar topics' paths are not what a Kafka upload's process needs
    from offloader.export.iceberg import IcebergTopicReport
    from offloader.export.iceberg_manage import (
        ExpireReport,
        IcebergOrphanReport,
        IcebergResetReport,
        IcebergStatus,
    )
    from offloader.export.iceberg_target import IcebergTarget
    from offloader.export.manage import ExportStatus, ResetReport
    from offloader.export.run import TopicExportReport
    from offloader.export.settings import ExportJob, ExportSpec, parse_time_ms
    from offloader.facade.cluster import ClusterGcReport, PulsarCluster
    from offloader.metrics.prometheus import MetricsServer
    from offloader.offload.cluster_orphans import (
        S3_STANDARD_PRICE,
        ClusterAudit,
        ClusterOrphan,
        ClusterUpload,
        is_deletable,
        monthly_cost,
    )
    from offloader.pulsar_cluster import ClusterTopic
    from offloader.read.cluster import ClusterLedger, offloaded_ledgers
    from offloader.rebuild import RebuildItem, RebuildReport
    from offloader.service import TickWork
    from offloader.topics.managed_ledger import ManagedLedger
    from offloader.topics.messages import MessageOptions, MessageRecord

#: the public names loaded on first use, and the module each comes from (PEP 562)
_LAZY = {
    "IcebergTopicReport": "offloader.export.iceberg",
    "ExpireReport": "offloader.export.iceberg_manage",
    "IcebergOrphanReport": "offloader.export.iceberg_manage",
    "IcebergResetReport": "offloader.export.iceberg_manage",
    "IcebergStatus": "offloader.export.iceberg_manage",
    "IcebergTarget": "offloader.export.iceberg_target",
    "ExportStatus": "offloader.export.manage",
    "ResetReport": "offloader.export.manage",
    "TopicExportReport": "offloader.export.run",
    "ExportJob": "offloader.export.settings",
    "ExportSpec": "offloader.export.settings",
    "parse_time_ms": "offloader.export.settings",
    "ClusterGcReport": "offloader.facade.cluster",
    "PulsarCluster": "offloader.facade.cluster",
    "S3_STANDARD_PRICE": "offloader.offload.cluster_orphans",
    "ClusterAudit": "offloader.offload.cluster_orphans",
    "ClusterOrphan": "offloader.offload.cluster_orphans",
    "ClusterUpload": "offloader.offload.cluster_orphans",
    "is_deletable": "offloader.offload.cluster_orphans",
    "monthly_cost": "offloader.offload.cluster_orphans",
    "ClusterTopic": "offloader.pulsar_cluster",
    "ClusterLedger": "offloader.read.cluster",
    "offloaded_ledgers": "offloader.read.cluster",
    "RebuildItem": "offloader.rebuild",
    "RebuildReport": "offloader.rebuild",
    "MessageOptions": "offloader.topics.messages",
    "MessageRecord": "offloader.topics.messages",
}


def __getattr__(name: str) -> object:
    """The names in ``_LAZY``: imported on first access, then cached in this module."""
    return lazy_attribute(__name__, _LAZY, name, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "S3_STANDARD_PRICE",
    "TOPICS_HELP",
    "TOPICS_METAVAR",
    "AppliedOffloadPolicies",
    "BrokerRecord",
    "BrokerSettings",
    "ClusterAudit",
    "ClusterGcReport",
    "ClusterLedger",
    "ClusterOrphan",
    "ClusterTopic",
    "ClusterUpload",
    "EntryRecord",
    "ExpireReport",
    "ExportJob",
    "ExportSpec",
    "ExportStatus",
    "IcebergOrphanReport",
    "IcebergResetReport",
    "IcebergStatus",
    "IcebergTarget",
    "IcebergTopicReport",
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
    "PulsarCluster",
    "RebuildItem",
    "RebuildReport",
    "RekeyOutcome",
    "ResetReport",
    "SegmentOutcome",
    "TickReport",
    "TopicExportReport",
    "TopicInfo",
    "TopicPolicies",
    "TopicSelection",
    "TransformPolicy",
    "UploadReport",
    "VerifyResult",
    "create_key",
    "decode_stored_data",
    "is_deletable",
    "list_keys",
    "monthly_cost",
    "offloaded_ledgers",
    "parse_kafka_metadata_url",
    "parse_metrics_addr",
    "parse_time_ms",
    "start_metrics_server",
]

log = get_logger(__name__)


ProgressCallback = Callable[[int, int], None]


class Offloader(AdminFacade, ExportFacade):
    """The whole system behind one object. Use as a context manager (closes stores)."""

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
        return cls(
            build_runtime(
                home,
                store_url,
                metadata_url=metadata_url,
                endpoint_url=endpoint_url,
                region=region,
                broker=broker,
                clock_ms=clock_ms,
                create_store=create_store,
                read_only=read_only,
                metrics=metrics,
            )
        )

    def __enter__(self) -> Offloader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        from offloader.service import TickWork, after_rollover

        work = TickWork()
        try:
            after_rollover(ml, work, self._rt.now_ms())
        except OffloaderError as exc:
            log.error("housekeeping after rollover failed", topic=ml.name, error=str(exc))
        return work

    def topic_info(self, topic: str) -> TopicInfo:
        ml = self._ml(topic)
        every = ml.ledgers(include_deleted=True)
        ledgers = tuple(r for r in every if r.state != "DELETED")
        return TopicInfo(
            topic=ml.name,
            managed_ledger_name=ml.managed_ledger_name,
            ledgers=ledgers,
            entries=sum(r.entries for r in ledgers),
            size_bytes=sum(r.size_bytes for r in ledgers),
            offloaded_size_bytes=sum(r.size_bytes for r in ledgers if r.offload_complete),
            local_size_bytes=sum(r.size_bytes for r in ledgers if not r.local_deleted),
            owner=self.topic_owner(ml.name),
            trimmed_before_offload=tuple(
                r for r in every if r.state == "DELETED" and not r.offload_complete
            ),
        )

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
        from offloader.topics import tasks as topic_tasks

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
        from offloader.topics import tasks as topic_tasks

        return topic_tasks.offload_status(self._ml(topic))

    def read(
        self, topic: str, *, start: Position | None = None, count: int | None = None
    ) -> Iterator[EntryRecord]:
        """Entries from ``start`` (default: the first), from whichever tier holds each ledger
        (read priority policy), at most ``count``. A missing topic, or a ``start`` in a ledger
        the topic does not have (:class:`EntryOutOfRange`), raises here, before any read."""
        ml = self._ml(topic)
        begin = None if start is None else (start.ledger_id, start.entry_id)
        from offloader.read.tiered import read_entries_from

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
        from offloader.topics.messages import MessageOptions, encode_values

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
        from offloader.topics.messages import decode_records

        entries = self.read(topic, start=start)
        name = self._ml(topic).name
        triples = ((e.ledger_id, e.entry_id, e.payload) for e in entries)
        return decode_records(name, triples, decrypt_key_pem=decrypt_key_pem, count=count)

    def delete_topic(self, topic: str) -> None:
        """Delete the topic, its local ledgers and its offloaded objects (nothing orphaned)."""
        from offloader.topics import tasks as topic_tasks

        topic_tasks.delete_topic(self._ml(topic))

    def apply_deletion_lag(self, topic: str) -> list[int]:
        """Run the deletion lag for one topic now: the ledgers whose local copy was deleted.
        Raises :class:`VerificationError` (after handling the others) if a ledger's objects
        failed verification; its local copy is kept."""
        from offloader.topics import tasks as topic_tasks

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
        from offloader.topics import tasks as topic_tasks

        return topic_tasks.trim_for_retention(self._ml(topic), self._rt.now_ms())


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
