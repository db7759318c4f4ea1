"""Streamed ranged reads that survive a dropped connection (:class:`ResumingRangeReader`).

A long sequential read (a whole block, a whole ledger) is one ranged GET whose body is read
as it arrives: it pays S3's per-request cost once instead of once per buffer. Its weak point
is that one dropped connection in the middle of hundreds of megabytes would fail the whole
read. :class:`ResumingRangeReader` reopens the range from the first byte not yet returned,
at most ``attempts`` times in a row (a read that returns bytes resets the count), so every
failure mode is bounded.

Backends supply an *opener*: ``opener(offset) -> (body, object size)`` makes the request for
``[offset, end)`` (translating its SDK's errors, and pinning the object's version, such as an
S3 ``If-Match`` on the first answer's ETag, so a replaced object is never spliced into the
bytes already returned). ``body.read(n)`` raises :class:`StoreUnavailable` for a transport
failure (retried here) and any other ``StoreError`` for the rest (not retried).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from offloader.errors import StoreError, StoreUnavailable
from offloader.logs import get_logger

__all__ = ["Body", "Opener", "ResumingRangeReader", "WrappedRangeReader"]

log = get_logger(__name__)

_T = TypeVar("_T")


class Body(Protocol):
    def read(self, n: int) -> bytes: ...

    def close(self) -> None: ...


Opener = Callable[[int], tuple[Body, int]]


class WrappedRangeReader:
    """A :class:`~offloader.store.base.RangeReader` that hands each read to ``read_via``
    (store wrappers that count or fail reads); size and close are the inner reader's."""

    def __init__(self, inner: RangeReaderLike, read_via: Callable[[int], bytes]) -> None:
        self._inner = inner
        self.read: Callable[[int], bytes] = read_via

    @property
    def size(self) -> int:
        return self._inner.size

    @property
    def metadata(self) -> Mapping[str, str]:
        return self._inner.metadata

    def close(self) -> None:
        self._inner.close()


class RangeReaderLike(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def metadata(self) -> Mapping[str, str]: ...

    def close(self) -> None: ...


class ResumingRangeReader:
    """A :class:`~offloader.store.base.RangeReader` over bytes ``[start, end)`` (clipped at
    the object's end), reopened from its position after a transport failure."""

    def __init__(
        self,
        opener: Opener,
        start: int,
        end: int,
        *,
        attempts: int,
        what: str,
        metadata: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """``metadata``: the object's user metadata, once ``opener`` has answered."""
        self._opener = opener
        self._attempts = max(1, attempts)
        self._what = what
        body, size = opener(start)
        self._body: Body | None = body
        self._size = size
        self._pos = start
        self._end = min(end, size)
        self._metadata: Mapping[str, str] = metadata() if metadata is not None else {}

    @property
    def size(self) -> int:
        return self._size

    @property
    def metadata(self) -> Mapping[str, str]:
        return self._metadata

    @property
    def position(self) -> int:
        """Object offset of the next byte :meth:`read` returns."""
        return self._pos

    def read(self, n: int) -> bytes:
        if n <= 0 or self._pos >= self._end:
            return b""
        n = min(n, self._end - self._pos)

        def take(body: Body) -> tuple[bytes, int]:
            data = body.read(n)
            if len(data) > n:  # a body must not give more than asked: never pass extra bytes
                raise StoreError(f"{self._what}: asked for {n} bytes, got {len(data)}")
            return data, len(data)

        return self._resuming(take)

    def readinto(self, buf: memoryview) -> int:
        """Like :meth:`read`, into ``buf`` (up to ``len(buf)`` bytes; 0 once the range is
        consumed): the body's own ``readinto`` when it has one (no copy), else its ``read``
        and one copy. The same resumption after a transport failure."""
        if not len(buf) or self._pos >= self._end:
            return 0
        n = min(len(buf), self._end - self._pos)
        target = buf[:n]

        def fill(body: Body) -> tuple[int, int]:
            into = getattr(body, "readinto", None)
            if into is not None:
                got = int(into(target))
                return got, got
            data = body.read(n)
            if len(data) > n:
                raise StoreError(f"{self._what}: asked for {n} bytes, got {len(data)}")
            target[: len(data)] = data
            return len(data), len(data)

        return self._resuming(fill)

    def _resuming(self, step: Callable[[Body], tuple[_T, int]]) -> _T:
        """``step(body)`` -> (its result, bytes it consumed), on the open body or a reopened
        one: a transport failure (:class:`StoreUnavailable`, or a body that ends early) drops
        the body and resumes from the first byte not yet returned, at most ``attempts`` times
        in a row."""
        failures = 0
        while True:
            try:
                body = self._body
                if body is None:
                    body = self._reopen()
                result, got = step(body)
                if not got:
                    raise StoreUnavailable(
                        f"{self._what}: the body ended at offset {self._pos}, before {self._end}"
                    )
            except StoreUnavailable as exc:
                self._drop_body()
                failures += 1
                if failures >= self._attempts:
                    raise StoreUnavailable(
                        f"{exc} (gave up after {failures} attempts at offset {self._pos})"
                    ) from exc
                log.debug(
                    "ranged read interrupted, resuming",
                    what=self._what,
                    offset=self._pos,
                    attempt=failures,
                    error=str(exc),
                )
                continue
            self._pos += got
            return result

    def _reopen(self) -> Body:
        body, size = self._opener(self._pos)
        if size != self._size:
            body.close()
            raise StoreError(
                f"{self._what}: the object changed while being read ({self._size} bytes, "
                f"now {size})"
            )
        self._body = body
        return body

    def _drop_body(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            with contextlib.suppress(StoreError):
                body.close()

    def close(self) -> None:
        self._drop_body()
        self._pos = self._end
