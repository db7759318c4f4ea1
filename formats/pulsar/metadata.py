"""Pulsar's MessageMetadata, SingleMessageMetadata and BrokerEntryMetadata (proto2) as value
types, with one field table per message that drives both decoding and encoding.

The numbers are those of ``PulsarApi.proto`` (apache/pulsar-client-cpp, checked by hand; see
spec/pulsar-messages.md). Unknown fields are skipped (newer producers may add some); a known
field with the wrong wire type, a truncated field or a missing required field is a
:class:`~formats.pulsar.errors.MalformedMessageError`. MessageMetadata, read once per entry, is
decoded in C when the extension is built (``formats/_pulsar_speedups.c``, same results; whatever
it declines goes to the Python decoder here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from formats.errors import ProtobufError
from formats.protowire import (
    LENGTH_DELIMITED,
    VARINT,
    encode_tag,
    encode_varint,
    field_bytes,
    iter_fields,
    to_signed32,
    to_signed64,
)
from formats.pulsar.errors import MalformedMessageError, MessageEncodeError
from formats.pulsar.speedups import C_MODULE

Properties = tuple[tuple[str, str], ...]

# kinds of fields: how a value is read from / written to the wire
U64, I32, I64, BOOL, STR, BYTES, KV, STRS, ENCKEYS = (
    "u64",
    "i32",
    "i64",
    "bool",
    "str",
    "bytes",
    "kv*",
    "str*",
    "enckeys*",
)


@dataclass(frozen=True)
class EncryptionKey:
    """``EncryptionKeys``: key 1 (name), value 2 (the data key wrapped with that public
    key), metadata 3 (KeyValue)."""

    key: str
    value: bytes
    metadata: Properties = ()


@dataclass(slots=True)
class MessageMetadata:
    """``MessageMetadata``. Optional fields are ``None`` when absent (``event_time`` too:
    Pulsar reads 0 as unset, and so do we)."""

    producer_name: str = ""
    sequence_id: int = 0
    publish_time: int = 0
    properties: Properties = ()
    replicated_from: str | None = None
    partition_key: str | None = None
    replicate_to: tuple[str, ...] = ()
    compression: int | None = None
    uncompressed_size: int | None = None
    num_messages_in_batch: int | None = None
    event_time: int | None = None
    encryption_keys: tuple[EncryptionKey, ...] = ()
    encryption_algo: str | None = None
    encryption_param: bytes | None = None
    schema_version: bytes | None = None
    partition_key_b64_encoded: bool | None = None
    ordering_key: bytes | None = None
    deliver_at_time: int | None = None
    marker_type: int | None = None
    txnid_least_bits: int | None = None
    txnid_most_bits: int | None = None
    highest_sequence_id: int | None = None
    null_value: bool | None = None
    uuid: str | None = None
    num_chunks_from_msg: int | None = None
    total_chunk_msg_size: int | None = None
    chunk_id: int | None = None
    null_partition_key: bool | None = None

    @property
    def is_batch(self) -> bool:
        """A batch is marked by the *presence* of num_messages_in_batch."""
        return self.num_messages_in_batch is not None

    @property
    def is_chunk(self) -> bool:
        return (
            self.uuid is not None
            and self.num_chunks_from_msg is not None
            and (self.num_chunks_from_msg > 1)
        )


@dataclass(slots=True)
class SingleMessageMetadata:
    """``SingleMessageMetadata``: one message of a batch."""

    properties: Properties = ()
    partition_key: str | None = None
    payload_size: int = 0
    compacted_out: bool | None = None
    event_time: int | None = None
    partition_key_b64_encoded: bool | None = None
    ordering_key: bytes | None = None
    sequence_id: int | None = None
    null_value: bool | None = None
    null_partition_key: bool | None = None


@dataclass(slots=True)
class BrokerEntryMetadata:
    """``BrokerEntryMetadata``, written by the broker before magic 0x0e02's payload."""

    broker_timestamp: int | None = None
    index: int | None = None


# field number -> (attribute, kind); the order of the table is the order fields are written
MESSAGE_METADATA_FIELDS: dict[int, tuple[str, str]] = {
    1: ("producer_name", STR),
    2: ("sequence_id", U64),
    3: ("publish_time", U64),
    4: ("properties", KV),
    5: ("replicated_from", STR),
    6: ("partition_key", STR),
    7: ("replicate_to", STRS),
    8: ("compression", I32),
    9: ("uncompressed_size", U64),
    11: ("num_messages_in_batch", I32),
    12: ("event_time", U64),
    13: ("encryption_keys", ENCKEYS),
    14: ("encryption_algo", STR),
    15: ("encryption_param", BYTES),
    16: ("schema_version", BYTES),
    17: ("partition_key_b64_encoded", BOOL),
    18: ("ordering_key", BYTES),
    19: ("deliver_at_time", I64),
    20: ("marker_type", I32),
    22: ("txnid_least_bits", U64),
    23: ("txnid_most_bits", U64),
    24: ("highest_sequence_id", U64),
    25: ("null_value", BOOL),
    26: ("uuid", STR),
    27: ("num_chunks_from_msg", I32),
    28: ("total_chunk_msg_size", I32),
    29: ("chunk_id", I32),
    30: ("null_partition_key", BOOL),
}
MESSAGE_METADATA_REQUIRED = ("producer_name", "sequence_id", "publish_time")

