"""The orphan report of the whole store: the ledger audit and the Kafka audit, merged.

Kafka segments' missing objects are reported with ``topic-partition`` as the topic, the base
offset as the ledger id and the segment id as the uuid.
"""

from __future__ import annotations

from datetime import datetime

from offloader.api_types import MissingObject, OrphanObject, OrphanReport, OrphanUpload
from offloader.kafka.orphans import KafkaAudit
from offloader.offload.orphans import DELETABLE_REASONS, Audit


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def orphan_report(audit: Audit, kafka: KafkaAudit, removed: bool) -> OrphanReport:
    """Both audits as one report; ``deletable`` says what gc removes (only what this
    installation provably wrote), the rest is reported and left alone."""
    objects = [
        OrphanObject(o.key, o.size, o.reason, o.last_modified_ms, o.reason in DELETABLE_REASONS)
        for o in audit.objects
    ]
    objects += [
        OrphanObject(o.key, o.size, o.reason, o.last_modified_ms, o.deletable)
        for o in kafka.objects
    ]
    uploads = [
        OrphanUpload(u.key, u.upload_id, u.initiated_ms, u.reason, u.reason in DELETABLE_REASONS)
        for u in audit.uploads
    ]
    uploads += [
        OrphanUpload(u.key, u.upload_id, _ms(u.initiated), "unfinished-upload", True)
        for u in kafka.uploads
    ]
    uploads += [
        OrphanUpload(u.key, u.upload_id, _ms(u.initiated), "foreign-upload", False)
        for u in kafka.foreign_uploads
    ]
    missing = [MissingObject(m.topic, m.ledger_id, m.uuid, m.key) for m in audit.missing]
    missing += [
        MissingObject(f"{r.topic}-{r.partition}", r.base_offset, r.segment_id, key)
        for r, key in kafka.missing
    ]
    return OrphanReport(tuple(objects), tuple(uploads), tuple(missing), removed)
