"""KRaft metadata records: the values of the ``__cluster_metadata`` log's records, decoded and
encoded (spec/kafka-metadata.md).

Each record value of a (non-control) batch of a KRaft metadata log or snapshot is one metadata
record, framed by ``AbstractApiMessageSerde``::

    frameVersion uvarint (always 1) | apiKey uvarint | version uvarint | fields

and the fields are in Kafka's *flexible* encoding, per the JSON schemas of Kafka's
``metadata/src/main/resources/common/metadata/``: integers big-endian, a UUID as 16 bytes,
strings and arrays "compact" (an unsigned varint of length + 1, 0 for null), and after the
plain fields a tagged-field section (uvarint count, then per field uvarint tag, uvarint size,
bytes). The records read here are those a tiered-storage sidecar needs:
:class:`TopicRecord` (2), :class:`PartitionRecord` (3), :class:`ConfigRecord` (4),
:class:`PartitionChangeRecord` (5), :class:`RemoveTopicRecord` (9) and the metadata transaction
markers (KIP-868: :class:`BeginTransactionRecord` 23, :class:`EndTransactionRecord` 24,
:class:`AbortTransactionRecord` 25). Any other api key decodes to
:class:`UnknownMetadataRecord` without its body being read; an unknown tag is kept in the
record's ``unknown_tags`` (and written back by the encoder), never refused.

:func:`decode_metadata_record` raises :class:`~formats.kafka.errors.KafkaTruncatedError` for
bytes that end early, :class:`~formats.kafka.errors.KafkaCorruptError` for impossible values
(bad varint, array longer than its record, bytes left over, a string that is not UTF-8) and
:class:`~formats.kafka.errors.UnsupportedMetadataRecordError` for a frame version other than 1
or a version of a known record newer than the schemas (reading it by an older layout could
misplace a leader). :func:`iter_batch_metadata` walks a batch's records straight to their
metadata records (the record envelope parsed in place, no :class:`~formats.kafka.batch.Record`
built), the hot loop of following a metadata log. :func:`encode_metadata_record` is the
project's own encoder, for tests, fixtures and the benchmark (brokers write the real logs).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple, TypeVar

from formats.kafka.batch import HEADER_SIZE, BatchHeader, records_bytes
from formats.kafka.codecs import NONE
from formats.kafka.errors import (
    KafkaCorruptError,
    KafkaFormatError,
    KafkaTruncatedError,
    UnsupportedMetadataRecordError,
)
from formats.kafka.varint import read_varint, read_varlong

Buffer = bytes | bytearray | memoryview
#: unknown tagged fields, in the order read: ``(tag, raw bytes)``
Tags = tuple[tuple[int, bytes], ...]
Int32s = tuple[int, ...]
_T = TypeVar("_T")

FRAME_VERSION: Final = 1

TOPIC_RECORD: Final = 2
PARTITION_RECORD: Final = 3
CONFIG_RECORD: Final = 4
PARTITION_CHANGE_RECORD: Final = 5
REMOVE_TOPIC_RECORD: Final = 9
BEGIN_TRANSACTION_RECORD: Final = 23
END_TRANSACTION_RECORD: Final = 24
ABORT_TRANSACTION_RECORD: Final = 25

#: the versions read and written, per api key (Kafka's ``validVersions``)
VERSIONS: Final[dict[int, tuple[int, int]]] = {
    TOPIC_RECORD: (0, 0),
    PARTITION_RECORD: (0, 2),
    CONFIG_RECORD: (0, 0),
    PARTITION_CHANGE_RECORD: (0, 2),
    REMOVE_TOPIC_RECORD: (0, 0),
    BEGIN_TRANSACTION_RECORD: (0, 0),
    END_TRANSACTION_RECORD: (0, 0),
    ABORT_TRANSACTION_RECORD: (0, 0),
}
RECORD_NAMES: Final[dict[int, str]] = {
    TOPIC_RECORD: "TopicRecord",
    PARTITION_RECORD: "PartitionRecord",
    CONFIG_RECORD: "ConfigRecord",
    PARTITION_CHANGE_RECORD: "PartitionChangeRecord",
    REMOVE_TOPIC_RECORD: "RemoveTopicRecord",
    BEGIN_TRANSACTION_RECORD: "BeginTransactionRecord",
    END_TRANSACTION_RECORD: "EndTransactionRecord",
    ABORT_TRANSACTION_RECORD: "AbortTransactionRecord",
}

#: ``PartitionChangeRecord.leader``: the partition now has no leader
NO_LEADER: Final = -1
#: ``PartitionChangeRecord.leader``: the leader did not change (the field's default, not written)
NO_LEADER_CHANGE: Final = -2
#: ``PartitionChangeRecord.leader_recovery_state``: unchanged (the field's default)
NO_RECOVERY_STATE_CHANGE: Final = -1

#: ``ConfigRecord.resource_type`` (Kafka's ``ConfigResource.Type``)
RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4

#: control record types of a KRaft log (``ControlRecordType``): the key's second int16
CONTROL_LEADER_CHANGE: Final = 2
CONTROL_SNAPSHOT_HEADER: Final = 3
CONTROL_SNAPSHOT_FOOTER: Final = 4
CONTROL_KRAFT_VERSION: Final = 5
CONTROL_KRAFT_VOTERS: Final = 6

UUID_SIZE: Final = 16
_MAX_STRING: Final = 0x7FFF  # Kafka's generated readers refuse longer strings

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_UUID = struct.Struct(">i16s")
_UUID = struct.Struct(">16s")


# --- the records ---------------------------------------------------------------------------
class TopicRecord(NamedTuple):
    """A topic was created (api key 2): its name and id."""

    name: str
    topic_id: bytes
    version: int = 0
    unknown_tags: Tags = ()


class PartitionRecord(NamedTuple):
    """A partition's full state (api key 3), written when it is created (and in snapshots)."""

    partition_id: int
    topic_id: bytes
    replicas: Int32s
    isr: Int32s
    removing_replicas: Int32s = ()
    adding_replicas: Int32s = ()
    #: the leading broker, -1 for none
    leader: int = NO_LEADER
    #: tag 0: 1 while recovering from an unclean election, else 0
    leader_recovery_state: int = 0
    leader_epoch: int = -1
    partition_epoch: int = -1
    #: version 1+: each replica's log directory (UUIDs)
    directories: tuple[bytes, ...] = ()
    #: version 2+, tag 1 (KIP-966)
    eligible_leader_replicas: Int32s | None = None
    #: version 2+, tag 2 (KIP-966)
    last_known_elr: Int32s | None = None
    version: int = 0
    unknown_tags: Tags = ()


