"""The orphan audit of a bucket a real Pulsar cluster offloads to, against that cluster's
metadata store (:mod:`offloader.pulsar_cluster`).

:func:`audit_cluster_bucket` lists the bucket once (objects and unfinished multipart uploads)
while every managed ledger of the cluster is read (pipelined) on another thread, the two
overlapping; then the managed ledgers of what looks unreferenced are read again, *after* the
listing, so an offload that began while we listed is seen as referenced: Pulsar records an
attempt's UUID in the ledger's offload context before it uploads. Each object of the listing
is then:

* referenced: its ``(uuid, ledger id)`` is what a ledger's offload context (or one of its
  offload segments) holds, complete or not: never reported;
* ``superseded-attempt``: its ledger is one of a managed ledger's, under another UUID (an
  attempt that failed or was replaced);
* ``ledger-gone``: no managed ledger lists its ledger, and the object's ``ManagedLedgerName``
  user metadata (read with a HEAD) names a managed ledger this cluster still has (a ledger
  trimmed or deleted after its offload);
* ``topic-deleted``: the managed ledger it names no longer exists, in a namespace this cluster
  has (Pulsar's #9962: a deleted topic's offloaded objects stay behind);
* ``unknown-managed-ledger``: it names no managed ledger, or one in a tenant or namespace this
  cluster does not have (another cluster sharing the bucket?): gc leaves it unless told
  ``include_unknown``;
* ``not-an-offload-key``: not ``<uuid>-ledger-<id>[-index]``: reported, never deleted.

An unfinished multipart upload is ``unfinished-upload`` unless its ``(uuid, ledger id)`` is a
ledger's incomplete offload (running now); an upload whose key is not an offload key is
``foreign-upload`` (never aborted). Only what is older than ``min_age_ms`` is reported.

:func:`collect_cluster_garbage` reads the metadata again and deletes only the deletable
reasons, skipping anything that became referenced meanwhile. A metadata store that cannot be
read raises (:class:`~offloader.errors.PulsarMetadataError`): no guess ever deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from formats.keys import INDEX_SUFFIX, ObjectKey, parse_key, parse_user_metadata
from offloader.errors import (
    AccessDenied,
    InvalidKeyError,
    ObjectNotFound,
    StoreError,
    StoreUnavailable,
)
from offloader.logs import get_logger
from offloader.naming import TopicName
from offloader.pulsar_cluster.base import ClusterLedgerRefs, PulsarClusterSource
from offloader.store import ObjectStore
from offloader.store.base import ObjectInfo

log = get_logger(__name__)

SUPERSEDED = "superseded-attempt"
LEDGER_GONE = "ledger-gone"
TOPIC_DELETED = "topic-deleted"
UNKNOWN = "unknown-managed-ledger"
NOT_OFFLOAD_KEY = "not-an-offload-key"
#: HEADs in flight when the objects of ledgers no managed ledger lists are classified
HEAD_CONCURRENCY = 8
UNFINISHED_UPLOAD = "unfinished-upload"
FOREIGN_UPLOAD = "foreign-upload"
#: what gc deletes (``unknown-managed-ledger`` only when told ``include_unknown``)
DELETABLE = frozenset({SUPERSEDED, LEDGER_GONE, TOPIC_DELETED, UNFINISHED_UPLOAD})
#: S3 Standard's published price, first 50 TB, us-east-1 (USD per GB-month, GB = 2^30 bytes)
S3_STANDARD_PRICE = 0.023
GIB = 1 << 30


@dataclass(frozen=True)
class ClusterOrphan:
    """An object of the bucket that no managed ledger references."""

    key: str
    size: int
    reason: str
    modified_ms: int | None
    uuid: str | None = None
    ledger_id: int | None = None
    #: the managed ledger the object belongs to (its own metadata, or the ledger's owner)
    managed_ledger: str | None = None


@dataclass(frozen=True)
class ClusterUpload:
    """An unfinished multipart upload of the bucket."""

    key: str
    upload_id: str
    reason: str
    initiated_ms: int | None
    uuid: str | None = None
    ledger_id: int | None = None


@dataclass
class ClusterAudit:
    """What :func:`audit_cluster_bucket` found, and what it looked at."""

    store: str
    cluster: str
    now_ms: int
    objects: list[ClusterOrphan] = field(default_factory=list)
    uploads: list[ClusterUpload] = field(default_factory=list)
    listed_objects: int = 0
    listed_bytes: int = 0
    topics: int = 0
    referenced_ledgers: int = 0

    def deletable(self, include_unknown: bool = False) -> list[ClusterOrphan]:
        return [o for o in self.objects if is_deletable(o.reason, include_unknown)]

    @property
    def orphan_bytes(self) -> int:
        return sum(o.size for o in self.objects if o.reason != NOT_OFFLOAD_KEY)


def is_deletable(reason: str, include_unknown: bool = False) -> bool:
    """Whether gc deletes (or aborts) what the audit reported for ``reason``."""
    return reason in DELETABLE or (include_unknown and reason == UNKNOWN)


def monthly_cost(size: int, price_per_gb_month: float) -> float:
    """What ``size`` bytes cost a month at ``price_per_gb_month`` (GB = 2^30 bytes)."""
    return size / GIB * price_per_gb_month


@dataclass(frozen=True)
class _References:
    """Which ``(uuid, ledger)`` the cluster references, which ledgers it lists (and whose),
    which managed ledgers and namespaces it has, and the running (incomplete) offloads."""

    pairs: frozenset[tuple[str, int]]
    ledger_owner: dict[int, str]
    managed_ledgers: frozenset[str]
    namespaces: frozenset[str]
    running: frozenset[tuple[str, int]]
    topics: int
    #: managed ledger name -> the topic name the source listed it as
    ml_topics: dict[str, str] = field(default_factory=dict)
    #: the object keys of :attr:`pairs` (data and index): one set lookup per listed object
    keys: frozenset[str] = frozenset()


def _managed_ledger_name(path: str) -> str:
    marker = "/managed-ledgers/"
    return path[path.index(marker) + len(marker) :] if marker in path else path


def read_references(source: PulsarClusterSource) -> _References:
    """Every managed ledger of the cluster, read now (pipelined)."""
    namespaces: set[str] = set()
    names: list[str] = []
    for tenant in source.tenants():
        for namespace in source.namespaces(tenant):
            namespaces.add(namespace)
            names.extend(source.topics(namespace))
    return _references(source.ledger_refs(names), namespaces)


def _references(cluster_refs: Iterable[ClusterLedgerRefs], namespaces: set[str]) -> _References:
    pairs: set[tuple[str, int]] = set()
    running: set[tuple[str, int]] = set()
    owner: dict[int, str] = {}
    ml_topics: dict[str, str] = {}
    count = 0
    for topic, path, ledgers in cluster_refs:
        count += 1
        ml = _managed_ledger_name(path)
        ml_topics[ml] = topic
        for lid, uid, complete, segments in ledgers:
            owner[lid] = ml
            if uid is not None:
                pairs.add((uid, lid))
                if not complete:
                    running.add((uid, lid))
            for sid in segments:
                pairs.add((sid, lid))
                if not complete:
                    running.add((sid, lid))
    return _References(
        frozenset(pairs),
        owner,
        frozenset(ml_topics),
        frozenset(namespaces),
        frozenset(running),
        count,
        ml_topics,
        _object_keys(pairs),
    )


def _object_keys(pairs: set[tuple[str, int]]) -> frozenset[str]:
    # the UUIDs are java_uuid's (canonical lower case): data_key's UUID check, one
    # uuid.UUID per ledger, is skipped; the key form is data_key's
    data = [f"{uid}-ledger-{lid}" for uid, lid in pairs]
    return frozenset(data + [d + INDEX_SUFFIX for d in data])


def _reread(
    source: PulsarClusterSource, refs: _References, managed_ledgers: set[str]
) -> _References:
    """The given managed ledgers read again (pipelined): what references them now."""
    topics: list[str] = []
    for ml in sorted(managed_ledgers):
        topic = refs.ml_topics.get(ml)
        if topic is None:
            try:
                topic = str(TopicName.from_managed_ledger_name(ml))
            except Exception:
                continue
        topics.append(topic)
    return _references(source.ledger_refs(topics), set(refs.namespaces))


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _old_enough(when_ms: int | None, now_ms: int, min_age_ms: int) -> bool:
    return when_ms is None or now_ms - when_ms >= min_age_ms


def _namespace_of(ml: str) -> str | None:
    parts = ml.split("/")
    return "/".join(parts[:2]) if len(parts) >= 4 and parts[2] == "persistent" else None


def _classify_unlisted(store: ObjectStore, key: str, refs: _References) -> tuple[str, str | None]:
    """The reason of an object whose ledger no managed ledger lists, from its own
    ``ManagedLedgerName`` (one HEAD)."""
    try:
        info = store.head(key)
    except ObjectNotFound:
        return UNKNOWN, None
    ml = parse_user_metadata(info.metadata).managed_ledger_name
    if not ml:
        return UNKNOWN, None
    if ml in refs.managed_ledgers:
        return LEDGER_GONE, ml
    namespace = _namespace_of(ml)
    if namespace is not None and namespace in refs.namespaces:
        return TOPIC_DELETED, ml
    return UNKNOWN, ml


def audit_cluster_bucket(
    source: PulsarClusterSource,
    store: ObjectStore,
    *,
    min_age_ms: int,
    now_ms: Callable[[], int],
) -> ClusterAudit:
    """See the module docstring: one listing pass beside the cluster's metadata read, then
    the managed ledgers of what looks unreferenced read again."""
    with ThreadPoolExecutor(1, thread_name_prefix="cluster-metadata") as pool:
        reading = pool.submit(read_references, source)
        try:
            listed = list(store.list())
            uploads = list(store.list_multipart_uploads())
        finally:
            refs = reading.result()  # its error (no guess) before the listing's, if both
    now = now_ms()
    audit = ClusterAudit(store.url, source.location, now, topics=refs.topics)
    audit.referenced_ledgers = len(refs.ledger_owner)
    heads: dict[tuple[str, int], tuple[str, str | None]] = {}
    unlisted: dict[tuple[str, int], str] = {}  # pair -> the key whose HEAD tells its reason
    found: list[tuple[ObjectInfo, int | None, ObjectKey, str | None]] = []
    pairs, referenced = refs.pairs, refs.keys
    audit.listed_objects = len(listed)
    audit.listed_bytes = sum(info.size for info in listed)
    for info in listed:
        if info.key in referenced:
            continue
        try:
            key = parse_key(info.key)
        except InvalidKeyError:
            key = None
        if key is not None and (key.uuid, key.ledger_id) in pairs:
            continue
        when = _ms(info.last_modified)
        if not _old_enough(when, now, min_age_ms):
            continue
        if key is None:
            audit.objects.append(ClusterOrphan(info.key, info.size, NOT_OFFLOAD_KEY, when))
            continue
        owner = refs.ledger_owner.get(key.ledger_id)
        if owner is None:
            unlisted.setdefault((key.uuid, key.ledger_id), info.key)
        found.append((info, when, key, owner))
    if unlisted:  # one HEAD per unlisted ledger attempt, several in flight
        with ThreadPoolExecutor(min(HEAD_CONCURRENCY, len(unlisted))) as pool:
            reasons = pool.map(lambda k: _classify_unlisted(store, k, refs), unlisted.values())
            heads = dict(zip(unlisted, reasons, strict=True))
    for info, when, key, owner in found:
        ml: str | None
        if owner is not None:
            reason, ml = SUPERSEDED, owner
        else:
            reason, ml = heads[(key.uuid, key.ledger_id)]
        audit.objects.append(
            ClusterOrphan(info.key, info.size, reason, when, key.uuid, key.ledger_id, ml)
        )
    for upload in uploads:
        try:
            key = parse_key(upload.key)
        except InvalidKeyError:
            key = None
        if key is not None and (key.uuid, key.ledger_id) in refs.running:
            continue
        when = _ms(upload.initiated)
        if not _old_enough(when, now, min_age_ms):
            continue
        audit.uploads.append(
            ClusterUpload(
                upload.key,
                upload.upload_id,
                UNFINISHED_UPLOAD if key is not None else FOREIGN_UPLOAD,
                when,
                key.uuid if key is not None else None,
                key.ledger_id if key is not None else None,
            )
        )
    _recheck(source, refs, audit)
    log.info(
        "cluster bucket audited",
        store=store.url,
        cluster=source.location,
        objects=audit.listed_objects,
        orphans=len(audit.objects),
        uploads=len(audit.uploads),
    )
    return audit


def _recheck(source: PulsarClusterSource, refs: _References, audit: ClusterAudit) -> None:
    """The managed ledgers the candidates name read again, after the listing: a candidate
    that one of them references now (an offload begun while we listed) is dropped; an
    object of a managed ledger created meanwhile is a trimmed ledger's, not a deleted
    topic's."""
    names = {o.managed_ledger for o in audit.objects if o.managed_ledger is not None}
    names.update(
        refs.ledger_owner[u.ledger_id]
        for u in audit.uploads
        if u.ledger_id is not None and u.ledger_id in refs.ledger_owner
    )
    if not names:
        return
    fresh = _reread(source, refs, names)
    kept: list[ClusterOrphan] = []
    for o in audit.objects:
        if o.uuid is not None and (o.uuid, o.ledger_id) in fresh.pairs:
            continue
        if o.reason in (TOPIC_DELETED, UNKNOWN) and o.managed_ledger in fresh.managed_ledgers:
            o = ClusterOrphan(
                o.key, o.size, LEDGER_GONE, o.modified_ms, o.uuid, o.ledger_id, o.managed_ledger
            )
        kept.append(o)
    audit.objects = kept
    audit.uploads = [u for u in audit.uploads if (u.uuid, u.ledger_id) not in fresh.running]


