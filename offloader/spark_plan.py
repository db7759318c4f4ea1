"""Planning and executing Spark reads of offloaded ledgers, without importing pyspark.

The Spark front ends (:mod:`offloader.spark` for RDDs, :mod:`offloader.spark_source` for the
DataFrame source) are thin: the driver calls one of the ``plan_*`` functions here, which read each
ledger's index (:func:`offloader.objects.load_index`) and return one picklable :class:`BlockTask`
per data block; each executor task calls :func:`read_task` on its descriptor, which opens its own
store client, fetches the block with ranged GETs of ``read_buffer_size`` bytes (1 MiB by
default), checks its CRC32C when the index extension records one, and yields
``(topic, ledger_id, entry_id, payload)``.

Descriptors carry the store URL, endpoint, region and settings, never credentials: executors
get those from their environment (``AWS_*`` variables, see :func:`aws_environment`).

:class:`EntryFilter` is the pruning logic shared by both front ends: conjunctions of
``=``/``>``/``>=``/``<``/``<=``/``IN`` on ``ledger_id`` and ``entry_id``; a block is read only
when some entry in it can match.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import unquote_plus, urlsplit

from formats.errors import InvalidKeyError
from formats.keys import MANAGED_LEDGER_NAME_KEY, parse_key
from offloader.config import OffloadSettings
from offloader.errors import ConfigError
from offloader.logs import redact
from offloader.objects import BlockRef, block_refs, load_index, read_block
from offloader.reusable_buffers import BLOCK_BUFFERS
from offloader.store import open_store
from offloader.store.base import GetResult, ObjectStore, RangeReader

__all__ = [
    "AWS_ENV_PREFIXES",
    "BlockTask",
    "EntryFilter",
    "Record",
    "StoreSpec",
    "aws_environment",
    "parse_ledger_pairs",
    "plan_discover",
    "plan_pairs",
    "read_task",
    "topic_from_managed_ledger",
]


#: ``(topic, ledger_id, entry_id, payload)``; topic is None when nothing records it
Record = tuple[str | None, int, int, bytes]

#: environment variables the executors need to reach the store (credentials included)
AWS_ENV_PREFIXES = ("AWS_",)
#: index loads the driver runs in parallel
INDEX_LOAD_THREADS = 8

TaskT = TypeVar("TaskT", bound="BlockTask | LocalLedgerTask")

_MANAGED_LEDGER = re.compile(r"^([^/]+)/([^/]+)/persistent/(.+)$")


def aws_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``AWS_*`` variables of ``environ`` (default: this process), to hand to executors."""
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
    """Entries ``first..last`` of a closed ledger still in the local ledger store under ``home``
    (read in place: executors must see that directory, as they do in ``local[*]`` mode)."""

    home: str
    topic: str
    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    batch_entries: int = 1000


#: what one partition reads
Task = BlockTask | LocalLedgerTask


# --- filters and pruning --------------------------------------------------------------------
COLUMNS = ("ledger_id", "entry_id")
OPS = ("=", ">", ">=", "<", "<=", "in")


@dataclass(frozen=True)
class _Range:
    """Integers ``lo..hi`` (inclusive) intersected with an optional finite set."""

    lo: int | None = None
    hi: int | None = None
    values: frozenset[int] | None = None

    def constrain(self, op: str, value: Any) -> _Range:
        if op == "in":
            ints = frozenset(int(v) for v in value if v is not None and v == math.floor(v))
            return replace(self, values=ints if self.values is None else self.values & ints)
        if value is None:  # comparisons with NULL match nothing
            return replace(self, values=frozenset())
        # non-integral literals: > 1.5 means >= 2, < 1.5 means <= 1
        if op == "=":
            return self.constrain("in", [value])
        if op in (">", ">="):
            lo = math.floor(value) + 1 if op == ">" else math.ceil(value)
            return replace(self, lo=lo if self.lo is None else max(self.lo, lo))
        hi = math.ceil(value) - 1 if op == "<" else math.floor(value)
        return replace(self, hi=hi if self.hi is None else min(self.hi, hi))

    def overlaps(self, first: int, last: int) -> bool:
        lo = first if self.lo is None else max(first, self.lo)
        hi = last if self.hi is None else min(last, self.hi)
        if lo > hi:
            return False
        return self.values is None or any(lo <= v <= hi for v in self.values)

    def matches(self, value: int) -> bool:
        return self.overlaps(value, value)