class ConfigRecord(NamedTuple):
    """A config key set (or deleted: ``value`` None) on a resource (api key 4)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None
    version: int = 0
    unknown_tags: Tags = ()


class PartitionChangeRecord(NamedTuple):
    """A change to a partition (api key 5). Every field but the ids is tagged and ``None`` (or
    -2 / -1) when it did not change. A leader other than -2 (-1 included: no leader) bumps the
    partition's leader epoch by one; the record carries no epoch of its own."""

    partition_id: int
    topic_id: bytes
    #: tag 0
    isr: Int32s | None = None
    #: tag 1: -1 no leader now, -2 unchanged, else the new leader
    leader: int = NO_LEADER_CHANGE
    #: tag 2
    replicas: Int32s | None = None
    #: tag 3
    removing_replicas: Int32s | None = None
    #: tag 4
    adding_replicas: Int32s | None = None
    #: tag 5: -1 unchanged
    leader_recovery_state: int = NO_RECOVERY_STATE_CHANGE
    #: version 1+, tag 8
    directories: tuple[bytes, ...] | None = None
    #: version 2+, tag 6
    eligible_leader_replicas: Int32s | None = None
    #: version 2+, tag 7
    last_known_elr: Int32s | None = None
    version: int = 0
    unknown_tags: Tags = ()


class RemoveTopicRecord(NamedTuple):
    """A topic was deleted, with its partitions and its configs (api key 9)."""

    topic_id: bytes
    version: int = 0
    unknown_tags: Tags = ()


class BeginTransactionRecord(NamedTuple):
    """A metadata transaction starts (api key 23, KIP-868): the records up to its end or abort
    take effect together, or not at all."""

    name: str | None = None
    version: int = 0
    unknown_tags: Tags = ()


class EndTransactionRecord(NamedTuple):
    """The open metadata transaction's records take effect (api key 24)."""

    version: int = 0
    unknown_tags: Tags = ()


class AbortTransactionRecord(NamedTuple):
    """The open metadata transaction's records are discarded (api key 25)."""

    reason: str | None = None
    version: int = 0
    unknown_tags: Tags = ()


class UnknownMetadataRecord(NamedTuple):
    """A record of an api key this module does not read (brokers, features, ACLs...): its body
    is left unread."""

    api_key: int
    version: int
    body: bytes = b""


MetadataRecord = (
    TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | BeginTransactionRecord
    | EndTransactionRecord
    | AbortTransactionRecord
    | UnknownMetadataRecord
)

