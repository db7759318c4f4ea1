"""Planning Spark reads of offloaded ledgers on the driver, without importing pyspark.

The Spark front ends (:mod:`offloader.spark` for RDDs, :mod:`offloader.spark.source` for the
DataFrame source) are thin: the driver calls one of the ``plan_*`` functions here, which read each
ledger's index (:func:`offloader.read.objects.load_index`) and return one picklable
:class:`BlockTask` per data block (or one :class:`LocalLedgerTask` per ledger still on local
disk); each executor task then calls :func:`offloader.spark.tasks.read_task` on its
descriptor. Blocks no entry of which can pass the
:class:`~offloader.spark.entry_filter.EntryFilter` are never planned.

Descriptors carry the store URL, endpoint, region and settings, never credentials: executors
get those from their environment (``AWS_*`` variables, see :func:`aws_environment`).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from formats.errors import InvalidKeyError
from formats.extension import TAG_ZONE_MAPS
from formats.keys import MANAGED_LEDGER_NAME_KEY, parse_key
from formats.pulsar.zone_maps import BlockZone, decode_zone_maps
from formats.transform import TransformSection, transform_of
from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.keyring import key_ring_path
from offloader.logs import get_logger, redact
from offloader.read.objects import BlockRef, RecordedOffload, block_refs, load_index
from offloader.selection import TopicSelection
from offloader.spark.entry_filter import EntryFilter
from offloader.store import open_store
from offloader.store.base import GetResult, ObjectStore

log = get_logger(__name__)

__all__ = [
    "AWS_ENV_PREFIXES",
    "BlockTask",
    "Record",
    "StoreSpec",
    "aws_environment",
    "parse_ledger_pairs",
    "plan_cluster",
    "plan_discover",
    "plan_pairs",
    "topic_from_managed_ledger",
]


#: ``(topic, ledger_id, entry_id, payload)``; topic is None when nothing records it
Record = tuple[str | None, int, int, bytes]

#: environment variables the executors need to reach the store (credentials included): AWS's,
#: Google's (``STORAGE_EMULATOR_HOST``, ``GOOGLE_APPLICATION_CREDENTIALS``, ...) and Azure's
#: (``AZURE_STORAGE_CONNECTION_STRING``, ``AZURE_STORAGE_ACCOUNT``, ``AZURE_STORAGE_KEY``)
AWS_ENV_PREFIXES = ("AWS_", "STORAGE_EMULATOR_HOST", "GOOGLE_", "AZURE_STORAGE_")
#: index loads the driver runs in parallel
INDEX_LOAD_THREADS = 8

_MANAGED_LEDGER = re.compile(r"^([^/]+)/([^/]+)/persistent/(.+)$")


def aws_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The store variables of ``environ`` (default: this process), to hand to executors:
    ``AWS_*``, and GCS's and Azure's (:data:`AWS_ENV_PREFIXES`)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(AWS_ENV_PREFIXES)}


def topic_from_managed_ledger(name: str | None) -> str | None:
    """``tenant/ns/persistent/<encoded topic>`` (Pulsar's ManagedLedgerName) as a topic name."""
    if not name:
        return None
    match = _MANAGED_LEDGER.match(name)
    if match is None:
        return name
    tenant, namespace, local = match.groups()
    return f"persistent://{tenant}/{namespace}/{unquote_plus(local)}"


# --- store descriptors ---------------------------------------------------------------------
@dataclass(frozen=True)
class StoreSpec:
    """How an executor opens the store: URL, endpoint, region and settings, no credentials."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None
    settings: OffloadSettings = field(default_factory=OffloadSettings)

    def __post_init__(self) -> None:
        if "@" in urlsplit(self.url).netloc:
            raise ConfigError(
                f"store URL {redact(self.url)} embeds credentials; pass them in the environment "
                "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
            )

    def __repr__(self) -> str:
        endpoint = f", endpoint={redact(self.endpoint_url)}" if self.endpoint_url else ""
        return f"StoreSpec({redact(self.url)}{endpoint})"

    def open(self) -> ObjectStore:
        """A fresh client for this store (each executor task opens its own)."""
        return open_store(
            self.url, endpoint_url=self.endpoint_url, region=self.region, settings=self.settings
        )


@dataclass(frozen=True)
class BlockTask:
    """One data block to read: one RDD / DataFrame partition. Picklable, no live clients."""

    store: StoreSpec
    ref: BlockRef
    topic: str | None = None
    #: the ledger's transform (chunk table, wrapped data key; no key bytes), None when plain
    transform: TransformSection | None = None
    #: the block's zone map (Pulsar message times), when its index records one
    zone: BlockZone | None = None
    #: the index object's ``ManagedLedgerName`` user metadata (None if absent), for messages
    managed_ledger: str | None = None

    @property
    def ledger_id(self) -> int:
        return self.ref.ledger_id

    @property
    def first_entry_id(self) -> int:
        return self.ref.first_entry_id

    @property
    def last_entry_id(self) -> int:
        return self.ref.last_entry_id

    def __repr__(self) -> str:
        r = self.ref
        return (
            f"BlockTask({self.topic or '-'} ledger {r.ledger_id} block {r.block} entries "
            f"{r.first_entry_id}..{r.last_entry_id} bytes [{r.start},{r.end}) of {self.store!r})"
        )


@dataclass(frozen=True)
class LocalLedgerTask:
    """Entries ``first..last`` of a ledger still in the local ledger store under ``home``
    (read in place: executors must see that directory, as they do in ``local[*]`` mode).

    ``open``: the topic's current ledger, still being written: read-only, as ``topics read``
    reads it (its records scanned up to ``last``, the count the metadata had when the plan was
    made; entries added after that are not read)."""

    home: str
    topic: str
    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    batch_entries: int = 1000
    open: bool = False


#: what one partition reads
Task = BlockTask | LocalLedgerTask


# --- planning (driver) -----------------------------------------------------------------------
class _MetadataCapture:
    """Delegates to a store and remembers the user metadata of the last whole-object GET."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.metadata: Mapping[str, str] = {}

    def get(self, key: str) -> GetResult:
        result = self._store.get(key)
        self.metadata = result.metadata
        return result

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        result = self._store.get_range(key, start, end)
        self.metadata = result.metadata
        return result

    @property
    def url(self) -> str:
        return self._store.url


def _ledger_tasks(
    store: ObjectStore,
    spec: StoreSpec,
    ledger_id: int,
    uuid: str,
    topic: str | None,
    recorded: RecordedOffload | None = None,
) -> list[BlockTask]:
    capture = _MetadataCapture(store)
    index = load_index(capture, ledger_id, uuid, recorded=recorded)  # type: ignore[arg-type]
    lower = {k.lower(): v for k, v in capture.metadata.items()}
    managed_ledger = lower.get(MANAGED_LEDGER_NAME_KEY.lower()) or None
    if topic is None:
        topic = topic_from_managed_ledger(managed_ledger)
    transform = transform_of(index.extension, index.data_object_length)
    refs = block_refs(index, ledger_id, uuid)
    zones: tuple[BlockZone | None, ...] = (None,) * len(refs)
    section = index.extension.section(TAG_ZONE_MAPS) if index.extension is not None else None
    if section is not None:
        zones = decode_zone_maps(section.payload, len(refs))
    return [
        BlockTask(spec, ref, topic, transform=transform, zone=zone, managed_ledger=managed_ledger)
        for ref, zone in zip(refs, zones, strict=True)
    ]


def plan_pairs(
    spec: StoreSpec,
    ledgers: Sequence[tuple[int, str]] | Sequence[tuple[int, str, str | None]],
    *,
    store: ObjectStore | None = None,
    entry_filter: EntryFilter | None = None,
    recorded: dict[int, RecordedOffload] | None = None,
) -> list[BlockTask]:
    """One task per block of each ``(ledger_id, uuid[, topic])``, in the given ledger order.
    ``recorded``: per ledger id, what the metadata recorded, checked against each index.

    The topic, when not given, is the index object's ``ManagedLedgerName`` user metadata as a
    ``persistent://`` name (None if absent). Ledgers excluded by ``entry_filter`` on
    ``ledger_id`` are not even indexed.
    """
    flt = entry_filter or EntryFilter()
    wanted = [
        (int(item[0]), str(item[1]), item[2] if len(item) > 2 else None)  # type: ignore[misc]
        for item in ledgers
        if flt.ledger.matches(int(item[0]))
    ]
    recorded = recorded or {}
    own = store is None
    st = spec.open() if store is None else store
    try:
        if len(wanted) <= 1:
            per_ledger = [
                _ledger_tasks(st, spec, lid, uuid, topic, recorded.get(lid))
                for lid, uuid, topic in wanted
            ]
        else:
            with ThreadPoolExecutor(min(INDEX_LOAD_THREADS, len(wanted))) as pool:
                per_ledger = list(
                    pool.map(
                        lambda w: _ledger_tasks(st, spec, w[0], w[1], w[2], recorded.get(w[0])),
                        wanted,
                    )
                )
    finally:
        if own:
            st.close()
    return flt.prune(t for tasks in per_ledger for t in tasks)


def discover_ledgers(store: ObjectStore) -> list[tuple[int, str]]:
    """``(ledger_id, uuid)`` of every ``<uuid>-ledger-<id>-index`` key, by ledger id then uuid.

    Other keys are ignored. A ledger offloaded more than once (an earlier attempt's objects not
    yet cleaned up) appears once per uuid.
    """
    found = []
    for info in store.list(""):
        if not info.key.endswith("-index"):
            continue
        try:
            key = parse_key(info.key)
        except InvalidKeyError:
            continue
        found.append((key.ledger_id, key.uuid))
    return sorted(found)


def plan_discover(spec: StoreSpec, *, entry_filter: EntryFilter | None = None) -> list[BlockTask]:
    """Tasks for every ledger whose index is in the store (no metadata store needed)."""
    with_store = spec.open()
    try:
        pairs = discover_ledgers(with_store)
        return plan_pairs(spec, pairs, store=with_store, entry_filter=entry_filter)
    finally:
        with_store.close()


def plan_cluster(
    metadata_url: str,
    selection: str,
    settings: OffloadSettings | None = None,
    *,
    store_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    entry_filter: EntryFilter | None = None,
) -> list[BlockTask]:
    """Tasks for the offloaded ledgers of a real Pulsar cluster's topics (``selection``: topic
    names, a namespace, or a regex, :mod:`offloader.selection`; see
    :func:`~offloader.pulsar_cluster.base.select_topics`): only ledgers whose offload is
    complete, in ledger order per topic, ``topic`` the real topic name, each from the bucket
    its driver metadata names (``store_url`` for all, when given). A topic's ledgers that are
    not offloaded are reported once per topic (count, entries) as a warning."""
    from offloader.pulsar_cluster import open_cluster_source
    from offloader.pulsar_cluster.base import select_topics
    from offloader.read.cluster import BucketStores, offloaded_ledgers

    settings = settings or OffloadSettings()
    stores = BucketStores(store_url, endpoint_url=endpoint_url, region=region)
    tasks: list[BlockTask] = []
    with open_cluster_source(metadata_url) as source:
        cluster_topics = source.managed_ledgers(select_topics(source, selection))
    for ct in cluster_topics:
        left = ct.not_offloaded
        if left:
            message = (
                f"{ct.topic}: {len(left)} ledger(s) ({sum(li.entries or 0 for li in left)} "
                "entries) not offloaded (still only in BookKeeper): not read"
            )
            # reported once: the UserWarning (on the console), the log line at info level
            log.info(
                "cluster topic has ledgers not offloaded",
                topic=ct.topic,
                ledgers=len(left),
                entries=sum(li.entries or 0 for li in left),
            )
            warnings.warn(message, stacklevel=2)
        by_store: dict[tuple[str, str | None, str | None], list[tuple[int, str, str]]] = {}
        order: list[tuple[str, str | None, str | None]] = []
        for ledger in offloaded_ledgers(ct):
            where = stores.url_for(ledger)
            if where not in by_store:
                by_store[where] = []
                order.append(where)
            by_store[where].append((ledger.ledger_id, ledger.uuid, ct.topic))
        per_ledger: dict[int, list[BlockTask]] = {}
        for where in order:
            spec = StoreSpec(where[0], where[1], where[2], settings)
            for task in plan_pairs(spec, by_store[where], entry_filter=entry_filter):
                per_ledger.setdefault(task.ledger_id, []).append(task)
        for ledger in offloaded_ledgers(ct):
            tasks.extend(per_ledger.get(ledger.ledger_id, []))
    return tasks


def plan_topics(
    home: str,
    topics: Sequence[str] | TopicSelection,
    settings: OffloadSettings | None = None,
    *,
    store_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    entry_filter: EntryFilter | None = None,
    metadata: str | None = None,
    open_ledgers: bool = True,
) -> list[Task]:
    """Tasks for every ledger of ``topics`` (names, or a selection whose namespaces and
    regexes are matched against the metadata store's topics), whichever tier holds it.

    The metadata store under ``home`` (or the shared one ``metadata`` names, a
    ``postgresql://`` URL: every broker's topics) lists each topic's ledgers (in id order). A
    ledger whose offload is complete is read from the object store its offload context names
    (``store_url`` / ``endpoint_url`` override those, e.g. to reach the same bucket through
    another endpoint):
    one task per block. A closed ledger not (completely) offloaded is read from the local
    ledger store under ``home``: one task per ``max_block_size`` bytes of entries. The open
    ledger (the one being written) is read from its file too, read-only, up to the entry count
    the metadata has now (``open_ledgers=False`` leaves it out: the export reads closed ledgers
    only). Empty ledgers have no task. On a shared store, a topic another broker owns
    contributes its offloaded ledgers only: the others, its open ledger included, are in the
    owner's home (they are skipped, with one warning saying how many ledgers and entries were
    left out, and why).
    """
    from offloader.metadata import cluster_of, open_metadata_store
    from offloader.naming import TopicName
    from offloader.runtime import read_broker_id

    settings = settings or OffloadSettings()
    if settings.key_ring is None:  # transformed ledgers: the home's key ring
        settings = settings.replace(key_ring=str(key_ring_path(Path(home))))
    flt = entry_filter or EntryFilter()
    meta = open_metadata_store(metadata or home)
    try:
        if not isinstance(topics, TopicSelection):
            given = list(topics)
        elif topics.names_only:
            given = list(topics.names)
        else:  # a namespace or a regex: matched against the store's topics
            given = topics.expand([t.name for t in meta.list_topics()])
        names = list(dict.fromkeys(str(TopicName.parse(t)) for t in given))
        records = [(name, meta.list_ledgers(name)) for name in names]
        cluster = cluster_of(meta)
        owners = cluster.list_topic_owners() if cluster.shared else {}
    finally:
        meta.close()
    me = read_broker_id(Path(home))
    foreign = {name: o.broker_id for name, o in owners.items() if o.broker_id != me}
    remote: dict[StoreSpec, list[tuple[int, str, str | None]]] = {}
    recorded: dict[int, RecordedOffload] = {}
    order: list[tuple[str, int]] = []
    local: dict[tuple[str, int], list[Task]] = {}
    elsewhere: list[tuple[str, int, int, str]] = []
    for name, ledgers in records:
        for rec in ledgers:
            is_open = rec.state == "OPEN"
            if not (rec.state == "CLOSED" or (is_open and open_ledgers)):
                continue
            if not flt.ledger.matches(rec.ledger_id):
                continue
            ctx = rec.offload
            if ctx is not None and ctx.complete and not is_open:
                props = ctx.driver.properties
                spec = StoreSpec(
                    store_url or props.get("store_url") or "",
                    endpoint_url or props.get("endpoint") or None,
                    region or props.get("region") or None,
                    settings,
                )
                remote.setdefault(spec, []).append((rec.ledger_id, ctx.uuid, name))
                known = RecordedOffload.of(ctx)
                if known is not None:
                    recorded[rec.ledger_id] = known
            elif rec.entries > 0 and name in foreign:
                elsewhere.append((name, rec.ledger_id, rec.entries, foreign[name]))
                continue
            elif rec.entries > 0:
                chunks = _local_tasks(home, name, rec, settings, is_open)
                local[(name, rec.ledger_id)] = list(chunks)
            order.append((name, rec.ledger_id))
    if elsewhere:
        log.warning(
            "ledgers left out: not offloaded yet, their only copy is in the home of the broker "
            "that owns their topic",
            ledgers=len(elsewhere),
            entries=sum(e[2] for e in elsewhere),
            left_out=", ".join(f"{t} ledger {lid} (broker {o})" for t, lid, _n, o in elsewhere),
        )
    by_ledger: dict[tuple[str, int], list[Task]] = dict(local)
    for spec, pairs in remote.items():
        if not spec.url:
            raise ConfigError(
                f"offloaded ledgers {[p[0] for p in pairs]} record no store URL; pass store_url"
            )
        for task in plan_pairs(spec, pairs, recorded=recorded):
            by_ledger.setdefault((task.topic or "", task.ledger_id), []).append(task)
    tasks = [t for key in order for t in by_ledger.get(key, [])]
    return flt.prune(tasks)


def _local_tasks(
    home: str, topic: str, rec: Any, settings: OffloadSettings, is_open: bool = False
) -> Iterator[LocalLedgerTask]:
    """Split a local ledger into tasks of about ``max_block_size`` bytes (by entry count)."""
    chunks = max(1, -(-int(rec.size_bytes) // settings.max_block_size))
    per = -(-int(rec.entries) // chunks)
    for first in range(0, rec.entries, per):
        yield LocalLedgerTask(
            home,
            topic,
            rec.ledger_id,
            first,
            min(first + per, rec.entries) - 1,
            settings.ledger_read_batch_entries,
            is_open,
        )


def parse_ledger_pairs(text: str) -> list[tuple[int, str]]:
    """``"id:uuid,id:uuid"`` (the DataFrame source's ``ledgers`` option)."""
    pairs = []
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        ledger, sep, uuid = item.partition(":")
        try:
            if not sep:
                raise ValueError(item)
            pairs.append((int(ledger), str(parse_key(f"{uuid.strip().lower()}-ledger-0").uuid)))
        except (ValueError, InvalidKeyError):
            raise ConfigError(f"bad ledger {item!r}: expected <ledger id>:<uuid>") from None
    return pairs
