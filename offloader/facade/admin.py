"""The facade's administration: topic and namespace policies, transforms and key rotation,
and the objects' verification, orphan audit and garbage collection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from offloader.api_types import (
    AppliedOffloadPolicies,
    OrphanReport,
    PolicySource,
    VerifyResult,
)
from offloader.facade.base import FacadeBase
from offloader.keyring import KeyRing, key_ring_path
from offloader.logs import get_logger
from offloader.metadata.base import NamespaceRecord
from offloader.naming import NamespaceName, TopicName
from offloader.offload.rekey import RekeyOutcome, rekey_offloads
from offloader.policies import (
    TOPIC_POLICY_FIELDS,
    NamespacePolicies,
    TopicPolicies,
    TransformPolicy,
)
from offloader.selection import TopicSelection

if TYPE_CHECKING:
    # verification, the orphan audit and rebuild load on first use (not on a Kafka upload)
    from offloader.kafka.orphans import KafkaAudit
    from offloader.offload.orphans import Audit
    from offloader.rebuild import Rebuilder, RebuildReport


log = get_logger(__name__)


class AdminFacade(FacadeBase):
    """Policies and objects (mixed into :class:`offloader.api.Offloader`)."""

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
        rewriting only index objects (``objects rekey``; safe to interrupt and re-run), then
        those of encrypted Kafka segments (only their ``.chunks`` objects)."""
        rt = self._rt
        outcomes = rekey_offloads(rt.store, rt.meta, rt.broker.offload.key_ring, to_key,
                                  dry_run=dry_run,
                                  software_version=rt.broker.offload.software_version)  # fmt: skip
        return outcomes + self.kafka().rekey(to_key, dry_run=dry_run)

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
                from offloader.offload.verification import check_offload

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
        from offloader.kafka.orphans import audit_kafka, is_kafka_key
        from offloader.offload.orphans import find_orphans

        age = self._rt.broker.orphan_min_age_seconds if min_age_seconds is None else min_age_seconds
        audit = find_orphans(self._rt, max(age, 0) * 1000, foreign=is_kafka_key)
        kafka = self.kafka().ctx
        listed = [o for o in self._rt.store.list() if is_kafka_key(o.key)]
        uploads = self._rt.store.list_multipart_uploads()
        kafka_audit = audit_kafka(
            kafka,
            listed,
            uploads,
            self._rt.wall_ms(),
            max(age, 0) * 1000,
            collect_superseded=min_age_seconds is not None,  # only the caller's own age
        )
        return audit, kafka_audit

    def metadata_rebuild(
        self,
        *,
        topics: str | TopicSelection | None = None,
        dry_run: bool = False,
        merge: bool = False,
        progress: Callable[[int, int], None] | None = None,
        export_targets: Sequence[str] = (),
        catalog: str | None = None,
        warehouse: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> RebuildReport:
        """Recreate the metadata store's records from the object store's listing
        (``offloader metadata rebuild``; spec/bucket-manifests.md). ``topics``: the topics
        rebuilt (:mod:`offloader.selection`: a Pulsar topic's ``persistent://...`` name, a
        Kafka topic's own name; None: all). Refuses a store with records
        unless ``merge`` (RebuildRefused); ``dry_run`` writes nothing. ``export_targets``:
        export targets whose watermarks are rebuilt too (spec/export.md §5a): Parquet
        targets (``endpoint_url``/``region`` for ``s3://``) from their watermark records,
        ``iceberg://NS.TABLE`` tables (``catalog``/``warehouse``, else the home's defaults)
        read and reported."""
        from offloader.rebuild import default_rebuilders, rebuild

        rebuilders: list[Rebuilder] = default_rebuilders(self.kafka().ctx.meta)
        if export_targets:
            from offloader.export.rebuild import ExportWatermarks

            exports = ExportWatermarks.of_urls(
                self._export_meta(),
                export_targets,
                self._rt.home,
                catalog=catalog,
                warehouse=warehouse,
                endpoint_url=endpoint_url,
                region=region,
            )
            rebuilders.append(exports)
        return rebuild(
            self._rt,
            topics=topics,
            dry_run=dry_run,
            merge=merge,
            progress=progress,
            rebuilders=rebuilders,
        )

    def orphans(self, *, min_age_seconds: int | None = None) -> OrphanReport:
        from offloader.kafka.report import orphan_report

        return orphan_report(*self._audit(min_age_seconds), False)

    def gc(self, *, dry_run: bool = False, min_age_seconds: int | None = None) -> OrphanReport:
        from offloader.kafka.orphans import collect_kafka
        from offloader.kafka.report import orphan_report
        from offloader.offload.orphans import collect_garbage

        audit, kafka = self._audit(min_age_seconds)
        removed = collect_garbage(self._rt, audit, dry_run=dry_run)
        if not dry_run:
            removed += collect_kafka(self.kafka().ctx, kafka)
        return orphan_report(audit, kafka, removed > 0)