def collect_cluster_garbage(
    source: PulsarClusterSource,
    store: ObjectStore,
    audit: ClusterAudit,
    *,
    include_unknown: bool = False,
    dry_run: bool = False,
) -> tuple[list[str], list[str]]:
    """Delete the audit's deletable objects and abort its unfinished uploads, after reading
    the cluster's metadata again (what became referenced meanwhile is kept). Returns the keys
    deleted and the keys of the uploads aborted (what would be, with ``dry_run``)."""
    refs = read_references(source)  # raises if the metadata cannot be read: nothing deleted
    deleted: list[str] = []
    aborted: list[str] = []
    for orphan in audit.deletable(include_unknown):
        if (orphan.uuid, orphan.ledger_id) in refs.pairs:
            continue
        if not dry_run:
            try:
                store.delete(orphan.key)
            except (StoreUnavailable, AccessDenied):
                raise
            except StoreError as exc:
                log.warning("gc skipped an object", key=orphan.key, error=str(exc))
                continue
        deleted.append(orphan.key)
    for upload in audit.uploads:
        if upload.reason != UNFINISHED_UPLOAD:
            continue
        if (upload.uuid, upload.ledger_id) in refs.running:
            continue
        if not dry_run:
            try:
                store.abort_multipart_upload(upload.key, upload.upload_id)
            except (StoreUnavailable, AccessDenied):
                raise
            except StoreError as exc:
                log.warning("gc skipped an upload", key=upload.key, error=str(exc))
                continue
        aborted.append(upload.key)
    if deleted or aborted:
        log.info(
            "cluster orphans removed" if not dry_run else "cluster orphans to remove",
            objects=len(deleted),
            uploads=len(aborted),
            store=store.url,
        )
    return deleted, aborted
