"""BookKeeper's ``LedgerMetadataFormat`` (DataFormats.proto, proto2), hand-written codec.

The index object embeds this message (spec/index-format.md §2). We write the fields Pulsar's
``OffloadUtils.buildLedgerMetadataFormat`` writes, in field-number order: quorumSize (1),
ensembleSize (2), length (3), lastEntryId (4), state (5), segment* (6: ensembleMember* (1),
firstEntryId (2)), digestType (7), ackQuorumSize (9), ctime (10), customMetadata* (11: key (1),
value (2)). ``password`` (8) and ``cToken`` (12) are decoded if present but never written.
The output byte-matches the ``protobuf_hex`` of every golden case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from formats.errors import ProtobufError
from formats.protowire import (
    LENGTH_DELIMITED,
    VARINT,
    field_bytes,
    field_varint,
    iter_fields,
    to_signed32,
    to_signed64,
)

STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}
DIGEST_TYPES = {1: "CRC32", 2: "HMAC", 3: "CRC32C", 4: "DUMMY"}
_STATE_CODES = {v: k for k, v in STATES.items()}
_DIGEST_CODES = {v: k for k, v in DIGEST_TYPES.items()}


@dataclass(frozen=True)
class Ensemble:
    """One ``segment``: the bookies that hold entries from ``first_entry_id`` on."""

    first_entry_id: int
    bookies: tuple[str, ...]


@dataclass(frozen=True)
class LedgerMetadata:
    """The ledger metadata carried in an index (names follow the golden manifest)."""

    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int | None
    last_entry_id: int | None
    length: int
    state: str = "CLOSED"
    ensembles: tuple[Ensemble, ...] = ()
    digest_type: str | None = "CRC32C"
    ctime: int | None = None
    #: (key, value) pairs in serialized order (Pulsar writes Java HashMap order)
    custom_metadata: tuple[tuple[str, bytes], ...] = ()
    password: bytes | None = None
    ctoken: int | None = None

    @property
    def is_closed(self) -> bool:
        return self.state == "CLOSED"

    @property
    def custom_metadata_dict(self) -> dict[str, bytes]:
        return dict(self.custom_metadata)

    @classmethod
    def closed_default(
        cls,
        *,
        last_entry_id: int,
        length: int,
        ctime: int | None = None,
        custom_metadata: Mapping[str, bytes] | None = None,
        bookies: Sequence[str] = ("127.0.0.1:3181",),
    ) -> LedgerMetadata:
        """Metadata for a closed ledger of a single-bookie local store."""
        return cls(
            ensemble_size=len(bookies),
            write_quorum_size=len(bookies),
            ack_quorum_size=len(bookies),
            last_entry_id=last_entry_id,
            length=length,
            state="CLOSED",
            ensembles=(Ensemble(0, tuple(bookies)),),
            digest_type="CRC32C",
            ctime=ctime,
            custom_metadata=tuple((custom_metadata or {}).items()),
        )

    # --- JSON (the manifest's ``ledger_metadata`` object) ------------------------------------
    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LedgerMetadata:
        """Build from the manifest's ``ledger_metadata`` shape (used by ``objects encode``)."""
        try:
            custom = (
                obj.get("custom_metadata_in_serialized_order") or obj.get("custom_metadata") or []
            )
            pairs: list[tuple[str, bytes]] = []
            if isinstance(custom, Mapping):
                custom = [{"key": k, "value": v} for k, v in custom.items()]
            for item in custom:
                if "value_hex" in item:
                    value = bytes.fromhex(item["value_hex"])
                elif "value_utf8" in item:
                    value = item["value_utf8"].encode()
                else:
                    value = str(item["value"]).encode()
                pairs.append((str(item["key"]), value))
            return cls(
                ensemble_size=int(obj["ensemble_size"]),
                write_quorum_size=int(obj["write_quorum_size"]),
                ack_quorum_size=None
                if obj.get("ack_quorum_size") is None
                else int(obj["ack_quorum_size"]),
                last_entry_id=None
                if obj.get("last_entry_id") is None
                else int(obj["last_entry_id"]),
                length=int(obj["length"]),
                state=str(obj.get("state", "CLOSED")),
                ensembles=tuple(
                    Ensemble(int(e["first_entry_id"]), tuple(str(b) for b in e["bookies"]))
                    for e in obj.get("ensembles", [])
                ),
                digest_type=obj.get("digest_type"),
                ctime=None if obj.get("ctime") is None else int(obj["ctime"]),
                custom_metadata=tuple(pairs),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtobufError(f"invalid ledger metadata JSON: {exc!r}") from exc

    def to_json(self) -> dict[str, Any]:
        """The manifest's ``ledger_metadata`` shape (custom values as UTF-8 or hex)."""
        custom = []
        for key, value in self.custom_metadata:
            try:
                custom.append({"key": key, "value_utf8": value.decode("utf-8")})
            except UnicodeDecodeError:
                custom.append({"key": key, "value_hex": value.hex()})
        return {
            "ensemble_size": self.ensemble_size,
            "write_quorum_size": self.write_quorum_size,
            "ack_quorum_size": self.ack_quorum_size,
            "ensembles": [
                {"first_entry_id": e.first_entry_id, "bookies": list(e.bookies)}
                for e in self.ensembles
            ],
            "state": self.state,
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "digest_type": self.digest_type,
            "ctime": self.ctime,
            "custom_metadata_in_serialized_order": custom,
        }


def encode_ledger_metadata(md: LedgerMetadata) -> bytes:
    """Serialize as Pulsar's offloader does (no password, no cToken)."""
    if md.state not in _STATE_CODES:
        raise ProtobufError(f"unknown ledger state {md.state!r}")
    if md.digest_type is not None and md.digest_type not in _DIGEST_CODES:
        raise ProtobufError(f"unknown digest type {md.digest_type!r}")
    out = bytearray()
    out += field_varint(1, md.write_quorum_size)
    out += field_varint(2, md.ensemble_size)
    out += field_varint(3, md.length)
    if md.last_entry_id is not None:
        out += field_varint(4, md.last_entry_id)
    out += field_varint(5, _STATE_CODES[md.state])
    for ensemble in md.ensembles:
        segment = bytearray()
        for bookie in ensemble.bookies:
            segment += field_bytes(1, bookie.encode("utf-8"))
        segment += field_varint(2, ensemble.first_entry_id)
        out += field_bytes(6, bytes(segment))
    if md.digest_type is not None:
        out += field_varint(7, _DIGEST_CODES[md.digest_type])
    if md.ack_quorum_size is not None:
        out += field_varint(9, md.ack_quorum_size)
    if md.ctime is not None:
        out += field_varint(10, md.ctime)
    for key, value in md.custom_metadata:
        out += field_bytes(11, field_bytes(1, key.encode("utf-8")) + field_bytes(2, bytes(value)))
    return bytes(out)


def _utf8(value: memoryview, offset: int) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtobufError("string field is not UTF-8", offset=offset) from exc


def _expect(wire_type: int, wanted: int, field_number: int, offset: int) -> None:
    if wire_type != wanted:
        raise ProtobufError(f"field {field_number} has wire type {wire_type}", offset=offset)


def decode_ledger_metadata(data: bytes | memoryview, *, base_offset: int = 0) -> LedgerMetadata:
    """Parse a ``LedgerMetadataFormat``; unknown fields are skipped, required ones checked."""
    buf = memoryview(data)
    values: dict[str, Any] = {}
    ensembles: list[Ensemble] = []
    custom: list[tuple[str, bytes]] = []
    ints = {
        1: "quorum",
        2: "ensemble",
        3: "length",
        4: "last",
        5: "state",
        7: "digest",
        9: "ack",
        10: "ctime",
        12: "ctoken",
    }
    for number, wire, value, offset in iter_fields(buf, base_offset):
        if number in ints:
            _expect(wire, VARINT, number, offset)
            assert isinstance(value, int)
            values[ints[number]] = value
        elif number == 6:
            _expect(wire, LENGTH_DELIMITED, number, offset)
            assert isinstance(value, memoryview)
            bookies: list[str] = []
            first: int | None = None
            for n2, w2, v2, o2 in iter_fields(value, offset):
                if n2 == 1:
                    _expect(w2, LENGTH_DELIMITED, n2, o2)
                    assert isinstance(v2, memoryview)
                    bookies.append(_utf8(v2, o2))
                elif n2 == 2:
                    _expect(w2, VARINT, n2, o2)
                    assert isinstance(v2, int)
                    first = to_signed64(v2)
            if first is None:
                raise ProtobufError("segment without firstEntryId", offset=offset)
            ensembles.append(Ensemble(first, tuple(bookies)))
        elif number == 8:
            _expect(wire, LENGTH_DELIMITED, number, offset)
            assert isinstance(value, memoryview)
            values["password"] = bytes(value)
        elif number == 11:
            _expect(wire, LENGTH_DELIMITED, number, offset)
            assert isinstance(value, memoryview)
            key, val = "", b""
            for n2, w2, v2, o2 in iter_fields(value, offset):
                if n2 in (1, 2):
                    _expect(w2, LENGTH_DELIMITED, n2, o2)
                    assert isinstance(v2, memoryview)
                    if n2 == 1:
                        key = _utf8(v2, o2)
                    else:
                        val = bytes(v2)
            custom.append((key, val))
    for required, name in (
        ("quorum", "quorumSize"),
        ("ensemble", "ensembleSize"),
        ("length", "length"),
        ("state", "state"),
    ):
        if required not in values:
            raise ProtobufError(f"ledger metadata lacks required field {name}", offset=base_offset)
    state = STATES.get(values["state"])
    if state is None:
        raise ProtobufError(f"unknown ledger state {values['state']}", offset=base_offset)
    digest = values.get("digest")
    if digest is not None and digest not in DIGEST_TYPES:
        raise ProtobufError(f"unknown digest type {digest}", offset=base_offset)
    return LedgerMetadata(
        ensemble_size=to_signed32(values["ensemble"]),
        write_quorum_size=to_signed32(values["quorum"]),
        ack_quorum_size=to_signed32(values["ack"]) if "ack" in values else None,
        last_entry_id=to_signed64(values["last"]) if "last" in values else None,
        length=to_signed64(values["length"]),
        state=state,
        ensembles=tuple(ensembles),
        digest_type=DIGEST_TYPES[digest] if digest is not None else None,
        ctime=to_signed64(values["ctime"]) if "ctime" in values else None,
        custom_metadata=tuple(custom),
        password=values.get("password"),
        ctoken=to_signed64(values["ctoken"]) if "ctoken" in values else None,
    )
