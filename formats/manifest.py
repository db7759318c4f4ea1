"""Bucket manifests: the completion markers and watermark objects that make a store
self-describing (spec/bucket-manifests.md). Pure: keys and small bodies in, values out.

Everything lives under the reserved prefix ``_offloader/v1/`` (``v1`` is the format version),
which Pulsar never writes (its keys start with a UUID). Two kinds of object:

* a **ledger marker** ``_offloader/v1/ledgers/<name>/<ledgerId:020d>.<uuid>.<fields>``, written
  last, after the data object and the index: its key alone carries the record a rebuild needs
  (entry count, entry bytes, object sizes, index CRC32C, transform, times), so a rebuild lists
  the markers and never GETs or HEADs one per ledger. Its small JSON body repeats every field.
* a **watermark** ``_offloader/v1/watermarks/<kind>/<name>/<position:020d>.<tag>``: the highest
  finished position (a ledger id for ``ledgers``) of one managed ledger, or (kind
  ``kafka-partitions``, :mod:`formats.kafka.manifest`) the highest finished offset of one Kafka
  partition. A writer creates a new object per higher position and never deletes the lower
  ones (a listing is no snapshot), so the highest key is the watermark and no race lowers it.

``<name>`` is the managed-ledger name percent-encoded into one key segment (every byte but
``A-Z a-z 0-9 - _ .``). A name whose key would pass :data:`MAX_KEY_BYTES` is replaced by ``~``
and the SHA-256 of the name (hex): then, and only then, a reader GETs one marker's body (or a
watermark's) to learn the full name.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid as _uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from formats.errors import FormatError, InvalidKeyError

__all__ = [
    "LEDGERS_KIND",
    "LEDGER_MARKERS",
    "MANIFEST_ROOT",
    "MAX_KEY_BYTES",
    "MAX_POSITION",
    "TRANSFORMS",
    "WATERMARKS",
    "LedgerMarker",
    "MarkerKey",
    "WatermarkKey",
    "decode_marker_body",
    "decode_watermark_body",
    "encode_marker_body",
    "encode_watermark_body",
    "is_manifest_key",
    "ledger_marker_key",
    "ledger_marker_prefix",
    "name_segment",
    "parse_ledger_marker_key",
    "parse_watermark_key",
    "watermark_key",
    "watermark_prefix",
]

#: every manifest object's key starts with this; ``v1`` is the format version
MANIFEST_ROOT = "_offloader/v1/"
LEDGER_MARKERS = MANIFEST_ROOT + "ledgers/"
WATERMARKS = MANIFEST_ROOT + "watermarks/"
#: S3's (and our stores') longest key, in UTF-8 bytes
MAX_KEY_BYTES = 1024
#: positions and ledger ids are printed with 20 digits: listing order is numeric order
MAX_POSITION = 10**20 - 1
#: the marker's transform field: how the data object is stored (spec/transforms.md)
TRANSFORMS = ("none", "zstd", "aes", "zstdaes")
#: the watermark kind of a managed ledger: its highest finished ledger id
LEDGERS_KIND = "ledgers"
#: a watermark's kind: ``ledgers`` (a managed ledger's highest finished ledger id) for now
KIND = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
#: a watermark's tag: the attempt's UUID (ledgers) or another short id of what finished
TAG = re.compile(r"^[A-Za-z0-9-]{1,64}$")
#: the safe bytes of a name segment; everything else is %XX
_SAFE = "-_."
_HASHED = "~"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_U64 = r"(?:0|[1-9][0-9]{0,19})"
_FIELDS = re.compile(
    rf"^(?P<ledger>[0-9]{{20}})\.(?P<uuid>{_UUID})"
    rf"\.e(?P<entries>{_U64})\.b(?P<entry_bytes>{_U64})"
    rf"\.d(?P<data_size>{_U64})\.i(?P<index_size>{_U64})"
    r"\.c(?P<crc>[0-9a-f]{8})\.t(?P<transform>[a-z]+)"
    rf"\.l(?P<created>{_U64})-(?P<closed>{_U64})\.o(?P<offloaded>{_U64})$"
)
_WATERMARK = re.compile(r"^(?P<position>[0-9]{20})\.(?P<tag>[A-Za-z0-9-]{1,64})$")
_SEGMENT = re.compile(r"^(?:~[0-9a-f]{64}|(?:[A-Za-z0-9_.\-]|%[0-9A-F]{2})+)$")
#: the longest fields part a marker key can have (20-digit numbers everywhere)
_FIELDS_MAX = len(
    f"{0:020d}.{'0' * 36}.e{MAX_POSITION}.b{MAX_POSITION}.d{MAX_POSITION}.i{MAX_POSITION}"
    f".c00000000.tzstdaes.l{MAX_POSITION}-{MAX_POSITION}.o{MAX_POSITION}"
)
_WATERMARK_MAX = len(f"{0:020d}.") + 64


@dataclass(frozen=True)
class LedgerMarker:
    """A finished offload of one ledger, as its completion marker records it."""

    managed_ledger_name: str
    ledger_id: int
    uuid: str
    entries: int
    entry_bytes: int
    data_size: int
    index_size: int
    index_crc32c: int
    transform: str
    created_ms: int
    closed_ms: int
    offloaded_ms: int

    def __post_init__(self) -> None:
        if not self.managed_ledger_name:
            raise InvalidKeyError("a marker needs a managed-ledger name")
        _check_uuid(self.uuid)
        for name in (
            "ledger_id",
            "entries",
            "entry_bytes",
            "data_size",
            "index_size",
            "created_ms",
            "closed_ms",
            "offloaded_ms",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidKeyError(f"marker field {name} must be an int, not {value!r}")
            if not 0 <= value <= MAX_POSITION:
                raise InvalidKeyError(f"marker field {name} = {value} is out of range")
        if not 0 <= self.index_crc32c <= 0xFFFFFFFF:
            raise InvalidKeyError(f"index CRC32C {self.index_crc32c} is not a 32-bit value")
        if self.transform not in TRANSFORMS:
            raise InvalidKeyError(f"transform {self.transform!r} is not one of {TRANSFORMS}")


@dataclass(frozen=True)
class MarkerKey:
    """A parsed marker key. ``marker`` is None when the name segment is a hash
    (``hashed``): the caller reads one marker body of that segment for the name and calls
    :meth:`with_name`."""

    key: str
    segment: str
    ledger_id: int
    uuid: str
    fields: Mapping[str, int | str]
    marker: LedgerMarker | None

    @property
    def hashed(self) -> bool:
        return self.segment.startswith(_HASHED)

    def with_name(self, managed_ledger_name: str) -> LedgerMarker:
        """The marker, its name learnt from a body (checked against the segment's hash)."""
        if name_segment(managed_ledger_name, _marker_rest()) != self.segment:
            raise InvalidKeyError(
                f"name {managed_ledger_name!r} does not match the key segment {self.segment}"
            )
        return _marker(managed_ledger_name, self.ledger_id, self.uuid, self.fields)


@dataclass(frozen=True)
class WatermarkKey:
    """A parsed watermark key; ``name`` is None when its segment is a hash."""

    key: str
    kind: str
    segment: str
    name: str | None
    position: int
    tag: str


def _check_uuid(value: str) -> None:
    if not re.fullmatch(_UUID, value):
        raise InvalidKeyError(f"{value!r} is not a lower-case UUID")
    _uuid.UUID(value)


def _encode(name: str) -> str:
    # quote() never escapes "~": we do, so that "~" starts only a hashed segment
    return quote(name, safe=_SAFE).replace("~", "%7E")


def name_segment(name: str, rest_bytes: int) -> str:
    """``name`` percent-encoded as one key segment, or ``~<sha256>`` when the key (the
    segment plus ``rest_bytes`` more) would be longer than :data:`MAX_KEY_BYTES`."""
    if not name:
        raise InvalidKeyError("an empty name has no key segment")
    encoded = _encode(name)
    if len(encoded) + rest_bytes <= MAX_KEY_BYTES:
        return encoded
    return _HASHED + hashlib.sha256(name.encode("utf-8")).hexdigest()


def _segment_name(segment: str) -> str | None:
    if not _SEGMENT.match(segment):
        raise InvalidKeyError(f"{segment!r} is not a manifest name segment")
    if segment.startswith(_HASHED):
        return None
    name = unquote(segment, errors="strict")
    if _encode(name) != segment:
        raise InvalidKeyError(f"{segment!r} is not in canonical percent-encoding")
    return name


def _marker_rest() -> int:
    return len(LEDGER_MARKERS) + 1 + _FIELDS_MAX


def ledger_marker_prefix(
    managed_ledger_name: str, ledger_id: int | None = None, uuid: str | None = None
) -> str:
    """The prefix of a managed ledger's markers (of one ledger, of one of its attempts)."""
    prefix = f"{LEDGER_MARKERS}{name_segment(managed_ledger_name, _marker_rest())}/"
    if ledger_id is None:
        return prefix
    if not 0 <= ledger_id <= MAX_POSITION:
        raise InvalidKeyError(f"ledger id {ledger_id} is out of range")
    prefix += f"{ledger_id:020d}."
    if uuid is None:
        return prefix
    _check_uuid(uuid)
    return prefix + uuid + "."


def ledger_marker_key(marker: LedgerMarker) -> str:
    """The marker's key (every field of the record in it)."""
    m = marker
    fields = (
        f"{m.ledger_id:020d}.{m.uuid}.e{m.entries}.b{m.entry_bytes}.d{m.data_size}"
        f".i{m.index_size}.c{m.index_crc32c:08x}.t{m.transform}"
        f".l{m.created_ms}-{m.closed_ms}.o{m.offloaded_ms}"
    )
    return ledger_marker_prefix(m.managed_ledger_name) + fields


def _marker(name: str, ledger_id: int, uuid: str, fields: Mapping[str, int | str]) -> LedgerMarker:
    return LedgerMarker(
        managed_ledger_name=name,
        ledger_id=ledger_id,
        uuid=uuid,
        entries=int(fields["entries"]),
        entry_bytes=int(fields["entry_bytes"]),
        data_size=int(fields["data_size"]),
        index_size=int(fields["index_size"]),
        index_crc32c=int(fields["index_crc32c"]),
        transform=str(fields["transform"]),
        created_ms=int(fields["created_ms"]),
        closed_ms=int(fields["closed_ms"]),
        offloaded_ms=int(fields["offloaded_ms"]),
    )


def parse_ledger_marker_key(key: str) -> MarkerKey:
    """The inverse of :func:`ledger_marker_key` (raises InvalidKeyError)."""
    if not key.startswith(LEDGER_MARKERS):
        raise InvalidKeyError(f"{key!r} is not a ledger marker key")
    segment, sep, rest = key[len(LEDGER_MARKERS) :].partition("/")
    match = _FIELDS.match(rest) if sep else None
    if match is None:
        raise InvalidKeyError(f"{key!r} is not a ledger marker key (spec/bucket-manifests.md)")
    name = _segment_name(segment)
    fields: dict[str, int | str] = {
        "entries": int(match["entries"]),
        "entry_bytes": int(match["entry_bytes"]),
        "data_size": int(match["data_size"]),
        "index_size": int(match["index_size"]),
        "index_crc32c": int(match["crc"], 16),
        "transform": match["transform"],
        "created_ms": int(match["created"]),
        "closed_ms": int(match["closed"]),
        "offloaded_ms": int(match["offloaded"]),
    }
    ledger_id, uuid = int(match["ledger"]), match["uuid"]
    marker = None if name is None else _marker(name, ledger_id, uuid, fields)
    parsed = MarkerKey(key, segment, ledger_id, uuid, fields, marker)
    if marker is not None and ledger_marker_key(marker) != key:
        raise InvalidKeyError(f"{key!r} is not in canonical form")
    return parsed


def _check_kind(kind: str) -> None:
    if not KIND.match(kind):
        raise InvalidKeyError(f"watermark kind {kind!r} is not [a-z][a-z0-9-]*")


def watermark_prefix(kind: str, name: str) -> str:
    """The prefix of the watermark objects of ``name`` (a managed ledger for ``ledgers``)."""
    _check_kind(kind)
    rest = len(WATERMARKS) + len(kind) + 2 + _WATERMARK_MAX
    return f"{WATERMARKS}{kind}/{name_segment(name, rest)}/"


def watermark_key(kind: str, name: str, position: int, tag: str) -> str:
    """The key of the watermark object recording ``position`` (finished by ``tag``)."""
    if isinstance(position, bool) or not 0 <= position <= MAX_POSITION:
        raise InvalidKeyError(f"watermark position {position!r} is out of range")
    if not TAG.match(tag):
        raise InvalidKeyError(f"watermark tag {tag!r} is not [A-Za-z0-9-]{{1,64}}")
    return f"{watermark_prefix(kind, name)}{position:020d}.{tag}"


def parse_watermark_key(key: str) -> WatermarkKey:
    """The inverse of :func:`watermark_key` (raises InvalidKeyError)."""
    if not key.startswith(WATERMARKS):
        raise InvalidKeyError(f"{key!r} is not a watermark key")
    parts = key[len(WATERMARKS) :].split("/")
    match = _WATERMARK.match(parts[2]) if len(parts) == 3 else None
    if match is None or not KIND.match(parts[0]):
        raise InvalidKeyError(f"{key!r} is not a watermark key (spec/bucket-manifests.md)")
    name = _segment_name(parts[1])
    return WatermarkKey(key, parts[0], parts[1], name, int(match["position"]), match["tag"])


def is_manifest_key(key: str) -> bool:
    """Whether ``key`` lies under the reserved manifest prefix."""
    return key.startswith(MANIFEST_ROOT)


def _json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _load(body: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{what} body is not JSON: {exc}") from exc
    if not isinstance(value, dict) or value.get("format") != 1:
        raise FormatError(f"{what} body is not format 1")
    return value


def encode_marker_body(marker: LedgerMarker) -> bytes:
    """The marker's body: its fields as compact JSON (the name in full, even when hashed)."""
    m = marker
    return _json(
        {
            "format": 1,
            "kind": "ledger-marker",
            "managed_ledger": m.managed_ledger_name,
            "ledger_id": m.ledger_id,
            "uuid": m.uuid,
            "entries": m.entries,
            "entry_bytes": m.entry_bytes,
            "data_size": m.data_size,
            "index_size": m.index_size,
            "index_crc32c": m.index_crc32c,
            "transform": m.transform,
            "created_ms": m.created_ms,
            "closed_ms": m.closed_ms,
            "offloaded_ms": m.offloaded_ms,
        }
    )


def decode_marker_body(body: bytes) -> LedgerMarker:
    """The inverse of :func:`encode_marker_body` (FormatError / InvalidKeyError)."""
    value = _load(body, "marker")
    if value.get("kind") != "ledger-marker":
        raise FormatError("marker body is not a ledger marker")
    try:
        return LedgerMarker(
            managed_ledger_name=value["managed_ledger"],
            ledger_id=value["ledger_id"],
            uuid=value["uuid"],
            entries=value["entries"],
            entry_bytes=value["entry_bytes"],
            data_size=value["data_size"],
            index_size=value["index_size"],
            index_crc32c=value["index_crc32c"],
            transform=value["transform"],
            created_ms=value["created_ms"],
            closed_ms=value["closed_ms"],
            offloaded_ms=value["offloaded_ms"],
        )
    except (KeyError, TypeError) as exc:
        raise FormatError(f"marker body lacks a field: {exc}") from exc


def encode_watermark_body(kind: str, name: str, position: int, tag: str, written_ms: int) -> bytes:
    """A watermark's body: what its key says, with the full name and when it was written."""
    watermark_key(kind, name, position, tag)  # the same checks
    return _json(
        {
            "format": 1,
            "kind": kind,
            "name": name,
            "position": position,
            "tag": tag,
            "written_ms": written_ms,
        }
    )


def decode_watermark_body(body: bytes) -> tuple[str, str, int, str, int]:
    """``(kind, name, position, tag, written_ms)`` of a watermark body."""
    value = _load(body, "watermark")
    try:
        kind, name, position = value["kind"], value["name"], value["position"]
        tag, written = value["tag"], value["written_ms"]
    except KeyError as exc:
        raise FormatError(f"watermark body lacks a field: {exc}") from exc
    if not (isinstance(name, str) and isinstance(tag, str) and isinstance(kind, str)):
        raise FormatError("watermark body has a field of the wrong type")
    if not (isinstance(position, int) and isinstance(written, int)):
        raise FormatError("watermark body has a field of the wrong type")
    watermark_key(kind, name, position, tag)
    return kind, name, position, tag, written