@dataclass(frozen=True)
class EntryFilter:
    """A conjunction of comparisons on ``ledger_id`` and ``entry_id`` (empty: everything)."""

    ledger: _Range = field(default_factory=_Range)
    entry: _Range = field(default_factory=_Range)

    @property
    def is_empty(self) -> bool:
        return self == EntryFilter()

    def and_(self, column: str, op: str, value: Any) -> EntryFilter:
        """This filter AND ``column op value`` (``op`` one of :data:`OPS`)."""
        if column not in COLUMNS or op not in OPS:
            raise ConfigError(f"cannot filter on {column} {op} {value!r}")
        if column == "ledger_id":
            return replace(self, ledger=self.ledger.constrain(op, value))
        return replace(self, entry=self.entry.constrain(op, value))

    def keeps_block(self, task: BlockTask | LocalLedgerTask | BlockRef) -> bool:
        """True when some entry of the block can match (otherwise it is never fetched)."""
        return self.ledger.matches(task.ledger_id) and self.entry.overlaps(
            task.first_entry_id, task.last_entry_id
        )

    def keeps_entry(self, entry_id: int) -> bool:
        return self.entry.matches(entry_id)

    @property
    def filters_entries(self) -> bool:
        return self.entry != _Range()

    def prune(self, tasks: Iterable[TaskT]) -> list[TaskT]:
        return [t for t in tasks if self.keeps_block(t)]

    @classmethod
    def from_options(
        cls, ledger_ids: Iterable[int] | None = None, entry_range: tuple[int, int] | None = None
    ) -> EntryFilter:
        """``ledger_id IN ledger_ids AND entry_id BETWEEN first AND last``."""
        f = cls()
        if ledger_ids is not None:
            f = f.and_("ledger_id", "in", list(ledger_ids))
        if entry_range is not None:
            f = f.and_("entry_id", ">=", entry_range[0]).and_("entry_id", "<=", entry_range[1])
        return f


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


def _ledger_tasks(
    store: ObjectStore, spec: StoreSpec, ledger_id: int, uuid: str, topic: str | None
) -> list[BlockTask]:
    capture = _MetadataCapture(store)
    index = load_index(capture, ledger_id, uuid)  # type: ignore[arg-type]
    if topic is None:
        lower = {k.lower(): v for k, v in capture.metadata.items()}
        topic = topic_from_managed_ledger(lower.get(MANAGED_LEDGER_NAME_KEY.lower()))
    return [BlockTask(spec, ref, topic) for ref in block_refs(index, ledger_id, uuid)]


def plan_pairs(
    spec: StoreSpec,
    ledgers: Sequence[tuple[int, str]] | Sequence[tuple[int, str, str | None]],
    *,
    store: ObjectStore | None = None,
    entry_filter: EntryFilter | None = None,
) -> list[BlockTask]:
    """One task per block of each ``(ledger_id, uuid[, topic])``, in the given ledger order.

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
    own = store is None
    st = spec.open() if store is None else store
    try:
        if len(wanted) <= 1:
            per_ledger = [_ledger_tasks(st, spec, lid, uuid, topic) for lid, uuid, topic in wanted]
        else:
            with ThreadPoolExecutor(min(INDEX_LOAD_THREADS, len(wanted))) as pool:
                per_ledger = list(
                    pool.map(lambda w: _ledger_tasks(st, spec, w[0], w[1], w[2]), wanted)
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


def plan_topics(
    home: str,
    topics: Sequence[str],
    settings: OffloadSettings | None = None,
    *,
    store_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    entry_filter: EntryFilter | None = None,
) -> list[Task]:
    """Tasks for every closed ledger of ``topics``, whichever tier holds it.

    The metadata store under ``home`` lists each topic's ledgers (in id order). A ledger whose
    offload is complete is read from the object store its offload context names (``store_url``
    / ``endpoint_url`` override those, e.g. to reach the same bucket through another endpoint):
    one task per block. A closed ledger not (completely) offloaded is read from the local
    ledger store under ``home``: one task per ``max_block_size`` bytes of entries. Open ledgers
    (the one being written) and empty ledgers are skipped.
    """
    from offloader.metadata import open_metadata_store
    from offloader.naming import TopicName

    settings = settings or OffloadSettings()
    flt = entry_filter or EntryFilter()
    names = [str(TopicName.parse(t)) for t in topics]
    meta = open_metadata_store(home)
    try:
        records = [(name, meta.list_ledgers(name)) for name in names]
    finally:
        meta.close()
    remote: dict[StoreSpec, list[tuple[int, str, str | None]]] = {}
    order: list[tuple[str, int]] = []
    local: dict[tuple[str, int], list[Task]] = {}
    for name, ledgers in records:
        for rec in ledgers:
            if rec.state != "CLOSED" or not flt.ledger.matches(rec.ledger_id):
                continue
            ctx = rec.offload
            if ctx is not None and ctx.complete:
                props = ctx.driver.properties
                spec = StoreSpec(
                    store_url or props.get("store_url") or "",
                    endpoint_url or props.get("endpoint") or None,
                    region or props.get("region") or None,
                    settings,
                )
                remote.setdefault(spec, []).append((rec.ledger_id, ctx.uuid, name))
            elif rec.entries > 0:
                local[(name, rec.ledger_id)] = list(_local_tasks(home, name, rec, settings))
            order.append((name, rec.ledger_id))
    by_ledger: dict[tuple[str, int], list[Task]] = dict(local)
    for spec, pairs in remote.items():
        if not spec.url:
            raise ConfigError(
                f"offloaded ledgers {[p[0] for p in pairs]} record no store URL; pass store_url"
            )
        for task in plan_pairs(spec, pairs):
            by_ledger.setdefault((task.topic or "", task.ledger_id), []).append(task)
    tasks = [t for key in order for t in by_ledger.get(key, [])]
    return flt.prune(tasks)


def _local_tasks(
    home: str, topic: str, rec: Any, settings: OffloadSettings
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


# --- reading (executor) ----------------------------------------------------------------------
#: store clients an executor process keeps (one per store and credentials), reused by its tasks
CLIENT_CACHE_SIZE = 8
_clients: OrderedDict[tuple[StoreSpec, tuple[tuple[str, str], ...]], ObjectStore] = OrderedDict()
_clients_lock = threading.Lock()


def executor_store(spec: StoreSpec) -> ObjectStore:
    """This process's client for ``spec`` (created on first use; creating a boto3 client costs
    ~70 ms, more than reading a small block). Keyed by the current ``AWS_*`` environment too,
    so changed credentials get a new client. Never pickled: descriptors hold only ``spec``."""
    key = (spec, tuple(sorted(aws_environment().items())))
    with _clients_lock:
        store = _clients.get(key)
        if store is not None:
            _clients.move_to_end(key)
            return store
    store = spec.open()
    with _clients_lock:
        _clients[key] = store
        while len(_clients) > CLIENT_CACHE_SIZE:
            _clients.popitem(last=False)[1].close()
    return store


class CountingStore:
    """Delegates to a store and counts its GET requests (whole, ranged and streamed ranges);
    for tests and benchmarks."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.gets = 0

    def get(self, key: str) -> GetResult:
        self.gets += 1
        return self._store.get(key)

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        self.gets += 1
        return self._store.get_range(key, start, end)

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        self.gets += 1
        return self._store.open_range(key, start, end)

    def close(self) -> None:
        """The wrapped store stays open (it may be a cached executor client)."""