API_KEYS: Final[dict[type, int]] = {
    TopicRecord: TOPIC_RECORD,
    PartitionRecord: PARTITION_RECORD,
    ConfigRecord: CONFIG_RECORD,
    PartitionChangeRecord: PARTITION_CHANGE_RECORD,
    RemoveTopicRecord: REMOVE_TOPIC_RECORD,
    BeginTransactionRecord: BEGIN_TRANSACTION_RECORD,
    EndTransactionRecord: END_TRANSACTION_RECORD,
    AbortTransactionRecord: ABORT_TRANSACTION_RECORD,
}


# --- reading primitives --------------------------------------------------------------------
class _Bad(Exception):
    """Internal: malformed bytes at ``pos`` (``truncated`` when they end early). Turned into a
    typed :mod:`formats.kafka.errors` error, with the source, by the public functions."""

    def __init__(self, message: str, pos: int, truncated: bool = False) -> None:
        super().__init__(message)
        self.pos = pos
        self.truncated = truncated


def _uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's ``readUnsignedVarint``)."""
    value = 0
    shift = 0
    for i in range(5):
        if pos + i >= end:
            raise _Bad("bytes end inside an unsigned varint", pos, truncated=True)
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise _Bad("unsigned varint longer than 5 bytes", pos)


def _fixed(
    unpack: Callable[[Buffer, int], tuple[int]],
    size: int,
    buf: Buffer,
    pos: int,
    end: int,
    what: str,
) -> tuple[int, int]:
    if pos + size > end:
        raise _Bad(f"bytes end inside {what}", pos, truncated=True)
    return unpack(buf, pos)[0], pos + size


def _uuid(buf: Buffer, pos: int, end: int, what: str) -> tuple[bytes, int]:
    if pos + UUID_SIZE > end:
        raise _Bad(f"bytes end inside the {what} UUID", pos, truncated=True)
    return bytes(buf[pos : pos + UUID_SIZE]), pos + UUID_SIZE


def _string(buf: Buffer, pos: int, end: int, what: str) -> tuple[str | None, int]:
    """A compact string (uvarint length + 1, 0 for null)."""
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > _MAX_STRING:
        raise _Bad(f"{what} string of {n} bytes is longer than {_MAX_STRING}", pos)
    if pos + n > end:
        raise _Bad(f"{what} string of {n} bytes runs past its record", pos, truncated=True)
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise _Bad(f"{what} string is not UTF-8", pos) from None


def _required_string(buf: Buffer, pos: int, end: int, what: str) -> tuple[str, int]:
    value, nxt = _string(buf, pos, end, what)
    if value is None:
        raise _Bad(f"{what} is null (not a nullable field)", pos)
    return value, nxt


def _int32s(buf: Buffer, pos: int, end: int, what: str) -> tuple[Int32s | None, int]:
    """A compact array of int32 (uvarint count + 1, 0 for null)."""
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    stop = pos + 4 * n
    if stop > end:
        raise _Bad(f"{what} array of {n} int32s runs past its record", pos, truncated=True)
    return struct.unpack_from(f">{n}i", buf, pos), stop


def _required_int32s(buf: Buffer, pos: int, end: int, what: str) -> tuple[Int32s, int]:
    value, nxt = _int32s(buf, pos, end, what)
    return (() if value is None else value), nxt


def _uuids(buf: Buffer, pos: int, end: int, what: str) -> tuple[tuple[bytes, ...] | None, int]:
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    stop = pos + UUID_SIZE * n
    if stop > end:
        raise _Bad(f"{what} array of {n} UUIDs runs past its record", pos, truncated=True)
    return tuple(bytes(buf[p : p + UUID_SIZE]) for p in range(pos, stop, UUID_SIZE)), stop


