"""Pulsar's ``MLDataFormats.proto`` (the messages of a managed ledger's node), built at run
time with the official ``protobuf`` package from the field numbers, names and types of
Pulsar's file (managed-ledger/src/main/proto/MLDataFormats.proto): the reference encoder and
decoder the hand-written codec of ``formats/pulsar/managed_ledger_info.py`` is compared to.

No protoc: the file descriptor is written as a ``FileDescriptorProto`` and its classes come
from ``message_factory``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REQ, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REQUIRED, _F.LABEL_REPEATED
_INT64, _INT32, _BOOL, _STRING = _F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_BOOL, _F.TYPE_STRING
_MSG, _ENUM = _F.TYPE_MESSAGE, _F.TYPE_ENUM

# message -> [(name, number, label, type, type_name)]
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "KeyValue": [("key", 1, _REQ, _STRING, ""), ("value", 2, _REQ, _STRING, "")],
    "OffloadDriverMetadata": [
        ("name", 1, _REQ, _STRING, ""),
        ("properties", 2, _REP, _MSG, ".KeyValue"),
    ],
    "OffloadContext": [
        ("uidMsb", 1, _OPT, _INT64, ""),
        ("uidLsb", 2, _OPT, _INT64, ""),
        ("complete", 3, _OPT, _BOOL, ""),
        ("bookkeeperDeleted", 4, _OPT, _BOOL, ""),
        ("timestamp", 5, _OPT, _INT64, ""),
        ("driverMetadata", 6, _OPT, _MSG, ".OffloadDriverMetadata"),
        ("offloadSegment", 7, _REP, _MSG, ".OffloadSegment"),
    ],
    "OffloadSegment": [
        ("uidMsb", 1, _OPT, _INT64, ""),
        ("uidLsb", 2, _OPT, _INT64, ""),
        ("complete", 3, _OPT, _BOOL, ""),
        ("assignedTimestamp", 4, _OPT, _INT64, ""),
        ("offloadedTimestamp", 5, _OPT, _INT64, ""),
        ("endEntryId", 6, _OPT, _INT64, ""),
        ("driverMetadata", 7, _OPT, _MSG, ".OffloadDriverMetadata"),
    ],
    "NestedPositionInfo": [("ledgerId", 1, _REQ, _INT64, ""), ("entryId", 2, _REQ, _INT64, "")],
    "ManagedLedgerInfo": [
        ("ledgerInfo", 1, _REP, _MSG, ".ManagedLedgerInfo.LedgerInfo"),
        ("terminatedPosition", 2, _OPT, _MSG, ".NestedPositionInfo"),
        ("properties", 3, _REP, _MSG, ".KeyValue"),
    ],
    "ManagedLedgerInfoMetadata": [
        ("compressionType", 1, _REQ, _ENUM, ".CompressionType"),
        ("uncompressedSize", 2, _REQ, _INT32, ""),
    ],
}
_LEDGER_INFO = [
    ("ledgerId", 1, _REQ, _INT64, ""),
    ("entries", 2, _OPT, _INT64, ""),
    ("size", 3, _OPT, _INT64, ""),
    ("timestamp", 4, _OPT, _INT64, ""),
    ("offloadContext", 5, _OPT, _MSG, ".OffloadContext"),
    ("properties", 6, _REP, _MSG, ".KeyValue"),
]


def _fill(
    msg: descriptor_pb2.DescriptorProto, fields: list[tuple[str, int, int, int, str]]
) -> None:
    for name, number, label, type_, type_name in fields:
        f = msg.field.add(name=name, number=number, label=label, type=type_)
        if type_name:
            f.type_name = type_name


def _build() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(name="zk37_test_MLDataFormats.proto", syntax="proto2")
    enum = fdp.enum_type.add(name="CompressionType")
    for name, number in (("NONE", 0), ("LZ4", 1), ("ZLIB", 2), ("ZSTD", 3), ("SNAPPY", 4)):
        enum.value.add(name=name, number=number)
    for name, fields in _MESSAGES.items():
        msg = fdp.message_type.add(name=name)
        _fill(msg, fields)
        if name == "ManagedLedgerInfo":
            _fill(msg.nested_type.add(name="LedgerInfo"), _LEDGER_INFO)
    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(fdp)
    classes: dict[str, Any] = {}
    for name in _MESSAGES:
        classes[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    classes["LedgerInfo"] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("ManagedLedgerInfo.LedgerInfo")
    )
    del fd
    return classes


CLASSES = _build()
ManagedLedgerInfo = CLASSES["ManagedLedgerInfo"]
ManagedLedgerInfoMetadata = CLASSES["ManagedLedgerInfoMetadata"]
