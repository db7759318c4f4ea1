"""The framework of ``offloader metadata rebuild``: one listing of the store, handed to one
:class:`Rebuilder` per kind of record, each planning from keys alone and then writing through
the metadata Protocols.

A rebuilder plugs in by kind: Pulsar ledgers now (:mod:`offloader.rebuild.ledgers`); Kafka
segments and export watermarks later, each with its own module beside it. They share the
:class:`StoreListing` (the only listing a rebuild makes) and report :class:`RebuildItem`\\ s,
one per record planned, written, kept or refused.

A rebuilder gets the runtime (its ``store`` counts the requests made) and writes through a
metadata Protocol: the runtime's ``MetadataStore`` for ledgers; one that writes another (the
Kafka tier's ``KafkaMetadataStore``, the ``ExportMetadataStore``) is built with it by the
facade and handed to :func:`offloader.rebuild.run.rebuild` (``rebuilders=``). Its watermark
objects use their own kind under ``_offloader/v1/watermarks/`` (``formats.manifest``;
``offloader.offload.manifests.advance_watermark`` writes any kind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Protocol

from offloader.runtime import Runtime
from offloader.store.base import MultipartUploadInfo, ObjectInfo, ObjectStore

__all__ = [
    "BODY_CONCURRENCY",
    "Action",
    "BodyReader",
    "RebuildItem",
    "RebuildReport",
    "Rebuilder",
    "StoreListing",
    "TopicSelector",
    "watermark_item",
]

#: what a rebuild does with, or says about, one record
Action = Literal[
    "namespace",  # a namespace created for the topics found
    "register",  # an Iceberg table the catalog lost, registered from its newest metadata file
    "topic",  # a topic created
    "offload",  # a finished copy recorded: a complete, offloaded ledger
    "present",  # already recorded as it would be (--merge)
    "superseded",  # a second finished copy of a recorded ledger: recorded SUPERSEDED
    "unfinished",  # an attempt without a completion marker: recorded FAILED, an orphan
    "orphan",  # objects of an attempt whose ledger is unknown: left for the orphan audit
    "watermark",  # a topic's watermark, as the bucket and the markers say
    "conflict",  # differs from what the store already has (--merge): nothing written
    "problem",  # the bucket contradicts itself (a marker without its objects): nothing written
]

#: whether a topic (its full name) is one the caller asked for
TopicSelector = Callable[[str], bool]

#: small manifest GETs a rebuild keeps in flight (1: one after another, on the caller's thread)
BODY_CONCURRENCY = 8
#: how far past the body being read the next GETs are started (bodies held at most)
BODY_LOOKAHEAD = 64


class BodyReader:
    """Whole-object GETs of the small manifests a rebuild reads (marker bodies), in the order
    it will ask for them: up to ``concurrency`` in flight, started at most ``lookahead``
    keys past the one being read, so that the bodies held stay few however large the
    bucket. :meth:`read` gives one key's bytes or raises the typed error its GET raised,
    exactly as ``store.get(key).data`` on the caller's thread would (a key not planned is
    read so). The records written from them stay in the rebuild's own, deterministic order;
    only the waiting overlaps. A context manager: leaving it cancels the GETs not started."""

    def __init__(
        self,
        store: ObjectStore,
        keys: Iterable[str],
        *,
        concurrency: int = BODY_CONCURRENCY,
        lookahead: int = BODY_LOOKAHEAD,
    ) -> None:
        self._store = store
        self._keys = list(dict.fromkeys(keys))
        self._position = {key: i for i, key in enumerate(self._keys)}
        self._started = 0
        self._lookahead = max(lookahead, concurrency)
        self._futures: dict[str, Future[bytes]] = {}
        self._pool = (
            ThreadPoolExecutor(concurrency, thread_name_prefix="rebuild-body")
            if concurrency > 1 and len(self._keys) > 1
            else None
        )

    def _get(self, key: str) -> bytes:
        return self._store.get(key).data

    def read(self, key: str) -> bytes:
        at = self._position.get(key)
        if self._pool is None or at is None:
            return self._get(key)
        until = min(len(self._keys), at + 1 + self._lookahead)
        while self._started < until:
            ahead = self._keys[self._started]
            self._futures[ahead] = self._pool.submit(self._get, ahead)
            self._started += 1
        future = self._futures.pop(key, None)
        if future is None:  # read twice: the first read took its result
            return self._get(key)
        return future.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._futures.clear()

    def __enter__(self) -> BodyReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class StoreListing:
    """Everything one pass over the store saw: its objects (key order) and its incomplete
    multipart uploads. ``bodies`` counts the GETs rebuilders made on top of it."""

    objects: Sequence[ObjectInfo]
    uploads: Sequence[MultipartUploadInfo]
    #: every listed object's size, by key
    sizes: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, objects: Sequence[ObjectInfo], uploads: Sequence[MultipartUploadInfo]
    ) -> StoreListing:
        return cls(objects, uploads, {o.key: o.size for o in objects})


@dataclass(frozen=True)
class RebuildItem:
    """One record of a rebuild: what it is and what was (or, dry, would be) done with it."""

    kind: str
    action: Action
    topic: str | None
    ledger_id: int | None = None
    uuid: str | None = None
    detail: str = ""
    fields: Mapping[str, int | str | None] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "action": self.action,
            "topic": self.topic,
            "ledger_id": self.ledger_id,
            "uuid": self.uuid,
        }
        out.update(self.fields)
        if self.detail:
            out["detail"] = self.detail
        return out


def watermark_item(
    kind: str,
    topic: str,
    highest: int | None,
    bucket_watermark: tuple[int, str] | None,
    *,
    in_ledger_column: bool = False,
    fields: Mapping[str, int | str | None] | None = None,
) -> RebuildItem:
    """A topic's (or partition's) watermark as a rebuild restores it: the higher of the
    bucket's watermark object (``(position, key)``, None when there is none) and the highest
    finished copy's marker (``highest``), with a detail when the object lags the markers (a
    crash before its PUT). ``in_ledger_column``: the position goes in the ledger column
    (Pulsar's), else in the ``position`` field; ``fields``: extra fields, before those and
    ``bucket_watermark`` and ``highest_marker``."""
    bucket = bucket_watermark[0] if bucket_watermark is not None else None
    position = max((p for p in (highest, bucket) if p is not None), default=None)
    detail = ""
    if bucket is None or (highest is not None and highest > bucket):
        detail = "the bucket's watermark object is behind the markers (a crash before its PUT)"
    extra: dict[str, int | str | None] = dict(fields or {})
    if not in_ledger_column:
        extra["position"] = position
    extra.update(bucket_watermark=bucket, highest_marker=highest)
    return RebuildItem(
        kind,
        "watermark",
        topic,
        position if in_ledger_column else None,
        bucket_watermark[1] if bucket_watermark is not None else None,
        detail,
        extra,
    )


@dataclass(frozen=True)
class RebuildReport:
    """A rebuild's outcome: its items in order, the store requests it made (by operation:
    ``list`` calls, ``get``, ``head``...), whether it wrote."""

    items: list[RebuildItem]
    dry_run: bool
    merge: bool
    objects_listed: int
    uploads_listed: int
    requests: Mapping[str, int] = field(default_factory=dict)

    @property
    def gets(self) -> int:
        return self.requests.get("get", 0)

    @property
    def heads(self) -> int:
        return self.requests.get("head", 0)

    def count(self, action: Action) -> int:
        return sum(1 for item in self.items if item.action == action)

    def summary(self) -> dict[str, object]:
        counts = {a: self.count(a) for a in Action.__args__}  # type: ignore[attr-defined]
        return {
            "dry_run": self.dry_run,
            "merge": self.merge,
            "objects_listed": self.objects_listed,
            "uploads_listed": self.uploads_listed,
            "gets": self.gets,
            "heads": self.heads,
            **counts,
        }


class Rebuilder(Protocol):
    """Rebuilds one kind of record from the listing; never GETs data, HEADs nothing."""

    @property
    def kind(self) -> str:
        """The kind's name in reports (``pulsar-ledgers``)."""
        ...

    def existing_records(self, rt: Runtime) -> int:
        """How many records of this kind the metadata store already holds (0: a new home)."""
        ...

    def plan(self, rt: Runtime, listing: StoreListing, select: TopicSelector) -> object:
        """What the store says, decided from keys (and the rare body of a hashed name);
        writes nothing. The value is this rebuilder's own, handed back to :meth:`apply`."""
        ...

    def items(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        """The plan as report items (what a dry run prints; with ``merge``, records already
        there are compared, read only)."""
        ...

    def apply(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        """Write the plan into the metadata store; the items as done."""
        ...
