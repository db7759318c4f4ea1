"""Pulsar's ``ManagedLedgerInfo``: the value of a topic's node in the cluster's metadata store.

A managed ledger (one topic, or one partition of a partitioned topic) keeps its list of
ledgers in one node, ``/managed-ledgers/<tenant>/<namespace>/persistent/<encoded local name>``.
The value is the proto2 message of Pulsar's ``MLDataFormats.proto``, decoded here by hand over
:mod:`formats.protowire` (field numbers below; no generated code):

- ``ManagedLedgerInfo``: ``ledgerInfo`` (1, repeated ``LedgerInfo``), ``terminatedPosition`` (2,
  ``NestedPositionInfo {ledgerId 1, entryId 2}``), ``properties`` (3, repeated ``KeyValue``).
- ``LedgerInfo``: ``ledgerId`` (1, required), ``entries`` (2), ``size`` (3), ``timestamp`` (4),
  ``offloadContext`` (5), ``properties`` (6, repeated ``KeyValue``).
- ``OffloadContext``: ``uidMsb`` (1), ``uidLsb`` (2), ``complete`` (3), ``bookkeeperDeleted``
  (4), ``timestamp`` (5), ``driverMetadata`` (6), ``offloadSegment`` (7, repeated).
- ``OffloadSegment``: ``uidMsb`` (1), ``uidLsb`` (2), ``complete`` (3), ``assignedTimestamp``
  (4), ``offloadedTimestamp`` (5), ``endEntryId`` (6), ``driverMetadata`` (7).
- ``OffloadDriverMetadata``: ``name`` (1, required), ``properties`` (2, repeated ``KeyValue``
  ``{key 1, value 2}``): the ``bucket``, ``region`` and ``endpoint`` the broker offloaded to.

The value may be compressed (the broker's ``managedLedgerInfoCompressionType``): the 2-byte
big-endian magic ``0x4778``, a 4-byte big-endian length, that many bytes of
``ManagedLedgerInfoMetadata {compressionType 1, uncompressedSize 2}``, then the message
compressed with one of Pulsar's codecs (:mod:`formats.pulsar.compression`). A plain message
can never start with the magic (``0x47`` is field 8 of wire type 7, which does not exist), so
the header is recognised without guessing. Old clusters wrote the message in protobuf's text
format; as Pulsar does, a value that is not binary protobuf is read as text before it is
refused. Every refusal is a :class:`~formats.errors.ManagedLedgerInfoError`.

:func:`ledger_refs` gives only what an orphan audit needs of a value (per ledger: its id, its
offload's UUID, complete or not, the offload segments' UUIDs) as plain tuples, without building
the dataclasses: equal to :func:`ledger_refs_of` of :func:`decode_managed_ledger_info`, with the
same errors.

:func:`encode_managed_ledger_info` writes a value as a broker does (fields in number order,
optionally compressed): the test fixtures write nodes with it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from formats.errors import ManagedLedgerInfoError, ProtobufError
from formats.protowire import (
    LENGTH_DELIMITED,
    VARINT,
    field_bytes,
    field_varint,
    iter_fields,
    to_signed32,
    to_signed64,
)
from formats.pulsar import compression
from formats.pulsar.errors import PulsarMessageError
from formats.pulsar.speedups import C_MODULE

#: the C twin of the binary decoder, or None (not built, or LEDGER_OFFLOADER_PURE_PYTHON)
_C_VALUES = getattr(C_MODULE, "managed_ledger_info_values", None)

#: the first two bytes of a compressed value (Pulsar's ``MetaStoreImpl``)
COMPRESSED_MAGIC = 0x4778
#: the largest value decompressed (a ZooKeeper node holds 1 MiB by default; brokers can raise it)
DEFAULT_LIMIT = 256 << 20
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class DriverMetadata:
    """Which offloader wrote the objects, and where (``bucket``, ``region``, and the endpoint:
    ``serviceEndpoint`` as Pulsar's tiered-storage configuration records it, ``endpoint`` in
    older brokers' records)."""

    name: str
    properties: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        for k, v in self.properties:
            if k == key:
                return v
        return None

    @property
    def bucket(self) -> str | None:
        return self.get("bucket")

    @property
    def region(self) -> str | None:
        return self.get("region")

    @property
    def endpoint(self) -> str | None:
        return self.get("serviceEndpoint") or self.get("endpoint")


def java_uuid(msb: int, lsb: int) -> str:
    """The string of Java's ``new UUID(msb, lsb)`` (both signed 64-bit)."""
    h = f"{msb & _MASK64:016x}{lsb & _MASK64:016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid_halves(text: str) -> tuple[int, int]:
    """``(msb, lsb)`` as signed 64-bit ints, the inverse of :func:`java_uuid`."""
    value = uuid.UUID(text).int
    return to_signed64(value >> 64), to_signed64(value & _MASK64)


@dataclass(frozen=True)
class OffloadSegment:
    """One segment of a streaming offload (Pulsar's ``OffloadSegment``)."""

    uid_msb: int | None = None
    uid_lsb: int | None = None
    complete: bool = False
    assigned_timestamp: int | None = None
    offloaded_timestamp: int | None = None
    end_entry_id: int | None = None
    driver_metadata: DriverMetadata | None = None

    @property
    def uuid(self) -> str | None:
        if self.uid_msb is None and self.uid_lsb is None:
            return None
        return java_uuid(self.uid_msb or 0, self.uid_lsb or 0)


@dataclass(frozen=True)
class OffloadContext:
    """A ledger's offload state: the UUID of its (last) attempt, complete, deleted from
    BookKeeper, when, and by which driver."""

    uid_msb: int | None = None
    uid_lsb: int | None = None
    complete: bool = False
    bookkeeper_deleted: bool = False
    timestamp: int | None = None
    driver_metadata: DriverMetadata | None = None
    segments: tuple[OffloadSegment, ...] = ()

    @property
    def uuid(self) -> str | None:
        """The attempt's UUID as Java prints it (None when the context holds none)."""
        if self.uid_msb is None and self.uid_lsb is None:
            return None
        return java_uuid(self.uid_msb or 0, self.uid_lsb or 0)


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of a managed ledger, in the order the managed ledger lists it."""

    ledger_id: int
    entries: int | None = None
    size: int | None = None
    timestamp: int | None = None
    offload_context: OffloadContext | None = None
    properties: tuple[tuple[str, str], ...] = ()

    @property
    def offloaded(self) -> bool:
        """Pulsar considers this ledger's offload complete (its objects are readable)."""
        return self.offload_context is not None and self.offload_context.complete

    @property
    def bookkeeper_deleted(self) -> bool:
        return self.offload_context is not None and self.offload_context.bookkeeper_deleted

    @property
    def uuid(self) -> str | None:
        return None if self.offload_context is None else self.offload_context.uuid


@dataclass(frozen=True)
class ManagedLedgerInfo:
    """A managed ledger's node value: its ledgers, the terminated position, its properties."""

    ledgers: tuple[LedgerInfo, ...] = ()
    terminated_position: tuple[int, int] | None = None
    properties: tuple[tuple[str, str], ...] = ()

    @property
    def terminated(self) -> bool:
        return self.terminated_position is not None


# --- decoding ---------------------------------------------------------------------------------


def decode_managed_ledger_info(
    data: bytes | bytearray | memoryview, *, limit: int = DEFAULT_LIMIT
) -> ManagedLedgerInfo:
    """The ``ManagedLedgerInfo`` a node's value holds: compressed, binary or (old) text.

    The binary message is decoded by the C twin (``managed_ledger_info_values`` in
    ``formats/_pulsar_mlinfo.h``) when it is built; on any error there, and for the text
    format, :func:`decode_managed_ledger_info_pure` decides (and names what is at fault)."""
    if _C_VALUES is not None:
        try:
            return _decode_fast(data, limit)
        except Exception:  # the pure twin decides, with its typed error
            pass
    return decode_managed_ledger_info_pure(data, limit=limit)


def _decode_fast(data: bytes | bytearray | memoryview, limit: int) -> ManagedLedgerInfo:
    assert _C_VALUES is not None
    body: bytes | bytearray | memoryview = data
    if len(data) >= 2 and data[0] == 0x47 and data[1] == 0x78:
        body = _decompressed(memoryview(data), limit)
    ledgers, terminated, props = _C_VALUES(body)
    return ManagedLedgerInfo(
        tuple(
            LedgerInfo(lid, entries, size, ts, None if ctx is None else _context(ctx), lprops)
            for lid, entries, size, ts, ctx, lprops in ledgers
        ),
        terminated,
        props,
    )


#: what an orphan audit needs of one ledger: ``(ledger id, its offload context's UUID or None,
#: complete, the UUIDs of the context's offload segments)``; a ledger with no offload context
#: is ``(id, None, False, ())``
LedgerRef = tuple[int, str | None, bool, tuple[str, ...]]


def ledger_refs(
    data: bytes | bytearray | memoryview, *, limit: int = DEFAULT_LIMIT
) -> list[LedgerRef]:
    """Each ledger of the ``ManagedLedgerInfo`` in ``data`` as a :data:`LedgerRef`, in order:
    ``ledger_refs_of(decode_managed_ledger_info(data))`` (the same values, the same errors),
    straight from the C twin's tuples when it is built."""
    if _C_VALUES is not None:
        try:
            return _refs_fast(data, limit)
        except Exception:  # the pure twin decides, with its typed error
            pass
    return ledger_refs_of(decode_managed_ledger_info_pure(data, limit=limit))


def ledger_refs_of(info: ManagedLedgerInfo) -> list[LedgerRef]:
    """:func:`ledger_refs` of a decoded value."""
    out: list[LedgerRef] = []
    for li in info.ledgers:
        c = li.offload_context
        if c is None:
            out.append((li.ledger_id, None, False, ()))
            continue
        segments = tuple(u for u in (s.uuid for s in c.segments) if u is not None)
        out.append((li.ledger_id, c.uuid, c.complete, segments))
    return out


def _refs_fast(data: bytes | bytearray | memoryview, limit: int) -> list[LedgerRef]:
    assert _C_VALUES is not None
    body: bytes | bytearray | memoryview = data
    if len(data) >= 2 and data[0] == 0x47 and data[1] == 0x78:
        body = _decompressed(memoryview(data), limit)
    out: list[LedgerRef] = []
    for lid, _entries, _size, _ts, ctx, _props in _C_VALUES(body)[0]:
        if ctx is None:
            out.append((lid, None, False, ()))
            continue
        msb, lsb, complete, _deleted, _when, driver, segments = ctx
        if driver is not None:
            _driver_of(driver)  # checked as the full decode checks it (cached by its bytes)
        uid = None if msb is None and lsb is None else java_uuid(msb or 0, lsb or 0)
        seg_uuids: tuple[str, ...] = ()
        if segments:
            for s in segments:
                if s[6] is not None:
                    _driver_of(s[6])
            seg_uuids = tuple(
                java_uuid(s[0] or 0, s[1] or 0)
                for s in segments
                if s[0] is not None or s[1] is not None
            )
        out.append((lid, uid, complete, seg_uuids))
    return out


def _context(values: tuple[Any, ...]) -> OffloadContext:
    msb, lsb, complete, deleted, ts, driver, segments = values
    return OffloadContext(
        msb,
        lsb,
        complete,
        deleted,
        ts,
        None if driver is None else _driver_of(driver),
        tuple(_segment_of(*s) for s in segments),
    )


def _segment_of(
    msb: Any, lsb: Any, complete: Any, assigned: Any, offloaded: Any, end: Any, driver: Any
) -> OffloadSegment:
    return OffloadSegment(
        msb, lsb, complete, assigned, offloaded, end, None if driver is None else _driver_of(driver)
    )


def decode_managed_ledger_info_pure(
    data: bytes | bytearray | memoryview, *, limit: int = DEFAULT_LIMIT
) -> ManagedLedgerInfo:
    """The pure-Python twin of :func:`decode_managed_ledger_info` (same results)."""
    buf = memoryview(data)
    if len(buf) >= 2 and int.from_bytes(buf[:2], "big") == COMPRESSED_MAGIC:
        try:
            body = _decompressed(buf, limit)
        except ManagedLedgerInfoError:
            raise
        except ProtobufError as exc:
            raise ManagedLedgerInfoError(f"compressed ManagedLedgerInfo: {exc}") from None
        return _decode_binary(memoryview(body))
    try:
        return _decode_binary(buf)
    except ManagedLedgerInfoError as binary_error:
        text = _as_text(buf)
        if text is None:
            raise
        try:
            return _decode_binary(memoryview(text_to_wire(text)))
        except ManagedLedgerInfoError:
            raise binary_error from None


def _decompressed(buf: memoryview, limit: int) -> bytes:
    if len(buf) < 6:
        raise ManagedLedgerInfoError(
            f"compressed ManagedLedgerInfo header truncated: {len(buf)} bytes, 6 needed"
        )
    meta_len = int.from_bytes(buf[2:6], "big")
    if meta_len > len(buf) - 6:
        raise ManagedLedgerInfoError(
            f"compressed ManagedLedgerInfo: metadata of {meta_len} bytes overruns the "
            f"{len(buf)}-byte value",
            offset=2,
        )
    codec: int | None = None
    size: int | None = None
    for number, wire, value, _ in _fields(buf[6 : 6 + meta_len], 6):
        if number == 1:
            codec = _varint(value, wire, "compressionType")
        elif number == 2:
            size = to_signed32(_varint(value, wire, "uncompressedSize"))
    if codec is None or size is None:
        missing = "compressionType" if codec is None else "uncompressedSize"
        raise ManagedLedgerInfoError(
            f"compressed ManagedLedgerInfo: ManagedLedgerInfoMetadata lacks {missing}", offset=6
        )
    if codec not in compression.CODEC_NAMES:
        raise ManagedLedgerInfoError(
            f"compressed ManagedLedgerInfo: unknown compressionType {codec}", offset=6
        )
    payload = bytes(buf[6 + meta_len :])
    if codec == compression.NONE:
        return payload
    try:
        return compression.decompress(codec, payload, size, limit=limit)
    except PulsarMessageError as exc:
        raise ManagedLedgerInfoError(
            f"compressed ManagedLedgerInfo: {exc}", offset=6 + meta_len
        ) from None


# protowire's errors become ManagedLedgerInfoError once, in _decode_binary
_fields = iter_fields


def _varint(value: int | memoryview, wire: int, name: str) -> int:
    if wire != VARINT or not isinstance(value, int):
        raise ManagedLedgerInfoError(f"not a ManagedLedgerInfo: field {name} is not a varint")
    return value


def _int64(value: int | memoryview, wire: int, name: str) -> int:
    return to_signed64(_varint(value, wire, name))


def _message(value: int | memoryview, wire: int, name: str) -> memoryview:
    if wire != LENGTH_DELIMITED or not isinstance(value, memoryview):
        raise ManagedLedgerInfoError(
            f"not a ManagedLedgerInfo: field {name} is not length-delimited"
        )
    return value


def _string(value: int | memoryview, wire: int, name: str) -> str:
    raw = _message(value, wire, name)
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ManagedLedgerInfoError(
            f"not a ManagedLedgerInfo: field {name} is not UTF-8"
        ) from None


def _key_value(buf: memoryview, base: int, name: str) -> tuple[str, str]:
    key = val = None
    for number, wire, value, _ in _fields(buf, base):
        if number == 1:
            key = _string(value, wire, f"{name}.key")
        elif number == 2:
            val = _string(value, wire, f"{name}.value")
    if key is None or val is None:
        raise ManagedLedgerInfoError(
            f"not a ManagedLedgerInfo: {name} lacks its {'key' if key is None else 'value'}",
            offset=base,
        )
    return key, val


#: driver metadata decoded, by its bytes: every ledger a broker offloaded names the same driver,
#: bucket, region and endpoint, so a managed ledger's (and a cluster's) values repeat one value
_DRIVERS: dict[bytes, DriverMetadata] = {}
_DRIVER_CACHE_SIZE = 256


def _driver(buf: memoryview, base: int) -> DriverMetadata:
    raw = bytes(buf)
    cached = _DRIVERS.get(raw)
    if cached is not None:
        return cached
    driver = _decode_driver(buf, base)
    if len(_DRIVERS) >= _DRIVER_CACHE_SIZE:
        _DRIVERS.clear()
    _DRIVERS[raw] = driver
    return driver


def _driver_of(raw: bytes) -> DriverMetadata:
    cached = _DRIVERS.get(raw)
    return cached if cached is not None else _driver(memoryview(raw), 0)


def _decode_driver(buf: memoryview, base: int) -> DriverMetadata:
    name: str | None = None
    props: list[tuple[str, str]] = []
    for number, wire, value, offset in _fields(buf, base):
        if number == 1:
            name = _string(value, wire, "driverMetadata.name")
        elif number == 2:
            props.append(
                _key_value(_message(value, wire, "driverMetadata.properties"), offset, "property")
            )
    if name is None:
        raise ManagedLedgerInfoError(
            "not a ManagedLedgerInfo: driverMetadata lacks its name", offset=base
        )
    return DriverMetadata(name, tuple(props))


def _segment(buf: memoryview, base: int) -> OffloadSegment:
    got: dict[str, object] = {}
    for number, wire, value, offset in _fields(buf, base):
        if number == 1:
            got["uid_msb"] = _int64(value, wire, "uidMsb")
        elif number == 2:
            got["uid_lsb"] = _int64(value, wire, "uidLsb")
        elif number == 3:
            got["complete"] = bool(_varint(value, wire, "complete"))
        elif number == 4:
            got["assigned_timestamp"] = _int64(value, wire, "assignedTimestamp")
        elif number == 5:
            got["offloaded_timestamp"] = _int64(value, wire, "offloadedTimestamp")
        elif number == 6:
            got["end_entry_id"] = _int64(value, wire, "endEntryId")
        elif number == 7:
            got["driver_metadata"] = _driver(_message(value, wire, "driverMetadata"), offset)
    return OffloadSegment(**got)  # type: ignore[arg-type]


def _offload_context(buf: memoryview, base: int) -> OffloadContext:
    got: dict[str, object] = {}
    segments: list[OffloadSegment] = []
    for number, wire, value, offset in _fields(buf, base):
        if number == 1:
            got["uid_msb"] = _int64(value, wire, "uidMsb")
        elif number == 2:
            got["uid_lsb"] = _int64(value, wire, "uidLsb")
        elif number == 3:
            got["complete"] = bool(_varint(value, wire, "complete"))
        elif number == 4:
            got["bookkeeper_deleted"] = bool(_varint(value, wire, "bookkeeperDeleted"))
        elif number == 5:
            got["timestamp"] = _int64(value, wire, "timestamp")
        elif number == 6:
            got["driver_metadata"] = _driver(_message(value, wire, "driverMetadata"), offset)
        elif number == 7:
            segments.append(_segment(_message(value, wire, "offloadSegment"), offset))
    return OffloadContext(segments=tuple(segments), **got)  # type: ignore[arg-type]


def _ledger_info(buf: memoryview, base: int) -> LedgerInfo:
    got: dict[str, object] = {}
    props: list[tuple[str, str]] = []
    for number, wire, value, offset in _fields(buf, base):
        if number == 1:
            got["ledger_id"] = _int64(value, wire, "ledgerId")
        elif number == 2:
            got["entries"] = _int64(value, wire, "entries")
        elif number == 3:
            got["size"] = _int64(value, wire, "size")
        elif number == 4:
            got["timestamp"] = _int64(value, wire, "timestamp")
        elif number == 5:
            got["offload_context"] = _offload_context(
                _message(value, wire, "offloadContext"), offset
            )
        elif number == 6:
            props.append(_key_value(_message(value, wire, "properties"), offset, "property"))
    if "ledger_id" not in got:
        raise ManagedLedgerInfoError(
            "not a ManagedLedgerInfo: a LedgerInfo lacks its required ledgerId", offset=base
        )
    return LedgerInfo(properties=tuple(props), **got)  # type: ignore[arg-type]


def _decode_binary(buf: memoryview) -> ManagedLedgerInfo:
    try:
        return _decode_message(buf)
    except ManagedLedgerInfoError:
        raise
    except ProtobufError as exc:
        raise ManagedLedgerInfoError(f"not a ManagedLedgerInfo: {exc}") from None


def _decode_message(buf: memoryview) -> ManagedLedgerInfo:
    ledgers: list[LedgerInfo] = []
    terminated: tuple[int, int] | None = None
    props: list[tuple[str, str]] = []
    for number, wire, value, offset in _fields(buf, 0):
        if number == 1:
            ledgers.append(_ledger_info(_message(value, wire, "ledgerInfo"), offset))
        elif number == 2:
            ledger_id = entry_id = None
            for n, w, v, _ in _fields(_message(value, wire, "terminatedPosition"), offset):
                if n == 1:
                    ledger_id = _int64(v, w, "terminatedPosition.ledgerId")
                elif n == 2:
                    entry_id = _int64(v, w, "terminatedPosition.entryId")
            if ledger_id is None or entry_id is None:
                raise ManagedLedgerInfoError(
                    "not a ManagedLedgerInfo: terminatedPosition lacks its ledgerId or entryId",
                    offset=offset,
                )
            terminated = (ledger_id, entry_id)
        elif number == 3:
            props.append(_key_value(_message(value, wire, "properties"), offset, "property"))
    return ManagedLedgerInfo(tuple(ledgers), terminated, tuple(props))


# --- protobuf text format (clusters of Pulsar's first releases) -------------------------------

# message -> field name -> (number, kind); a kind is "int", "bool", "string" or a message name
_TEXT_SCHEMA: dict[str, dict[str, tuple[int, str]]] = {
    "ManagedLedgerInfo": {
        "ledgerInfo": (1, "LedgerInfo"),
        "terminatedPosition": (2, "NestedPositionInfo"),
        "properties": (3, "KeyValue"),
    },
    "LedgerInfo": {
        "ledgerId": (1, "int"),
        "entries": (2, "int"),
        "size": (3, "int"),
        "timestamp": (4, "int"),
        "offloadContext": (5, "OffloadContext"),
        "properties": (6, "KeyValue"),
    },
    "NestedPositionInfo": {"ledgerId": (1, "int"), "entryId": (2, "int")},
    "KeyValue": {"key": (1, "string"), "value": (2, "string")},
    "OffloadContext": {
        "uidMsb": (1, "int"),
        "uidLsb": (2, "int"),
        "complete": (3, "bool"),
        "bookkeeperDeleted": (4, "bool"),
        "timestamp": (5, "int"),
        "driverMetadata": (6, "OffloadDriverMetadata"),
        "offloadSegment": (7, "OffloadSegment"),
    },
    "OffloadSegment": {
        "uidMsb": (1, "int"),
        "uidLsb": (2, "int"),
        "complete": (3, "bool"),
        "assignedTimestamp": (4, "int"),
        "offloadedTimestamp": (5, "int"),
        "endEntryId": (6, "int"),
        "driverMetadata": (7, "OffloadDriverMetadata"),
    },
    "OffloadDriverMetadata": {"name": (1, "string"), "properties": (2, "KeyValue")},
}
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|(?P<punct>[{}:<>;,])'
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*|-?[0-9][0-9A-Za-z.+-]*)|(?P<comment>#[^\n]*))"
)


