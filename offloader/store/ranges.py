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
failure (retried here) and any other ``StoreError`` for the rest (not retried). A body may
also have ``readinto(view) -> int`` (S3's writes the socket's bytes straight into ``view``):
:meth:`ResumingRangeReader.readinto` and :func:`read_into` use it, with the same retries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from offloader.errors import StoreError, StoreUnavailable
from offloader.logs import get_logger

__all__ = ["Body", "Opener", "ResumingRangeReader", "WrappedRangeReader", "read_into"]

log = get_logger(__name__)

_Got = TypeVar("_Got", bytes, int)


class Body(Protocol):
    def read(self, n: int) -> bytes: ...

    def close(self) -> None: ...


Opener = Callable[[int], tuple[Body, int]]


def read_into(reader: Any, view: memoryview) -> int:
    """Up to ``len(view)`` bytes of a :class:`~offloader.store.base.RangeReader` into
    ``view`` (0 once its range is consumed): through its ``readinto`` when it has one (the S3
    reader's goes from the socket to ``view``), else :meth:`read` and a copy."""
    readinto = getattr(reader, "readinto", None)
    if readinto is not None:
        return int(readinto(view))
    data: bytes = reader.read(len(view))
    if len(data) > len(view):
        raise StoreError(f"a ranged read asked for {len(view)} bytes, got {len(data)}")
    view[: len(data)] = data
    return len(data)


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
        data = self._retrying(lambda body: body.read(n), n)
        self._pos += len(data)
        return data

    def readinto(self, view: memoryview) -> int:
        """Like :meth:`read` into ``view`` (up to its length; 0 once the range is consumed):
        with a body that has ``readinto``, no bytes object between the socket and ``view``."""
        n = min(len(view), self._end - self._pos)
        if n <= 0:
            return 0
        target = view[:n]

        def fill(body: Body) -> int:
            readinto = getattr(body, "readinto", None)
            if readinto is not None:
                return int(readinto(target))
            data = body.read(n)
            if len(data) > n:  # checked before the copy: never write past the range
                raise StoreError(f"{self._what}: asked for {n} bytes, got {len(data)}")
            target[: len(data)] = data
            return len(data)

        got = self._retrying(fill, n)
        self._pos += got
        return got

    def _retrying(self, attempt: Callable[[Body], _Got], n: int) -> _Got:
        """``attempt(body)`` (bytes, or a count of bytes written), the body reopened from the
        current position after a transport failure, at most ``attempts`` times in a row."""
        failures = 0
        while True:
            try:
                body = self._body
                if body is None:
                    body = self._reopen()
                got = attempt(body)
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
            size = got if isinstance(got, int) else len(got)
            if size > n:  # a body must not give more than asked: never pass extra bytes
                raise StoreError(f"{self._what}: asked for {n} bytes, got {size}")
            return got

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