def iter_task_entries(
    task: BlockTask, store: ObjectStore, entry_filter: EntryFilter | None = None
) -> Iterator[tuple[int, memoryview]]:
    """``(entry_id, payload view)`` of the block's entries that pass ``entry_filter``."""
    flt = entry_filter if entry_filter is not None and entry_filter.filters_entries else None
    ref = task.ref
    # the block lands in a buffer of this worker's, reused for a later block once the caller
    # has dropped every payload view (a fresh 64 MiB buffer costs ~16,000 page faults)
    entries = read_block(
        store,
        ref,
        read_buffer=task.store.settings.read_buffer_size,
        out=BLOCK_BUFFERS.take(ref.end - ref.start),
    )
    for entry in entries:
        if flt is None or flt.keeps_entry(entry.entry_id):
            yield entry.entry_id, entry.payload


def read_local_task(
    task: LocalLedgerTask, entry_filter: EntryFilter | None = None
) -> Iterator[Record]:
    """Entries of a ledger still in the local ledger store (CRC-checked by its reader)."""
    from offloader.ledgers import LedgerStore

    flt = entry_filter if entry_filter is not None and entry_filter.filters_entries else None
    with LedgerStore(task.home).open_reader(task.topic, task.ledger_id) as reader:
        step = max(1, task.batch_entries)
        for first in range(task.first_entry_id, task.last_entry_id + 1, step):
            last = min(first + step - 1, task.last_entry_id)
            for entry_id, payload in enumerate(reader.read(first, last), first):
                if flt is None or flt.keeps_entry(entry_id):
                    yield (task.topic, task.ledger_id, entry_id, payload)


def read_task(
    task: Task,
    entry_filter: EntryFilter | None = None,
    *,
    on_gets: Callable[[int], None] | None = None,
) -> Iterator[Record]:
    """Read one block in an executor: its own client, ranged GETs, CRC32C check, records.

    ``on_gets`` is called with the number of GETs issued once the block has been read.
    Corrupt data raises the typed error (``ChecksumMismatchError`` ...), never a short result.
    """
    if isinstance(task, LocalLedgerTask):
        yield from read_local_task(task, entry_filter)
        return
    counting = CountingStore(executor_store(task.store))
    try:
        ledger_id, topic = task.ref.ledger_id, task.topic
        for entry_id, payload in iter_task_entries(task, counting, entry_filter):  # type: ignore[arg-type]
            yield (topic, ledger_id, entry_id, bytes(payload))
    finally:
        if on_gets is not None:
            on_gets(counting.gets)