def _tags(buf: Buffer, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The tagged-field section: ``(tag, start, stop)`` of each field's bytes."""
    count, pos = _uvarint(buf, pos, end)
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise _Bad(f"tagged field {tag} of {size} bytes runs past its record", pos, True)
        yield tag, pos, stop
        pos = stop
    yield -1, pos, pos


def _tagged_value(
    read: Callable[[Buffer, int, int, str], tuple[_T, int]],
    buf: Buffer,
    start: int,
    stop: int,
    what: str,
) -> _T:
    value, pos = read(buf, start, stop, what)
    if pos != stop:
        raise _Bad(f"tagged field {what} takes {pos - start} of its {stop - start} bytes", start)
    return value


def _tag_i32(buf: Buffer, pos: int, end: int, what: str) -> tuple[int, int]:
    return _fixed(_I32.unpack_from, 4, buf, pos, end, what)


def _tag_i8(buf: Buffer, pos: int, end: int, what: str) -> tuple[int, int]:
    return _fixed(_I8.unpack_from, 1, buf, pos, end, what)


# --- per-record decoders: (buf, pos, end, version) -> record, at ``end`` exactly -------------
def _decode_topic(buf: Buffer, pos: int, end: int, version: int) -> TopicRecord:
    name, pos = _required_string(buf, pos, end, "TopicRecord.Name")
    topic_id, pos = _uuid(buf, pos, end, "TopicRecord.TopicId")
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return TopicRecord(name, topic_id, version, tuple(unknown))


def _decode_partition(buf: Buffer, pos: int, end: int, version: int) -> PartitionRecord:
    if pos + 20 > end:
        raise _Bad("bytes end inside PartitionRecord's ids", pos, truncated=True)
    partition_id, topic_id = _I32_UUID.unpack_from(buf, pos)
    pos += 20
    replicas, pos = _required_int32s(buf, pos, end, "PartitionRecord.Replicas")
    isr, pos = _required_int32s(buf, pos, end, "PartitionRecord.Isr")
    removing, pos = _required_int32s(buf, pos, end, "PartitionRecord.RemovingReplicas")
    adding, pos = _required_int32s(buf, pos, end, "PartitionRecord.AddingReplicas")
    if pos + 12 > end:
        raise _Bad("bytes end inside PartitionRecord's leader and epochs", pos, truncated=True)
    leader, leader_epoch, partition_epoch = struct.unpack_from(">iii", buf, pos)
    pos += 12
    directories: tuple[bytes, ...] = ()
    if version >= 1:
        dirs, pos = _uuids(buf, pos, end, "PartitionRecord.Directories")
        directories = () if dirs is None else dirs
    recovery = 0
    elr: Int32s | None = None
    last_elr: Int32s | None = None
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        if tag == 0:
            recovery = _tagged_value(_tag_i8, buf, start, stop, "LeaderRecoveryState")
        elif tag == 1 and version >= 2:
            elr = _tagged_value(_int32s, buf, start, stop, "EligibleLeaderReplicas")
        elif tag == 2 and version >= 2:
            last_elr = _tagged_value(_int32s, buf, start, stop, "LastKnownElr")
        else:
            unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return PartitionRecord(
        partition_id,
        topic_id,
        replicas,
        isr,
        removing,
        adding,
        leader,
        recovery,
        leader_epoch,
        partition_epoch,
        directories,
        elr,
        last_elr,
        version,
        tuple(unknown),
    )


def _decode_config(buf: Buffer, pos: int, end: int, version: int) -> ConfigRecord:
    resource_type, pos = _fixed(_I8.unpack_from, 1, buf, pos, end, "ConfigRecord.ResourceType")
    resource_name, pos = _required_string(buf, pos, end, "ConfigRecord.ResourceName")
    name, pos = _required_string(buf, pos, end, "ConfigRecord.Name")
    value, pos = _string(buf, pos, end, "ConfigRecord.Value")
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return ConfigRecord(resource_type, resource_name, name, value, version, tuple(unknown))


#: ``>{n}i`` for the short int32 arrays of the fast path
_INT32S: Final = tuple(struct.Struct(f">{n}i") for n in range(32))


def _decode_partition_change(
    buf: Buffer, pos: int, end: int, version: int
) -> PartitionChangeRecord:
    """The common shapes (at most an ISR of < 32 replicas and a leader, one-byte tags and
    sizes) inline; anything else through :func:`_decode_partition_change_fields`."""
    if pos + 21 <= end and buf[pos + 20] <= 2:
        at = pos + 21
        isr: Int32s | None = None
        leader = NO_LEADER_CHANGE
        for _ in range(buf[pos + 20]):
            if at + 2 > end:
                break
            tag = buf[at]
            size = buf[at + 1]
            at += 2
            if tag == 1 and size == 4 and at + 4 <= end:
                leader = _I32.unpack_from(buf, at)[0]
            elif tag == 0 and 0 < size < 0x80 and at + size <= end and buf[at] * 4 == size + 3:
                isr = _INT32S[buf[at] - 1].unpack_from(buf, at + 1)
            else:
                break
            at += size
        else:
            if at == end:
                partition_id, topic_id = _I32_UUID.unpack_from(buf, pos)
                return PartitionChangeRecord(
                    partition_id,
                    topic_id,
                    isr,
                    leader,
                    None,
                    None,
                    None,
                    NO_RECOVERY_STATE_CHANGE,
                    None,
                    None,
                    None,
                    version,
                    (),
                )
    return _decode_partition_change_fields(buf, pos, end, version)


def _decode_partition_change_fields(
    buf: Buffer, pos: int, end: int, version: int
) -> PartitionChangeRecord:
    if pos + 20 > end:
        raise _Bad("bytes end inside PartitionChangeRecord's ids", pos, truncated=True)
    partition_id, topic_id = _I32_UUID.unpack_from(buf, pos)
    pos += 20
    isr: Int32s | None = None
    leader = NO_LEADER_CHANGE
    replicas: Int32s | None = None
    removing: Int32s | None = None
    adding: Int32s | None = None
    recovery = NO_RECOVERY_STATE_CHANGE
    directories: tuple[bytes, ...] | None = None
    elr: Int32s | None = None
    last_elr: Int32s | None = None
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        if tag == 0:
            isr = _tagged_value(_int32s, buf, start, stop, "Isr")
        elif tag == 1:
            leader = _tagged_value(_tag_i32, buf, start, stop, "Leader")
        elif tag == 2:
            replicas = _tagged_value(_int32s, buf, start, stop, "Replicas")
        elif tag == 3:
            removing = _tagged_value(_int32s, buf, start, stop, "RemovingReplicas")
        elif tag == 4:
            adding = _tagged_value(_int32s, buf, start, stop, "AddingReplicas")
        elif tag == 5:
            recovery = _tagged_value(_tag_i8, buf, start, stop, "LeaderRecoveryState")
        elif tag == 8 and version >= 1:
            directories = _tagged_value(_uuids, buf, start, stop, "Directories")
        elif tag == 6 and version >= 2:
            elr = _tagged_value(_int32s, buf, start, stop, "EligibleLeaderReplicas")
        elif tag == 7 and version >= 2:
            last_elr = _tagged_value(_int32s, buf, start, stop, "LastKnownElr")
        else:
            unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return PartitionChangeRecord(
        partition_id,
        topic_id,
        isr,
        leader,
        replicas,
        removing,
        adding,
        recovery,
        directories,
        elr,
        last_elr,
        version,
        tuple(unknown),
    )


def _decode_remove_topic(buf: Buffer, pos: int, end: int, version: int) -> RemoveTopicRecord:
    topic_id, pos = _uuid(buf, pos, end, "RemoveTopicRecord.TopicId")
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return RemoveTopicRecord(topic_id, version, tuple(unknown))


def _decode_optional_text(
    buf: Buffer, pos: int, end: int, what: str
) -> tuple[str | None, Tags, int]:
    text: str | None = None
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        if tag == 0:
            text = _tagged_value(_string, buf, start, stop, what)
        else:
            unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return text, tuple(unknown), pos


def _decode_begin(buf: Buffer, pos: int, end: int, version: int) -> BeginTransactionRecord:
    name, unknown, _ = _decode_optional_text(buf, pos, end, "BeginTransactionRecord.Name")
    return BeginTransactionRecord(name, version, unknown)


def _decode_end(buf: Buffer, pos: int, end: int, version: int) -> EndTransactionRecord:
    unknown = []
    for tag, start, stop in _tags(buf, pos, end):
        if tag < 0:
            pos = start
            break
        unknown.append((tag, bytes(buf[start:stop])))
    _at_end(pos, end)
    return EndTransactionRecord(version, tuple(unknown))


def _decode_abort(buf: Buffer, pos: int, end: int, version: int) -> AbortTransactionRecord:
    reason, unknown, _ = _decode_optional_text(buf, pos, end, "AbortTransactionRecord.Reason")
    return AbortTransactionRecord(reason, version, unknown)


def _at_end(pos: int, end: int) -> None:
    if pos < end:
        raise _Bad(f"{end - pos} bytes left after the record's fields", pos)
    if pos > end:
        raise _Bad("the record's fields run past its end", end, truncated=True)


_DECODERS: Final[dict[int, Callable[[Buffer, int, int, int], MetadataRecord]]] = {
    TOPIC_RECORD: _decode_topic,
    PARTITION_RECORD: _decode_partition,
    CONFIG_RECORD: _decode_config,
    PARTITION_CHANGE_RECORD: _decode_partition_change,
    REMOVE_TOPIC_RECORD: _decode_remove_topic,
    BEGIN_TRANSACTION_RECORD: _decode_begin,
    END_TRANSACTION_RECORD: _decode_end,
    ABORT_TRANSACTION_RECORD: _decode_abort,
}


def _decode_at(buf: Buffer, pos: int, end: int, keep_unknown_body: bool) -> MetadataRecord:
    start = pos
    # the frame: three uvarints, almost always one byte each
    frame = buf[pos] if pos < end else 0x80
    if frame == FRAME_VERSION and pos + 2 < end and buf[pos + 1] < 0x80 and buf[pos + 2] < 0x80:
        api_key = buf[pos + 1]
        version = buf[pos + 2]
        pos += 3
    else:
        frame, pos = _uvarint(buf, pos, end)
        api_key, pos = _uvarint(buf, pos, end)
        version, pos = _uvarint(buf, pos, end)
        if frame != FRAME_VERSION:
            raise UnsupportedMetadataRecordError(
                f"metadata record frame version {frame} (only frame version {FRAME_VERSION} is "
                "read; 0 was KRaft's 2.8 preview)",
                offset=start,
            )
    decoder = _DECODERS.get(api_key)
    if decoder is None:
        if api_key > 0x7FFF or version > 0x7FFF:
            raise _Bad(f"metadata record api key {api_key} version {version} out of range", start)
        return UnknownMetadataRecord(
            api_key, version, bytes(buf[pos:end]) if keep_unknown_body else b""
        )
    low, high = VERSIONS[api_key]
    if not low <= version <= high:
        raise UnsupportedMetadataRecordError(
            f"{RECORD_NAMES[api_key]} version {version} is not one this reader knows "
            f"({low}-{high}): reading it by an older layout could misread the cluster",
            offset=start,
        )
    return decoder(buf, pos, end, version)


def _typed(exc: _Bad, base: int, source: str | None) -> KafkaFormatError:
    cls = KafkaTruncatedError if exc.truncated else KafkaCorruptError
    return cls(f"metadata record: {exc}", offset=base + exc.pos, source=source)


def decode_metadata_record(
    buf: Buffer,
    pos: int = 0,
    end: int | None = None,
    *,
    source: str | None = None,
    keep_unknown_body: bool = False,
) -> MetadataRecord:
    """The metadata record in ``buf[pos:end]`` (a record's whole value). Unknown api keys give
    an :class:`UnknownMetadataRecord` (with its raw body when ``keep_unknown_body``)."""
    stop = len(buf) if end is None else end
    try:
        return _decode_at(buf, pos, stop, keep_unknown_body)
    except _Bad as exc:
        raise _typed(exc, 0, source) from None
    except (IndexError, struct.error) as exc:  # a safety net: every read is bounds-checked
        raise KafkaTruncatedError(
            f"metadata record ends early ({exc})", offset=pos, source=source
        ) from None


# --- a batch's records, straight to metadata records ----------------------------------------
def iter_batch_metadata(
    buf: Buffer, header: BatchHeader, *, source: str | None = None
) -> Iterator[tuple[int, MetadataRecord]]:
    """``(offset, record)`` for each record of the (non-control) batch ``header`` describes,
    decoded in place: the record envelope (``length | attributes | timestampDelta |
    offsetDelta | key | value | headers``) is walked without building a
    :class:`~formats.kafka.batch.Record`, and each value is decoded as a metadata record. The
    batch's CRC is the caller's to check. A null value is corruption (a metadata log has none).
    """
    if header.compression == NONE:
        data: Buffer = buf
        pos = header.position + HEADER_SIZE
        end = header.end
        base = 0
    else:
        data = records_bytes(buf, header, source=source)
        pos = 0
        end = len(data)
        base = header.position
    base_offset = header.base_offset
    last_delta = header.last_offset_delta
    previous = -1
    for _ in range(header.record_count):
        record_start = pos
        try:
            if pos >= end:
                raise _Bad(
                    f"batch at base offset {base_offset} announces {header.record_count} records"
                    " and ends before them",
                    pos,
                    truncated=True,
                )
            length = data[pos]
            if length < 0x80:
                pos += 1
                length = (length >> 1) ^ -(length & 1)
            else:
                length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise _Bad(f"record length {length} does not fit its batch", record_start)
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                _, pos = read_varlong(data, pos)  # timestamp delta: not needed
            b = data[pos]
            if b < 0x80:
                pos += 1
                delta = (b >> 1) ^ -(b & 1)
            else:
                delta, pos = read_varint(data, pos)
            key_len = data[pos]
            if key_len == 1:  # -1: a null key (metadata records have none)
                pos += 1
            else:
                key_len, pos = read_varint(data, pos)
                if key_len < -1 or pos + max(key_len, 0) > record_end:
                    raise _Bad(f"record key length {key_len}", pos)
                pos += max(key_len, 0)
            b = data[pos]
            if b < 0x80:
                pos += 1
                value_len = (b >> 1) ^ -(b & 1)
            else:
                value_len, pos = read_varint(data, pos)
            if value_len < 0:
                raise _Bad(f"metadata record at offset {base_offset + delta} has no value", pos)
            value_end = pos + value_len
            if value_end >= record_end:
                raise _Bad(f"record value of {value_len} bytes runs past its record", pos)
            # the header count follows the value: 0 (metadata records carry no headers)
            if not (data[value_end] == 0 and value_end + 1 == record_end) and not _skip_headers(
                data, value_end, record_end
            ):
                raise _Bad(f"record announces {length} bytes; its fields do not fill them", pos)
            if not 0 <= delta <= last_delta or delta <= previous:
                raise _Bad(f"record offset delta {delta} is out of order in its batch", pos)
            previous = delta
            record = _decode_at(data, pos, value_end, False)
        except _Bad as exc:
            raise _typed(exc, base, source) from None
        except KafkaFormatError as exc:
            if exc.source is None and source is not None:
                raise type(exc)(
                    f"batch at base offset {base_offset}: {exc}", offset=base + pos, source=source
                ) from None
            raise
        except (IndexError, struct.error) as exc:
            raise KafkaTruncatedError(
                f"record of the batch at base offset {base_offset} ends early ({exc})",
                offset=base + record_start,
                source=source,
            ) from None
        yield base_offset + delta, record
        pos = record_end
    if pos != end:
        raise KafkaCorruptError(
            f"batch at base offset {base_offset} has {end - pos} bytes after its "
            f"{header.record_count} records",
            offset=base + pos,
            source=source,
        )


def _skip_headers(data: Buffer, pos: int, end: int) -> bool:
    """True when ``data[pos:end]`` is exactly a record's header list (count, then key/value
    pairs); a metadata log's records have none, but the envelope allows them."""
    try:
        count, pos = read_varint(data, pos)
        if count < 0:
            return False
        for _ in range(count * 2):
            n, pos = read_varint(data, pos)
            if n < -1:
                return False
            pos += max(n, 0)
    except KafkaFormatError:
        return False
    return pos == end


def control_record_type(key: bytes | None) -> int:
    """The type of a control record from its key (``version int16 | type int16``); -1 when the
    key is too short to say (Kafka's ``ControlRecordType.UNKNOWN``)."""
    if key is None or len(key) < 4:
        return -1
    version, kind = struct.unpack_from(">hh", key)
    return int(kind) if version >= 0 else -1


# --- the encoder ----------------------------------------------------------------------------
def _w_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value >= 1 << 32:
        raise KafkaFormatError(f"unsigned varint {value} out of range")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _w_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    raw = value.encode("utf-8")
    if len(raw) > _MAX_STRING:
        raise KafkaFormatError(f"string of {len(raw)} bytes is longer than {_MAX_STRING}")
    _w_uvarint(out, len(raw) + 1)
    out += raw


def _w_int32s(out: bytearray, values: Int32s | None) -> None:
    if values is None:
        out.append(0)
        return
    _w_uvarint(out, len(values) + 1)
    out += struct.pack(f">{len(values)}i", *values)


def _w_uuid(out: bytearray, value: bytes) -> None:
    if len(value) != UUID_SIZE:
        raise KafkaFormatError(f"a UUID is {UUID_SIZE} bytes, not {len(value)}")
    out += value


def _w_uuids(out: bytearray, values: tuple[bytes, ...] | None) -> None:
    if values is None:
        out.append(0)
        return
    _w_uvarint(out, len(values) + 1)
    for value in values:
        _w_uuid(out, value)


def _w_tags(out: bytearray, known: list[tuple[int, bytes]], unknown: Tags) -> None:
    fields = sorted([*known, *unknown])
    tags = [tag for tag, _ in fields]
    if len(set(tags)) != len(tags):
        raise KafkaFormatError(f"tagged fields repeat a tag: {tags}")
    _w_uvarint(out, len(fields))
    for tag, raw in fields:
        _w_uvarint(out, tag)
        _w_uvarint(out, len(raw))
        out += raw


def _tag(write: Callable[[bytearray, object], None], value: object) -> bytes:
    out = bytearray()
    write(out, value)
    return bytes(out)


def _need_version(
    name: str, field: str, value: object, default: object, version: int, since: int
) -> None:
    if version < since and value != default:
        raise KafkaFormatError(f"{name}.{field} needs version {since}+, not {version}")


def _encode_body(record: MetadataRecord, out: bytearray) -> None:
    if isinstance(record, TopicRecord):
        _w_string(out, record.name)
        _w_uuid(out, record.topic_id)
        _w_tags(out, [], record.unknown_tags)
    elif isinstance(record, PartitionRecord):
        v = record.version
        _need_version("PartitionRecord", "Directories", record.directories, (), v, 1)
        _need_version(
            "PartitionRecord", "EligibleLeaderReplicas", record.eligible_leader_replicas, None, v, 2
        )
        _need_version("PartitionRecord", "LastKnownElr", record.last_known_elr, None, v, 2)
        out += _I32.pack(record.partition_id)
        _w_uuid(out, record.topic_id)
        _w_int32s(out, record.replicas)
        _w_int32s(out, record.isr)
        _w_int32s(out, record.removing_replicas)
        _w_int32s(out, record.adding_replicas)
        out += struct.pack(">iii", record.leader, record.leader_epoch, record.partition_epoch)
        if v >= 1:
            _w_uuids(out, record.directories)
        known = []
        if record.leader_recovery_state != 0:
            known.append((0, _I8.pack(record.leader_recovery_state)))
        if record.eligible_leader_replicas is not None:
            known.append((1, _tag(_w_int32s, record.eligible_leader_replicas)))  # type: ignore[arg-type]
        if record.last_known_elr is not None:
            known.append((2, _tag(_w_int32s, record.last_known_elr)))  # type: ignore[arg-type]
        _w_tags(out, known, record.unknown_tags)
    elif isinstance(record, ConfigRecord):
        out += _I8.pack(record.resource_type)
        _w_string(out, record.resource_name)
        _w_string(out, record.name)
        _w_string(out, record.value)
        _w_tags(out, [], record.unknown_tags)
    elif isinstance(record, PartitionChangeRecord):
        v = record.version
        _need_version("PartitionChangeRecord", "Directories", record.directories, None, v, 1)
        _need_version(
            "PartitionChangeRecord",
            "EligibleLeaderReplicas",
            record.eligible_leader_replicas,
            None,
            v,
            2,
        )
        _need_version("PartitionChangeRecord", "LastKnownElr", record.last_known_elr, None, v, 2)
        out += _I32.pack(record.partition_id)
        _w_uuid(out, record.topic_id)
        known = []
        if record.isr is not None:
            known.append((0, _tag(_w_int32s, record.isr)))  # type: ignore[arg-type]
        if record.leader != NO_LEADER_CHANGE:
            known.append((1, _I32.pack(record.leader)))
        for tag, values in (
            (2, record.replicas),
            (3, record.removing_replicas),
            (4, record.adding_replicas),
            (6, record.eligible_leader_replicas),
            (7, record.last_known_elr),
        ):
            if values is not None:
                known.append((tag, _tag(_w_int32s, values)))  # type: ignore[arg-type]
        if record.leader_recovery_state != NO_RECOVERY_STATE_CHANGE:
            known.append((5, _I8.pack(record.leader_recovery_state)))
        if record.directories is not None:
            known.append((8, _tag(_w_uuids, record.directories)))  # type: ignore[arg-type]
        _w_tags(out, known, record.unknown_tags)
    elif isinstance(record, RemoveTopicRecord):
        _w_uuid(out, record.topic_id)
        _w_tags(out, [], record.unknown_tags)
    elif isinstance(record, BeginTransactionRecord | AbortTransactionRecord):
        text = record.name if isinstance(record, BeginTransactionRecord) else record.reason
        known = [] if text is None else [(0, _tag(_w_string, text))]  # type: ignore[arg-type]
        _w_tags(out, known, record.unknown_tags)
    elif isinstance(record, EndTransactionRecord):
        _w_tags(out, [], record.unknown_tags)
    else:  # pragma: no cover - the union is closed
        raise KafkaFormatError(f"not a metadata record: {record!r}")


def encode_metadata_record(record: MetadataRecord) -> bytes:
    """The framed bytes of ``record`` (a record value of a metadata log batch), in the version
    the record names. An :class:`UnknownMetadataRecord` is written with its raw ``body``."""
    out = bytearray()
    _w_uvarint(out, FRAME_VERSION)
    if isinstance(record, UnknownMetadataRecord):
        if record.api_key in VERSIONS:
            raise KafkaFormatError(f"api key {record.api_key} is a known record type")
        _w_uvarint(out, record.api_key)
        _w_uvarint(out, record.version)
        out += record.body
        return bytes(out)
    api_key = API_KEYS[type(record)]
    low, high = VERSIONS[api_key]
    if not low <= record.version <= high:
        raise KafkaFormatError(
            f"{RECORD_NAMES[api_key]} version {record.version} is not one of {low}-{high}"
        )
    _w_uvarint(out, api_key)
    _w_uvarint(out, record.version)
    try:
        _encode_body(record, out)
    except struct.error as exc:
        raise KafkaFormatError(
            f"{RECORD_NAMES[api_key]}: a field is out of range ({exc})"
        ) from None
    return bytes(out)


def snapshot_header_value(last_contained_log_timestamp: int) -> bytes:
    """A ``SnapshotHeaderRecord`` (version 0) as the value of a snapshot's first control
    record."""
    return _I16.pack(0) + _I64.pack(last_contained_log_timestamp) + b"\x00"


def snapshot_footer_value() -> bytes:
    """A ``SnapshotFooterRecord`` (version 0) as the value of a snapshot's last control
    record."""
    return _I16.pack(0) + b"\x00"


def control_key(kind: int) -> bytes:
    """A control record's key: version 0 and ``kind`` (:data:`CONTROL_SNAPSHOT_HEADER`...)."""
    return _I16.pack(0) + _I16.pack(kind)