def _as_text(buf: memoryview) -> str | None:
    if len(buf) == 0:
        return None
    try:
        text = bytes(buf).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() or all(c.isprintable() or c.isspace() for c in text) else None


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ManagedLedgerInfoError(
                f"not a ManagedLedgerInfo in text format: unexpected {text[pos : pos + 10]!r}",
                offset=pos,
            )
        pos = m.end()
        if m.group("comment") is None:
            out.append(m.group(0).strip())
    return out


def _unquote(token: str) -> bytes:
    try:
        return bytes(token[1:-1], "utf-8").decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise ManagedLedgerInfoError(f"bad string {token} in text format") from None


def text_to_wire(text: str) -> bytes:
    """A text-format ``ManagedLedgerInfo`` re-encoded as binary protobuf (then decoded as one)."""
    tokens = _tokens(text)
    out, _end = _text_message(tokens, 0, "ManagedLedgerInfo", None)
    return out


def _text_message(
    tokens: list[str], pos: int, message: str, close: str | None
) -> tuple[bytes, int]:
    schema = _TEXT_SCHEMA[message]
    out = bytearray()
    while pos < len(tokens):
        tok = tokens[pos]
        if close is not None and tok == close:
            return bytes(out), pos + 1
        if tok in ";,":
            pos += 1
            continue
        if tok not in schema:
            raise ManagedLedgerInfoError(
                f"not a ManagedLedgerInfo in text format: unknown field {tok!r} in {message}"
            )
        number, kind = schema[tok]
        pos += 1
        if kind in _TEXT_SCHEMA:
            if pos < len(tokens) and tokens[pos] == ":":
                pos += 1
            if pos >= len(tokens) or tokens[pos] not in "{<":
                raise ManagedLedgerInfoError(
                    f"not a ManagedLedgerInfo in text format: {tok} is not followed by a message"
                )
            end = "}" if tokens[pos] == "{" else ">"
            body, pos = _text_message(tokens, pos + 1, kind, end)
            out += field_bytes(number, body)
            continue
        if pos + 1 >= len(tokens) or tokens[pos] != ":":
            raise ManagedLedgerInfoError(
                f"not a ManagedLedgerInfo in text format: {tok} has no ': value'"
            )
        value = tokens[pos + 1]
        pos += 2
        if kind == "string":
            if value[:1] not in "\"'":
                raise ManagedLedgerInfoError(f"text format: {tok} is not a quoted string")
            out += field_bytes(number, _unquote(value))
        elif kind == "bool":
            if value not in ("true", "false", "1", "0", "True", "False", "t", "f"):
                raise ManagedLedgerInfoError(f"text format: {tok} is not a bool: {value!r}")
            out += field_varint(number, 1 if value in ("true", "1", "True", "t") else 0)
        else:
            try:
                out += field_varint(number, int(value, 0))
            except ValueError:
                raise ManagedLedgerInfoError(
                    f"text format: {tok} is not an integer: {value!r}"
                ) from None
    if close is not None:
        raise ManagedLedgerInfoError(f"not a ManagedLedgerInfo in text format: {message} unclosed")
    return bytes(out), pos