SINGLE_MESSAGE_METADATA_FIELDS: dict[int, tuple[str, str]] = {
    1: ("properties", KV),
    2: ("partition_key", STR),
    3: ("payload_size", I32),
    4: ("compacted_out", BOOL),
    5: ("event_time", U64),
    6: ("partition_key_b64_encoded", BOOL),
    7: ("ordering_key", BYTES),
    8: ("sequence_id", U64),
    9: ("null_value", BOOL),
    10: ("null_partition_key", BOOL),
}
SINGLE_MESSAGE_METADATA_REQUIRED = ("payload_size",)

BROKER_ENTRY_METADATA_FIELDS: dict[int, tuple[str, str]] = {
    1: ("broker_timestamp", U64),
    2: ("index", U64),
}

_KEY_VALUE_FIELDS = {1: ("key", STR), 2: ("value", STR)}
_ENCRYPTION_KEYS_FIELDS = {1: ("key", STR), 2: ("value", BYTES), 3: ("metadata", KV)}


# --- decoding ---------------------------------------------------------------------------------
def _text(value: memoryview, name: str, offset: int) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessageError(f"field {name} is not UTF-8", offset=offset) from None


def _key_value(buf: memoryview, base: int) -> tuple[str, str]:
    got = _decode_fields(buf, _KEY_VALUE_FIELDS, base, "KeyValue")
    if "key" not in got or "value" not in got:
        raise MalformedMessageError("KeyValue without its key or value", offset=base)
    return got["key"], got["value"]


def _encryption_key(buf: memoryview, base: int) -> EncryptionKey:
    got = _decode_fields(buf, _ENCRYPTION_KEYS_FIELDS, base, "EncryptionKeys")
    if "key" not in got or "value" not in got:
        raise MalformedMessageError("EncryptionKeys without its key or value", offset=base)
    return EncryptionKey(got["key"], got["value"], tuple(got.get("metadata", ())))


