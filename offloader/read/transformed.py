"""Reading a transformed data object (spec/transforms.md) as if it were the plain one.

:func:`data_view` returns, for an index whose extension carries a transform section, an
:class:`~offloader.store.base.ObjectStore` view in which the data object's key answers in
*original* coordinates: ``get_range(key, s, e)`` maps ``[s, e)`` to the chunks covering it and
fetches their stored bytes with **one** ranged GET, then decodes (CRC32C, AES-GCM, zstd) and
slices; ``open_range`` streams the stored bytes and decodes them chunk by chunk; ``head`` and
``get`` report and return the original object. Every other key and call goes to the real store.
So the ReadHandle, block fetches (Spark, verification) and everything built on them read
transformed objects without knowing about chunks; a plain object gets the store itself back.

The data key is unwrapped once per view with the key ring named by the settings
(``MissingKeyError`` naming the key id, ``WrongKeyError``). An optional process-wide cache of
decoded chunks (``OffloadSettings.chunk_cache_bytes``, off by default) serves repeated reads of
hot chunks without a GET.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from formats.index import OffloadIndex
from formats.keys import FORMAT_VERSION, FORMAT_VERSION_KEY, data_key, parse_key
from formats.transform import (
    CHUNKED_FORMAT_VERSION,
    ChunkDecoder,
    ChunkMap,
    ObjectIdentity,
    TransformSection,
    transform_of,
    unwrap_data_key,
)
from offloader.errors import IndexInconsistentError, InvalidKeyError, StoreError
from offloader.keyring import KeyRing, ring_path
from offloader.store.base import Buffer, GetResult, ObjectInfo, ObjectStore, RangeReader


class ChunkCache:
    """A bounded LRU of decoded chunks, keyed by (data key, chunk index), shared by threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._size = 0
        self.hits = 0

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                self.hits += 1
            return data

    def put(self, key: tuple[str, int], data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._size -= len(old) if old is not None else 0
            self._items[key] = data
            self._size += len(data)
            while self._size > self.max_bytes:
                _k, dropped = self._items.popitem(last=False)
                self._size -= len(dropped)


_CACHES: dict[int, ChunkCache] = {}
_CACHES_LOCK = threading.Lock()


def shared_chunk_cache(max_bytes: int) -> ChunkCache | None:
    """The process's cache of that size (None when ``max_bytes`` is 0)."""
    if max_bytes <= 0:
        return None
    with _CACHES_LOCK:
        return _CACHES.setdefault(max_bytes, ChunkCache(max_bytes))


def data_key_of(section: TransformSection, key_ring: str | None) -> bytes | None:
    """The object's data key, unwrapped with its key from the ring (None when unencrypted)."""
    if not section.encrypted:
        return None
    kek = KeyRing(ring_path(key_ring)).key(section.key_id)
    return unwrap_data_key(kek, section.wrapped_key, section.key_id)


def data_view(
    store: ObjectStore,
    index: OffloadIndex,
    ledger_id: int,
    uuid: str,
    *,
    key_ring: str | None = None,
    cache_bytes: int = 0,
) -> ObjectStore:
    """``store`` itself for a plain object; a :class:`TransformedObjectView` otherwise."""
    section = transform_of(index.extension, index.data_object_length)
    if section is None:
        return store
    return section_view(store, section, ledger_id, uuid, key_ring=key_ring, cache_bytes=cache_bytes)


def section_view(
    store: ObjectStore,
    section: TransformSection,
    ledger_id: int,
    uuid: str,
    *,
    key_ring: str | None = None,
    cache_bytes: int = 0,
) -> TransformedObjectView:
    """The view of one transformed data object whose transform section is known (a Spark
    task carries it from the driver, so executors need no index GET)."""
    return TransformedObjectView(
        store,
        data_key(uuid, ledger_id),
        ChunkDecoder(
            ChunkMap(section),
            ObjectIdentity(uuid, ledger_id),
            data_key_of(section, key_ring),
        ),
        shared_chunk_cache(cache_bytes),
    )


def decode_whole_object(
    section: TransformSection, stored: bytes, uuid: str, ledger_id: int, key_ring: str | None
) -> bytes:
    """The original data object from a whole stored one (``objects inspect`` of files)."""
    if len(stored) != section.stored_size:
        raise IndexInconsistentError(
            f"stored data object is {len(stored)} bytes, its chunk table says {section.stored_size}"
        )
    decoder = ChunkDecoder(
        ChunkMap(section), ObjectIdentity(uuid, ledger_id), data_key_of(section, key_ring)
    )
    return b"".join(decoder.decode_run(0, stored))


def decode_named_object(
    index: OffloadIndex, stored: bytes, data_object_name: str, key_ring: str | None
) -> bytes | None:
    """None for a plain object; else the original data object, its identity taken from its
    stored name ``<uuid>-ledger-<id>`` (the chunks are bound to it)."""
    section = transform_of(index.extension, index.data_object_length)
    if section is None:
        return None
    try:
        key = parse_key(data_object_name)
    except InvalidKeyError:
        raise InvalidKeyError(
            f"{data_object_name!r}: a transformed data object must keep its stored name "
            "<uuid>-ledger-<id> (the chunks are bound to it)"
        ) from None
    return decode_whole_object(section, stored, key.uuid, key.ledger_id, key_ring)


class TransformedObjectView:
    """An ObjectStore in which ``key`` (a transformed data object) reads as the original."""

    def __init__(
        self, store: ObjectStore, key: str, decoder: ChunkDecoder, cache: ChunkCache | None
    ) -> None:
        self._store = store
        self._key = key
        self._decoder = decoder
        self._map = decoder.map
        self._cache = cache
        self.stored_gets = 0

    def __getattr__(self, name: str) -> Any:  # every other call: the real store
        return getattr(self._store, name)

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def supports_conditional_put(self) -> bool:
        return self._store.supports_conditional_put

    def _check_stored_size(self, size: int) -> None:
        if size != self._map.stored_size:
            raise IndexInconsistentError(
                f"{self._key}: the stored object is {size} bytes, its chunk table says "
                f"{self._map.stored_size}"
            )

    def _cached(self, first: int, last: int) -> list[bytes] | None:
        if self._cache is None:
            return None
        chunks = []
        for i in range(first, last + 1):
            data = self._cache.get((self._key, i))
            if data is None:
                return None
            chunks.append(data)
        return chunks

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        if key != self._key:
            return self._store.get_range(key, start, end)
        if start >= self._map.original_size or end <= start:
            raise StoreError(
                f"range [{start}, {end}) of {key} is outside its {self._map.original_size} bytes"
            )
        span = self._map.span(start, end)
        chunks = self._cached(span.first, span.last)
        # chunks from the cache were decoded from a GET of this key whose response passed the
        # reader's version check: they read as the Pulsar-format bytes they decode to
        metadata: Mapping[str, str] = {FORMAT_VERSION_KEY: CHUNKED_FORMAT_VERSION}
        if chunks is None:
            result = self._store.get_range(key, span.stored_start, span.stored_end)
            self.stored_gets += 1
            self._check_stored_size(result.size)
            metadata = result.metadata
            chunks = self._decoder.decode_run(span.first, result.data)
            if self._cache is not None:
                for i, data in enumerate(chunks, span.first):
                    self._cache.put((key, i), data)
        plain = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        lo = start - span.original_start
        return GetResult(plain[lo : lo + min(end, self._map.original_size) - start],
                         self._map.original_size, decoded_metadata(metadata))  # fmt: skip

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if key != self._key:
            return self._store.open_range(key, start, end)
        if start >= self._map.original_size or end <= start:
            raise StoreError(
                f"range [{start}, {end}) of {key} is outside its {self._map.original_size} bytes"
            )
        end = min(end, self._map.original_size)
        span = self._map.span(start, end)
        reader = self._store.open_range(key, span.stored_start, span.stored_end)
        self.stored_gets += 1
        try:
            self._check_stored_size(reader.size)
        except BaseException:
            reader.close()
            raise
        return _DecodingReader(reader, self._decoder, span.first, span.original_start, start, end)

    def head(self, key: str) -> ObjectInfo:
        info = self._store.head(key)
        if key != self._key:
            return info
        self._check_stored_size(info.size)
        return ObjectInfo(
            key,
            self._map.original_size,
            decoded_metadata(info.metadata),
            info.last_modified,
            info.etag,
        )

    def get(self, key: str) -> GetResult:
        if key != self._key:
            return self._store.get(key)
        return self.get_range(key, 0, self._map.original_size)

    def put(self, key: str, data: Buffer, metadata: Mapping[str, str], **kw: Any) -> None:
        self._store.put(key, data, metadata, **kw)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._store.list(prefix)

    def close(self) -> None:  # the view does not own the store
        pass


def decoded_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """User metadata of a transformed data object as seen through its decoding view."""
    out = dict(metadata)
    for key, value in metadata.items():
        if key.lower() == FORMAT_VERSION_KEY and value == CHUNKED_FORMAT_VERSION:
            out[key] = FORMAT_VERSION
    return out


class _DecodingReader:
    """Original bytes ``[start, end)`` from a stream of stored chunks, one chunk at a time."""

    def __init__(
        self,
        reader: RangeReader,
        decoder: ChunkDecoder,
        first: int,
        origin: int,
        start: int,
        end: int,
    ) -> None:
        self._reader = reader
        self._decoder = decoder
        self._next = first
        self._pos = origin  # original offset of the next chunk
        self._start, self._end = start, end
        self._size = decoder.map.original_size
        self._pending = b""

    @property
    def size(self) -> int:
        return self._size

    @property
    def metadata(self) -> Mapping[str, str]:
        """The stored object's user metadata, as the decoded view: a chunked object's format
        version reads as Pulsar's ``1`` (its original bytes are a Pulsar data object); any other
        version is passed through, so the reader's version check refuses it."""
        return decoded_metadata(self._reader.metadata)

    def _read_exactly(self, n: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < n:
            data = self._reader.read(n - got)
            if not data:
                raise IndexInconsistentError(
                    f"stored object ended inside chunk {self._next} ({got} of {n} bytes)"
                )
            parts.append(data)
            got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read(self, n: int) -> bytes:
        while not self._pending and self._pos < self._end:
            rows: Sequence[Any] = self._decoder.map.section.chunks
            stored = self._read_exactly(rows[self._next].stored_len)
            plain = self._decoder.decode_chunk(self._next, stored)
            lo = max(self._start - self._pos, 0)
            hi = min(self._end - self._pos, len(plain))
            self._pos += len(plain)
            self._next += 1
            self._pending = plain[lo:hi]
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    def close(self) -> None:
        self._reader.close()
