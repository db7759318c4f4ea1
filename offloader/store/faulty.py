"""FaultyObjectStore: an ObjectStore wrapper that counts calls and fails chosen ones (tests).

It forwards every call to an inner store, counts calls per method (``store.calls["get_range"]``)
and records them in order (``store.history``), and, following a :class:`FaultPlan`, makes
chosen calls fail or slow down::

    plan = FaultPlan().fail("upload_part", StoreUnavailable("injected timeout"), on_call=3)
    store = FaultyObjectStore(LocalObjectStore(tmp), plan)

A fault matches by method, by call number (1-based, per method) and optionally by a predicate
on the call's arguments (``match=lambda a: a["part_number"] == 2``). It fails the call before
it reaches the inner store, or with ``after=True`` once the inner call has succeeded (the
"request done, answer lost" case). ``delay`` sleeps before the call (a slow store). With no
faults the wrapper is a plain call counter.
"""

from __future__ import annotations

import builtins
import inspect
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from offloader.store.base import (
    Buffer,
    GetResult,
    MultipartUploadInfo,
    ObjectInfo,
    ObjectStore,
    RangeReader,
    UploadedPart,
)
from offloader.store.ranges import WrappedRangeReader

__all__ = ["METHODS", "Call", "Fault", "FaultPlan", "FaultyObjectStore"]

#: the ObjectStore methods a fault can target (the properties are never counted);
#: ``put_parts`` is the optional one-request upload of GCS and Azure, which this wrapper does
#: not forward (a test subclass that forwards it can target it)
METHODS = frozenset(
    {
        "create_multipart_upload",
        "upload_part",
        "complete_multipart_upload",
        "abort_multipart_upload",
        "list_multipart_uploads",
        "put",
        "put_parts",
        "get",
        "get_range",
        "open_range",
        "range_read",
        "head",
        "delete",
        "list",
        "close",
    }
)

ErrorSpec = BaseException | Callable[[], BaseException] | None


@dataclass
class Fault:
    """Fail (or delay) calls of ``method``.

    ``on_call``: which calls (1-based, counted per method), an int, several, or None for every
    call. ``match``: a predicate on the call's arguments by name (``key``, ``part_number``...).
    ``error``: the exception to raise, or a factory returning one (a fresh exception per
    firing); None only delays. ``after``: run the inner call first, then raise. ``times``: stop
    after firing this many times (None: no limit). ``delay``: seconds to sleep first.
    """

    method: str
    error: ErrorSpec = None
    on_call: int | Iterable[int] | None = None
    match: Callable[[Mapping[str, Any]], bool] | None = None
    after: bool = False
    delay: float = 0.0
    times: int | None = None
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown ObjectStore method {self.method!r}")
        if self.error is None and self.delay <= 0:
            raise ValueError("a fault needs an error or a delay")
        if self.on_call is not None and not isinstance(self.on_call, int):
            self.on_call = frozenset(self.on_call)

    def matches(self, method: str, number: int, args: Mapping[str, Any]) -> bool:
        if method != self.method or (self.times is not None and self.fired >= self.times):
            return False
        if isinstance(self.on_call, int) and number != self.on_call:
            return False
        if isinstance(self.on_call, frozenset) and number not in self.on_call:
            return False
        return self.match is None or bool(self.match(args))

    def make_error(self) -> BaseException | None:
        if self.error is None or isinstance(self.error, BaseException):
            return self.error
        return self.error()