def _decode_fields(
    buf: memoryview, table: dict[int, tuple[str, str]], base: int, what: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        for number, wire_type, value, offset in iter_fields(buf, base):
            spec = table.get(number)
            if spec is None:
                continue
            name, kind = spec
            want = LENGTH_DELIMITED if kind in (STR, BYTES, KV, STRS, ENCKEYS) else VARINT
            if wire_type != want:
                raise MalformedMessageError(
                    f"{what}.{name} (field {number}) has wire type {wire_type}", offset=offset
                )
            if kind == U64:
                out[name] = value
            elif kind == I32:
                out[name] = to_signed32(value)  # type: ignore[arg-type]
            elif kind == I64:
                out[name] = to_signed64(value)  # type: ignore[arg-type]
            elif kind == BOOL:
                out[name] = bool(value)
            elif kind == STR:
                out[name] = _text(value, name, offset)  # type: ignore[arg-type]
            elif kind == BYTES:
                out[name] = bytes(value)  # type: ignore[arg-type]
            elif kind == KV:
                out.setdefault(name, []).append(_key_value(value, offset))  # type: ignore[arg-type]
            elif kind == STRS:
                out.setdefault(name, []).append(_text(value, name, offset))  # type: ignore[arg-type]
            else:
                out.setdefault(name, []).append(_encryption_key(value, offset))  # type: ignore[arg-type]
    except ProtobufError as exc:
        raise MalformedMessageError(f"{what}: {exc}") from exc
    return out


def _build(
    cls: Callable[..., Any], got: dict[str, Any], required: tuple[str, ...], what: str, base: int
) -> Any:
    for name in required:
        if name not in got:
            raise MalformedMessageError(f"{what} without its required {name}", offset=base)
    for name, value in got.items():
        if isinstance(value, list):
            got[name] = tuple(value)
    return cls(**got)


#: the C twin of the MessageMetadata decoder (formats/_pulsar_speedups.c): the field values in
#: the dataclass's order, or None for input it leaves to the Python decoder (malformed, or
#: encryption keys)
_C_METADATA = C_MODULE.message_metadata_values if C_MODULE is not None else None


def decode_message_metadata(
    buf: memoryview | bytes, base: int = 0, *, use_c: bool = True
) -> MessageMetadata:
    """One MessageMetadata (C when built; the Python decoder judges whatever C declines)."""
    if use_c and _C_METADATA is not None:
        values = _C_METADATA(buf)
        if values is not None:
            return MessageMetadata(*values)
    return _decode_message_metadata_py(memoryview(buf), base)


def _decode_message_metadata_py(buf: memoryview, base: int) -> MessageMetadata:
    got = _decode_fields(buf, MESSAGE_METADATA_FIELDS, base, "MessageMetadata")
    if got.get("event_time") == 0:
        del got["event_time"]
    md: MessageMetadata = _build(
        MessageMetadata, got, MESSAGE_METADATA_REQUIRED, "MessageMetadata", base
    )
    return md


def decode_single_message_metadata(buf: memoryview, base: int = 0) -> SingleMessageMetadata:
    got = _decode_fields(buf, SINGLE_MESSAGE_METADATA_FIELDS, base, "SingleMessageMetadata")
    if got.get("event_time") == 0:
        del got["event_time"]
    smm: SingleMessageMetadata = _build(
        SingleMessageMetadata,
        got,
        SINGLE_MESSAGE_METADATA_REQUIRED,
        "SingleMessageMetadata",
        base,
    )
    if smm.payload_size < 0:
        raise MalformedMessageError(f"negative payload_size {smm.payload_size}", offset=base)
    return smm


def decode_broker_entry_metadata(buf: memoryview, base: int = 0) -> BrokerEntryMetadata:
    got = _decode_fields(buf, BROKER_ENTRY_METADATA_FIELDS, base, "BrokerEntryMetadata")
    bem: BrokerEntryMetadata = _build(BrokerEntryMetadata, got, (), "BrokerEntryMetadata", base)
    return bem


# --- encoding ---------------------------------------------------------------------------------
def _encode_value(number: int, kind: str, value: Any) -> bytes:
    try:
        if kind in (U64,):
            if not 0 <= value < 1 << 64:
                raise MessageEncodeError(f"field {number}: {value} is not a uint64")
            return encode_tag(number, VARINT) + encode_varint(value)
        if kind == I32:
            if not -(1 << 31) <= value < 1 << 31:
                raise MessageEncodeError(f"field {number}: {value} is not an int32")
            return encode_tag(number, VARINT) + encode_varint(value)
        if kind == I64:
            if not -(1 << 63) <= value < 1 << 63:
                raise MessageEncodeError(f"field {number}: {value} is not an int64")
            return encode_tag(number, VARINT) + encode_varint(value)
        if kind == BOOL:
            return encode_tag(number, VARINT) + encode_varint(1 if value else 0)
        if kind == STR:
            return field_bytes(number, str(value).encode("utf-8"))
        if kind == BYTES:
            return field_bytes(number, bytes(value))
        if kind == KV:
            return b"".join(field_bytes(number, _encode_key_value(k, v)) for k, v in value)
        if kind == STRS:
            return b"".join(field_bytes(number, str(s).encode("utf-8")) for s in value)
        return b"".join(field_bytes(number, _encode_encryption_key(k)) for k in value)
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise MessageEncodeError(f"field {number}: cannot encode {value!r}: {exc}") from None


def _encode_key_value(key: str, value: str) -> bytes:
    return field_bytes(1, key.encode("utf-8")) + field_bytes(2, value.encode("utf-8"))


def _encode_encryption_key(key: EncryptionKey) -> bytes:
    out = field_bytes(1, key.key.encode("utf-8")) + field_bytes(2, key.value)
    return out + b"".join(field_bytes(3, _encode_key_value(k, v)) for k, v in key.metadata)


def _encode(obj: Any, table: dict[int, tuple[str, str]]) -> bytes:
    parts = []
    for number, (name, kind) in table.items():
        value = getattr(obj, name)
        if value is None or (kind in (KV, STRS, ENCKEYS) and not value):
            continue
        parts.append(_encode_value(number, kind, value))
    return b"".join(parts)


def encode_message_metadata(md: MessageMetadata) -> bytes:
    return _encode(md, MESSAGE_METADATA_FIELDS)


def encode_single_message_metadata(smm: SingleMessageMetadata) -> bytes:
    return _encode(smm, SINGLE_MESSAGE_METADATA_FIELDS)


def encode_broker_entry_metadata(bem: BrokerEntryMetadata) -> bytes:
    return _encode(bem, BROKER_ENTRY_METADATA_FIELDS)


def field_names(cls: type) -> list[str]:
    """The attribute names of one of the metadata value types (for tests and docs)."""
    return [f.name for f in fields(cls)]


__all__ = [
    "BROKER_ENTRY_METADATA_FIELDS",
    "MESSAGE_METADATA_FIELDS",
    "SINGLE_MESSAGE_METADATA_FIELDS",
    "BrokerEntryMetadata",
    "EncryptionKey",
    "MessageMetadata",
    "Properties",
    "SingleMessageMetadata",
    "decode_broker_entry_metadata",
    "decode_message_metadata",
    "decode_single_message_metadata",
    "encode_broker_entry_metadata",
    "encode_message_metadata",
    "encode_single_message_metadata",
]