# --- encoding (what a broker writes; the test fixtures use it) --------------------------------


def _kv(number: int, pairs: tuple[tuple[str, str], ...]) -> bytes:
    return b"".join(
        field_bytes(number, field_bytes(1, k.encode()) + field_bytes(2, v.encode()))
        for k, v in pairs
    )


def _opt(number: int, value: int | None) -> bytes:
    return b"" if value is None else field_varint(number, value)


def _encode_driver(d: DriverMetadata) -> bytes:
    return field_bytes(1, d.name.encode()) + _kv(2, d.properties)


def _encode_segment(s: OffloadSegment) -> bytes:
    out = _opt(1, s.uid_msb) + _opt(2, s.uid_lsb) + field_varint(3, int(s.complete))
    out += _opt(4, s.assigned_timestamp) + _opt(5, s.offloaded_timestamp) + _opt(6, s.end_entry_id)
    if s.driver_metadata is not None:
        out += field_bytes(7, _encode_driver(s.driver_metadata))
    return out


def _encode_context(c: OffloadContext) -> bytes:
    out = _opt(1, c.uid_msb) + _opt(2, c.uid_lsb)
    out += field_varint(3, int(c.complete)) + field_varint(4, int(c.bookkeeper_deleted))
    out += _opt(5, c.timestamp)
    if c.driver_metadata is not None:
        out += field_bytes(6, _encode_driver(c.driver_metadata))
    for s in c.segments:
        out += field_bytes(7, _encode_segment(s))
    return out


def _encode_ledger(li: LedgerInfo) -> bytes:
    out = field_varint(1, li.ledger_id) + _opt(2, li.entries) + _opt(3, li.size)
    out += _opt(4, li.timestamp)
    if li.offload_context is not None:
        out += field_bytes(5, _encode_context(li.offload_context))
    return out + _kv(6, li.properties)


def encode_managed_ledger_info(info: ManagedLedgerInfo, *, codec: int = compression.NONE) -> bytes:
    """The node value a broker writes for ``info``; compressed (with the header) unless
    ``codec`` is NONE."""
    body = b"".join(field_bytes(1, _encode_ledger(li)) for li in info.ledgers)
    if info.terminated_position is not None:
        lid, eid = info.terminated_position
        body += field_bytes(2, field_varint(1, lid) + field_varint(2, eid))
    body += _kv(3, info.properties)
    if codec == compression.NONE:
        return body
    meta = field_varint(1, codec) + field_varint(2, len(body))
    return (
        COMPRESSED_MAGIC.to_bytes(2, "big")
        + len(meta).to_bytes(4, "big")
        + meta
        + compression.compress(codec, body)
    )