class FaultPlan:
    """An ordered list of :class:`Fault`; the first matching fault applies to a call."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults: builtins.list[Fault] = builtins.list(faults)

    def fail(
        self,
        method: str,
        error: BaseException | Callable[[], BaseException],
        *,
        on_call: int | Iterable[int] | None = None,
        match: Callable[[Mapping[str, Any]], bool] | None = None,
        after: bool = False,
        delay: float = 0.0,
        times: int | None = None,
    ) -> FaultPlan:
        """Add a failing fault; returns the plan (chainable)."""
        self.faults.append(Fault(method, error, on_call, match, after, delay, times))
        return self

    def slow(
        self,
        method: str,
        delay: float,
        *,
        on_call: int | Iterable[int] | None = None,
        match: Callable[[Mapping[str, Any]], bool] | None = None,
        times: int | None = None,
    ) -> FaultPlan:
        """Add a delay-only fault; returns the plan (chainable)."""
        self.faults.append(Fault(method, None, on_call, match, False, delay, times))
        return self

    def find(self, method: str, number: int, args: Mapping[str, Any]) -> Fault | None:
        for fault in self.faults:
            if fault.matches(method, number, args):
                return fault
        return None


@dataclass(frozen=True)
class Call:
    """One recorded call: method, its number for that method, its key and whether it was
    faulted."""

    method: str
    number: int
    key: str | None
    faulted: bool


class FaultyObjectStore:
    """An ObjectStore that forwards to ``inner``, counting calls and injecting faults."""

    def __init__(
        self, inner: ObjectStore, faults: FaultPlan | Iterable[Fault] | None = None
    ) -> None:
        self.inner = inner
        self.plan = faults if isinstance(faults, FaultPlan) else FaultPlan(faults or ())
        self.calls: Counter[str] = Counter()
        self.history: builtins.list[Call] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def supports_conditional_put(self) -> bool:
        return self.inner.supports_conditional_put

    @property
    def faults_fired(self) -> int:
        return sum(f.fired for f in self.plan.faults)

    def reset_counts(self) -> None:
        """Forget the counts and history (faults keep their state)."""
        with self._lock:
            self.calls.clear()
            self.history.clear()

    def __repr__(self) -> str:
        return f"FaultyObjectStore({self.inner!r})"

    # --- the machinery --------------------------------------------------------------------
    def _call(
        self, method: str, *args: Any, _target: Callable[..., Any] | None = None, **kwargs: Any
    ) -> Any:
        target = getattr(self.inner, method) if _target is None else _target
        bound = inspect.signature(target).bind(*args, **kwargs)
        arguments: Mapping[str, Any] = bound.arguments
        with self._lock:
            self.calls[method] += 1
            number = self.calls[method]
            fault = self.plan.find(method, number, arguments)
            if fault is not None:
                fault.fired += 1
            key = arguments.get("key", arguments.get("prefix"))
            self.history.append(Call(method, number, key, fault is not None))
        if fault is None:
            return target(*args, **kwargs)
        if fault.delay > 0:
            time.sleep(fault.delay)
        error = fault.make_error()
        if error is not None and not fault.after:
            raise error
        result = target(*args, **kwargs)
        if error is not None:
            raise error
        return result

    # --- ObjectStore ----------------------------------------------------------------------
    def create_multipart_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        return str(self._call("create_multipart_upload", key, metadata))

    def upload_part(
        self, key: str, upload_id: str, part_number: int, data: Buffer, crc32c: int
    ) -> UploadedPart:
        result: UploadedPart = self._call("upload_part", key, upload_id, part_number, data, crc32c)
        return result

    def complete_multipart_upload(
        self, key: str, upload_id: str, parts: Sequence[UploadedPart]
    ) -> None:
        self._call("complete_multipart_upload", key, upload_id, parts)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        self._call("abort_multipart_upload", key, upload_id)

    def list_multipart_uploads(self, prefix: str = "") -> builtins.list[MultipartUploadInfo]:
        result: builtins.list[MultipartUploadInfo] = self._call("list_multipart_uploads", prefix)
        return result

    def put(
        self,
        key: str,
        data: Buffer,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
    ) -> None:
        self._call("put", key, data, metadata, if_none_match=if_none_match)

    def get(self, key: str) -> GetResult:
        result: GetResult = self._call("get", key)
        return result

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        result: GetResult = self._call("get_range", key, start, end)
        return result

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        reader: RangeReader = self._call("open_range", key, start, end)
        # reads go through the wrapper: counted as "range_read", and faultable
        return WrappedRangeReader(reader, lambda n: self.range_read(key, reader, n))

    def range_read(self, key: str, reader: RangeReader, n: int) -> bytes:
        """One ``read`` of a reader from :meth:`open_range` (faults target "range_read")."""

        def read(key: str, n: int) -> bytes:
            return reader.read(n)

        data: bytes = self._call("range_read", key, n, _target=read)
        return data

    def head(self, key: str) -> ObjectInfo:
        result: ObjectInfo = self._call("head", key)
        return result

    def delete(self, key: str) -> None:
        self._call("delete", key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Counted (and faulted) when called, not when iterated."""
        result: Iterator[ObjectInfo] = self._call("list", prefix)
        return iter(result)

    def close(self) -> None:
        self._call("close")
