"""KRaft metadata records (formats/kafka/metadata_records.py): byte vectors written by hand
from Kafka's JSON schemas (spec/kafka-metadata.md), round trips, unknown types and tags
skipped, and malformed bytes as typed errors."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import FormatError
from formats.kafka.batch import iter_batch_headers
from formats.kafka.codecs import GZIP, ZSTD
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.errors import (
    KafkaCorruptError,
    KafkaFormatError,
    KafkaTruncatedError,
    UnsupportedMetadataRecordError,
)
from formats.kafka.metadata_records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnknownMetadataRecord,
    control_key,
    control_record_type,
    decode_metadata_record,
    encode_metadata_record,
    iter_batch_metadata,
)

TID = bytes(range(16))


def test_topic_record_bytes() -> None:
    raw = encode_metadata_record(TopicRecord("foo", TID))
    assert raw == b"\x01\x02\x00" + b"\x04foo" + TID + b"\x00"
    assert decode_metadata_record(raw) == TopicRecord("foo", TID)


def test_partition_change_record_bytes_tags_in_order() -> None:
    record = PartitionChangeRecord(1, TID, isr=(2, 3), leader=3)
    raw = encode_metadata_record(record)
    expected = (
        b"\x01\x05\x00"
        + struct.pack(">i", 1)
        + TID
        + b"\x02"  # two tagged fields
        + b"\x00\x09\x03"  # tag 0 (Isr), 9 bytes: compact array of 2
        + struct.pack(">ii", 2, 3)
        + b"\x01\x04"  # tag 1 (Leader), 4 bytes
        + struct.pack(">i", 3)
    )
    assert raw == expected
    assert decode_metadata_record(raw) == record


def test_partition_change_defaults_are_not_written() -> None:
    raw = encode_metadata_record(PartitionChangeRecord(0, TID))
    assert raw == b"\x01\x05\x00" + b"\x00\x00\x00\x00" + TID + b"\x00"
    decoded = decode_metadata_record(raw)
    assert isinstance(decoded, PartitionChangeRecord)
    assert decoded.leader == -2 and decoded.isr is None and decoded.leader_recovery_state == -1


def test_no_leader_is_written_and_read() -> None:
    record = PartitionChangeRecord(4, TID, leader=-1, isr=())
    decoded = decode_metadata_record(encode_metadata_record(record))
    assert isinstance(decoded, PartitionChangeRecord)
    assert decoded.leader == -1 and decoded.isr == ()


def test_partition_record_v0_bytes() -> None:
    record = PartitionRecord(2, TID, (1, 2), (1,), leader=1, leader_epoch=5, partition_epoch=6)
    raw = encode_metadata_record(record)
    expected = (
        b"\x01\x03\x00"
        + struct.pack(">i", 2)
        + TID
        + b"\x03"
        + struct.pack(">ii", 1, 2)
        + b"\x02"
        + struct.pack(">i", 1)
        + b"\x01\x01"  # removing, adding: empty compact arrays
        + struct.pack(">iii", 1, 5, 6)
        + b"\x00"
    )
    assert raw == expected
    assert decode_metadata_record(raw) == record


def test_config_record_null_value() -> None:
    raw = encode_metadata_record(ConfigRecord(2, "t", "retention.ms", None))
    assert raw == b"\x01\x04\x00\x02" + b"\x02t" + b"\x0dretention.ms" + b"\x00" + b"\x00"
    decoded = decode_metadata_record(raw)
    assert isinstance(decoded, ConfigRecord) and decoded.value is None


def test_remove_topic_record_bytes() -> None:
    assert encode_metadata_record(RemoveTopicRecord(TID)) == b"\x01\x09\x00" + TID + b"\x00"


def test_unknown_api_key_is_skipped_not_read() -> None:
    body = b"\xff\xff garbage the reader must not parse"
    raw = b"\x01\x11\x00" + body  # RegisterBrokerRecord (17): not read
    assert decode_metadata_record(raw) == UnknownMetadataRecord(17, 0)
    kept = decode_metadata_record(raw, keep_unknown_body=True)
    assert kept == UnknownMetadataRecord(17, 0, body)
    assert encode_metadata_record(kept) == raw


def test_unknown_tag_is_kept_and_written_back() -> None:
    raw = b"\x01\x09\x00" + TID + b"\x01" + b"\x1e\x03abc"  # tag 30, 3 bytes
    decoded = decode_metadata_record(raw)
    assert decoded == RemoveTopicRecord(TID, unknown_tags=((30, b"abc"),))
    assert encode_metadata_record(decoded) == raw


def test_a_tag_of_a_later_version_is_unknown_in_an_earlier_one() -> None:
    # tag 8 is PartitionChangeRecord.Directories only from version 1
    v1 = encode_metadata_record(PartitionChangeRecord(0, TID, directories=(TID,), version=1))
    v0 = b"\x01\x05\x00" + v1[3:]
    decoded = decode_metadata_record(v0)
    assert isinstance(decoded, PartitionChangeRecord)
    assert decoded.directories is None and decoded.unknown_tags[0][0] == 8


def test_newer_version_of_a_known_record_is_refused() -> None:
    raw = b"\x01\x05\x03" + b"\x00" * 20 + b"\x00"
    with pytest.raises(UnsupportedMetadataRecordError, match="PartitionChangeRecord version 3"):
        decode_metadata_record(raw)


@pytest.mark.parametrize("frame", [0, 2])
def test_other_frame_versions_are_refused(frame: int) -> None:
    raw = bytes([frame]) + encode_metadata_record(RemoveTopicRecord(TID))[1:]
    with pytest.raises(UnsupportedMetadataRecordError, match="frame version"):
        decode_metadata_record(raw)


def test_bytes_left_over_are_corruption() -> None:
    raw = encode_metadata_record(TopicRecord("foo", TID)) + b"\x00"
    with pytest.raises(KafkaCorruptError, match="left after"):
        decode_metadata_record(raw, source="seg.log")


def test_errors_name_the_source() -> None:
    raw = encode_metadata_record(TopicRecord("foo", TID))[:-5]
    with pytest.raises(KafkaTruncatedError, match=r"^seg\.log: "):
        decode_metadata_record(raw, source="seg.log")


def test_array_longer_than_its_record() -> None:
    raw = b"\x01\x03\x00" + b"\x00" * 20 + b"\xff\xff\x03"  # 65534 replicas announced
    with pytest.raises(KafkaTruncatedError, match="Replicas array"):
        decode_metadata_record(raw)


def test_string_that_is_not_utf8() -> None:
    raw = b"\x01\x02\x00\x03\xff\xfe" + TID + b"\x00"
    with pytest.raises(KafkaCorruptError, match="UTF-8"):
        decode_metadata_record(raw)


def test_tagged_field_whose_size_lies() -> None:
    raw = b"\x01\x05\x00" + b"\x00" * 20 + b"\x01" + b"\x01\x05" + b"\x00" * 5
    with pytest.raises(KafkaCorruptError, match="Leader takes 4 of its 5 bytes"):
        decode_metadata_record(raw)


def test_control_record_type() -> None:
    assert control_record_type(control_key(3)) == 3
    assert control_record_type(b"\x00") == -1 and control_record_type(None) == -1


def test_encoder_refuses_fields_of_a_later_version() -> None:
    with pytest.raises(KafkaFormatError, match="needs version 2"):
        encode_metadata_record(PartitionRecord(0, TID, (), (), eligible_leader_replicas=(1,)))


# --- properties ------------------------------------------------------------------------------
i32 = st.integers(-(2**31), 2**31 - 1)
i8 = st.integers(-128, 127)
ids = st.binary(min_size=16, max_size=16)
int32s = st.lists(i32, max_size=6).map(tuple)
maybe_int32s = st.none() | int32s
text = st.text(max_size=40)
unknown_tags = st.dictionaries(st.integers(9, 300), st.binary(max_size=8), max_size=3).map(
    lambda d: tuple(sorted(d.items()))
)


@st.composite
def partition_records(draw: st.DrawFn) -> PartitionRecord:
    version = draw(st.integers(0, 2))
    return PartitionRecord(
        draw(i32),
        draw(ids),
        draw(int32s),
        draw(int32s),
        draw(int32s),
        draw(int32s),
        draw(i32),
        draw(i8),
        draw(i32),
        draw(i32),
        draw(st.lists(ids, max_size=3).map(tuple)) if version >= 1 else (),
        draw(maybe_int32s) if version >= 2 else None,
        draw(maybe_int32s) if version >= 2 else None,
        version,
        draw(unknown_tags),
    )


@st.composite
def partition_change_records(draw: st.DrawFn) -> PartitionChangeRecord:
    version = draw(st.integers(0, 2))
    return PartitionChangeRecord(
        draw(i32),
        draw(ids),
        draw(maybe_int32s),
        draw(i32),
        draw(maybe_int32s),
        draw(maybe_int32s),
        draw(maybe_int32s),
        draw(i8),
        draw(st.none() | st.lists(ids, max_size=3).map(tuple)) if version >= 1 else None,
        draw(maybe_int32s) if version >= 2 else None,
        draw(maybe_int32s) if version >= 2 else None,
        version,
        draw(unknown_tags),
    )


records: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(TopicRecord, text, ids, st.just(0), unknown_tags),
    partition_records(),
    st.builds(ConfigRecord, i8, text, text, st.none() | text, st.just(0), unknown_tags),
    partition_change_records(),
    st.builds(RemoveTopicRecord, ids, st.just(0), unknown_tags),
    st.builds(BeginTransactionRecord, st.none() | text, st.just(0), unknown_tags),
    st.builds(EndTransactionRecord, st.just(0), unknown_tags),
    st.builds(AbortTransactionRecord, st.none() | text, st.just(0), unknown_tags),
    st.builds(
        UnknownMetadataRecord,
        st.sampled_from([0, 1, 12, 17, 20, 21, 200]),
        st.integers(0, 5),
        st.binary(max_size=20),
    ),
)


@given(records)
@settings(max_examples=400, deadline=None)
def test_round_trip(record: MetadataRecord) -> None:
    raw = encode_metadata_record(record)
    decoded = decode_metadata_record(raw, keep_unknown_body=True)
    assert decoded == record
    assert encode_metadata_record(decoded) == raw


@given(records, st.data())
@settings(max_examples=300, deadline=None)
def test_every_prefix_is_a_typed_error(record: MetadataRecord, data: st.DataObject) -> None:
    raw = encode_metadata_record(record)
    cut = data.draw(st.integers(0, len(raw) - 1))
    if isinstance(record, UnknownMetadataRecord) and cut >= 3:
        return  # an unknown record's body is not read: any length is fine
    with pytest.raises(FormatError):
        decode_metadata_record(raw[:cut])


@given(st.binary(max_size=64))
@settings(max_examples=500, deadline=None)
def test_garbage_never_escapes_as_another_exception(raw: bytes) -> None:
    with contextlib.suppress(FormatError):
        decode_metadata_record(raw)


@given(st.lists(records, min_size=1, max_size=20), st.sampled_from([0, GZIP, ZSTD]))
@settings(max_examples=100, deadline=None)
def test_a_batch_of_records_decodes_in_place(batch: list[MetadataRecord], codec: int) -> None:
    raw = encode_batch(
        [NewRecord(1000 + i, None, encode_metadata_record(r)) for i, r in enumerate(batch)],
        base_offset=40,
        codec=codec,
    )
    buf = b"\x00" * 7 + raw  # a batch that does not start the buffer
    (header,) = iter_batch_headers(buf, 7)
    got = list(iter_batch_metadata(buf, header))
    assert [offset for offset, _ in got] == list(range(40, 40 + len(batch)))
    expected = [
        UnknownMetadataRecord(r.api_key, r.version) if isinstance(r, UnknownMetadataRecord) else r
        for r in batch
    ]
    assert [r for _, r in got] == expected


def test_a_record_with_a_null_value_in_a_batch() -> None:
    raw = encode_batch([NewRecord(0, None, None)], base_offset=0)
    (header,) = iter_batch_headers(raw)
    with pytest.raises(KafkaCorruptError, match="has no value"):
        list(iter_batch_metadata(raw, header, source="x.log"))


def test_a_bad_record_in_a_batch_names_the_source() -> None:
    value = encode_metadata_record(TopicRecord("foo", TID))
    raw = encode_batch([NewRecord(0, None, value[:-3])], base_offset=9)
    (header,) = iter_batch_headers(raw)
    with pytest.raises(KafkaFormatError, match=r"^x\.log: "):
        list(iter_batch_metadata(raw, header, source="x.log"))


@given(st.binary(min_size=1, max_size=40), st.integers(0, 200))
@settings(max_examples=300, deadline=None)
def test_garbage_records_in_a_batch_are_typed_errors(junk: bytes, at: int) -> None:
    good = encode_batch(
        [NewRecord(0, None, encode_metadata_record(TopicRecord("t", TID)))] * 3, base_offset=0
    )
    # overwrite part of the records region (after the 61-byte header); the CRC is not checked
    at = 61 + at % (len(good) - 61)
    raw = good[:at] + junk + good[at + len(junk) :]
    raw = raw[: len(good)] if len(raw) > len(good) else raw + b"\x00" * (len(good) - len(raw))
    (header,) = iter_batch_headers(raw, verify_crc=False)
    with contextlib.suppress(FormatError):
        list(iter_batch_metadata(raw, header))


# --- the worked examples of spec/kafka-metadata.md (run by tests/formats/test_spec_vectors.py)
def _check_vector(expected: MetadataRecord) -> Callable[[bytes], None]:
    def check(raw: bytes) -> None:
        assert encode_metadata_record(expected) == raw
        assert decode_metadata_record(raw) == expected

    return check


KRAFT_CHECKS: dict[str, Callable[[Any], None]] = {
    "kraft-topic-record": _check_vector(TopicRecord("orders", TID)),
    "kraft-config-record": _check_vector(
        ConfigRecord(2, "orders", "remote.storage.enable", "true")
    ),
    "kraft-partition-change-record": _check_vector(
        PartitionChangeRecord(1, TID, isr=(2, 3), leader=3)
    ),
}


@given(partition_change_records())
@settings(max_examples=300, deadline=None)
def test_the_fast_partition_change_path_agrees_with_the_general_one(
    record: PartitionChangeRecord,
) -> None:
    from formats.kafka.metadata_records import (
        _decode_partition_change,
        _decode_partition_change_fields,
    )

    raw = encode_metadata_record(record)
    assert _decode_partition_change(raw, 3, len(raw), record.version) == (
        _decode_partition_change_fields(raw, 3, len(raw), record.version)
    )
    simple = PartitionChangeRecord(record.partition_id, record.topic_id, record.isr, record.leader)
    raw = encode_metadata_record(simple)
    assert _decode_partition_change(raw, 3, len(raw), 0) == simple
