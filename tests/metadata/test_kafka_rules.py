"""The decisions both Kafka metadata backends share (``offloader/metadata/kafka_rules.py``).

The filters are checked as pure functions (the SQL text each backend gets) and the row mapping
on a row of each shape; then one script of misuses runs on both backends (SQLite and
PostgreSQL), which must refuse every step with the same error type and message, word for word,
and return the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from offloader.errors import InvalidLedgerState, MetadataError, OffloadConflict
from offloader.metadata import kafka_rules as kr
from offloader.metadata import rules
from offloader.metadata.kafka_base import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    DELETE_STARTED,
    KafkaMetadataStore,
    KafkaRetention,
    NewRemoteSegment,
)
from offloader.policies import TransformPolicy
from tests.metadata.backends import BACKENDS

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def _segment(sid: str, base: int = 0, end: int = 9, size: int = 100) -> NewRemoteSegment:
    return NewRemoteSegment(
        sid, "orders", TOPIC_ID, 0, base, end, 1000, size, {0: base}, {"log": f"k/{sid}.log"}
    )


def test_filters_in_both_dialects() -> None:
    assert kr.topic_filter(rules.SQLITE, None) == ("", ())
    assert kr.topic_filter(rules.POSTGRES, "t") == (" WHERE topic = %s", ("t",))
    assert kr.segment_filter(rules.SQLITE, None, None, None) == ("", [])
    where, args = kr.segment_filter(rules.SQLITE, "t", 3, [COPY_STARTED, COPY_FINISHED])
    assert where == " WHERE topic = ? AND partition = ? AND state IN (?, ?)"
    assert args == ["t", 3, COPY_STARTED, COPY_FINISHED]
    where, args = kr.segment_filter(rules.POSTGRES, None, 0, [DELETE_STARTED])
    assert (where, args) == (" WHERE partition = %s AND state = ANY(%s)", [0, [DELETE_STARTED]])


def test_new_rows_and_records() -> None:
    values = kr.segment_values(_segment("s1"), 77)
    assert len(values) == len(kr.SEGMENT_COLUMNS)
    row = dict(zip(kr.SEGMENT_COLUMNS, values, strict=True)) | {"log_crc32c": 5, "error": None}
    record = kr.need_segment(row, "s1")
    assert (record.segment_id, record.state, record.started_ms, record.updated_ms) == (
        "s1",
        COPY_STARTED,
        77,
        77,
    )
    assert record.leader_epochs == {0: 0} and record.keys == {"log": "k/s1.log"}
    kr.check_transition(record, COPY_FINISHED)
    with pytest.raises(InvalidLedgerState, match="s1 is COPY_SEGMENT_STARTED; it cannot become"):
        kr.check_transition(record, DELETE_FINISHED)
    with pytest.raises(MetadataError, match="remote segment s2 does not exist"):
        kr.need_segment(None, "s2")
    with pytest.raises(OffloadConflict, match="the topic was re-created"):
        kr.check_topic_id("A", "orders", 0, "B")
    assert kr.retention_record("t", None) == KafkaRetention("t")
    assert kr.transform_policy(None) is None


def _refusal(step: Callable[[], object]) -> tuple[str, str] | object:
    try:
        return step()
    except MetadataError as exc:
        return type(exc).__name__, str(exc)


#: what each step of the script below must raise on every backend (None: it succeeds)
EXPECTED: list[tuple[str, str] | None] = [
    ("NotFound", "Kafka partition orders-0 is not known"),
    ("NotFound", "Kafka partition orders-0 is not known"),
    None,
    (
        "OffloadConflict",
        f"orders-0 was recorded with topic id {TOPIC_ID}, the log directory has "
        "AQEBAQEBAQEBAQEBAQEBAQ: the topic was re-created",
    ),
    ("InvalidLedgerState", "segment s0: offsets 9..0, size 100"),
    ("InvalidLedgerState", "segment s0: offsets 0..9, size -1"),
    None,
    ("AlreadyExists", "remote segment s1 already exists"),
    ("NotFound", "remote segment nope does not exist"),
    ("NotFound", "remote segment nope does not exist"),
    (
        "InvalidLedgerState",
        "remote segment s1 is COPY_SEGMENT_STARTED; it cannot become DELETE_SEGMENT_FINISHED",
    ),
    None,
    (
        "InvalidLedgerState",
        "remote segment s1 is COPY_SEGMENT_FINISHED; it cannot become COPY_SEGMENT_FINISHED",
    ),
    ("InvalidLedgerState", "gap 5..4 is empty"),
    (
        "OffloadConflict",
        "offsets 5..12 of orders-0 already have a copy (s1, COPY_SEGMENT_FINISHED, offsets "
        "0..9): one copy per offset range",
    ),
]


def _script(store: KafkaMetadataStore) -> list[Callable[[], object]]:
    return [
        lambda: store.set_partition_error("orders", 0, "boom", 1),
        lambda: store.start_copy(_segment("s0"), 1),
        lambda: store.ensure_partition("orders", 0, TOPIC_ID, 2),
        lambda: store.ensure_partition("orders", 0, "AQEBAQEBAQEBAQEBAQEBAQ", 3),
        lambda: store.start_copy(_segment("s0", base=9, end=0), 4),
        lambda: store.start_copy(_segment("s0", size=-1), 4),
        lambda: store.start_copy(_segment("s1"), 5),
        lambda: store.start_copy(_segment("s1"), 6),
        lambda: store.get_segment("nope"),
        lambda: store.finish_copy("nope", 7),
        lambda: store.finish_delete("s1", 8),
        lambda: store.finish_copy("s1", 9, log_crc32c=42),
        lambda: store.finish_copy("s1", 10),
        lambda: store.record_gap("orders", 0, 5, 4, 11, "deleted"),
        lambda: store.start_copy(_segment("s2", base=5, end=12), 12),
    ]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_both_backends_refuse_alike(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = BACKENDS[backend].open_kafka(BACKENDS[backend].new_location(request, tmp_path))
    try:
        got = [_refusal(step) for step in _script(store)]
        for n, (want, had) in enumerate(zip(EXPECTED, got, strict=True)):
            if want is None:
                assert not isinstance(had, tuple), f"step {n} on {backend}: {had}"
            else:
                assert had == want, f"step {n} on {backend}"
        (seg,) = store.list_segments("orders", 0, states=[COPY_FINISHED])
        assert (seg.segment_id, seg.log_crc32c, seg.updated_ms) == ("s1", 42, 9)
        part = store.get_partition("orders", 0)
        assert part is not None and (part.watermark, part.last_error) == (9, None)
        assert store.list_segments(states=[]) == []
        policy = TransformPolicy("zstd", 3, "aes-256-gcm", "k1")
        assert store.set_topic_transform("orders", policy) == policy
        assert store.get_topic_transform("orders") == policy
        kept = store.set_retention(KafkaRetention("orders", 5, 6, {"x": "y"}))
        assert kept == KafkaRetention("orders", 5, 6) == store.get_retention("orders")
    finally:
        store.close()
