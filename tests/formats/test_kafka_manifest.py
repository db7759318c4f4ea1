"""The Kafka manifests' codec (formats/kafka/manifest.py, spec/kafka-manifests.md): the spec's
worked example, round trips, hashed epochs, refusals, the key scheme inferred from a key, and
what a listing says (formats/kafka/discover.py)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from formats.errors import FormatError, InvalidKeyError
from formats.kafka.discover import discover_kafka
from formats.kafka.manifest import (
    KAFKA_KIND,
    SegmentMarker,
    decode_segment_marker_body,
    encode_segment_marker_body,
    infer_key_scheme,
    parse_segment_marker_key,
    parse_watermark_name,
    segment_marker_key,
    watermark_name,
)
from formats.kafka.names import KafkaKeyScheme, scheme_key
from formats.kafka.spans import ObjectChecksums
from formats.manifest import (
    MAX_KEY_BYTES,
    decode_watermark_body,
    encode_watermark_body,
    parse_watermark_key,
    watermark_key,
)

SPEC = Path(__file__).resolve().parents[2] / "spec" / "kafka-manifests.md"
TOPIC_ID = "kSiFaHbWQ1SMNlNdZmwsMQ"
SEGMENT = "hYvOi2CdTLKyamSg2E8MTg"
KINDS = ("log", "index", "timeindex", "leader-epoch-checkpoint")


def _keys(segment: str = SEGMENT, base: int = 1200) -> dict[str, str]:
    return {k: scheme_key(KafkaKeyScheme(), "orders", TOPIC_ID, 3, base, segment, k) for k in KINDS}


MARKER = SegmentMarker(
    topic="orders",
    topic_id=TOPIC_ID,
    partition=3,
    base_offset=1200,
    segment_id=SEGMENT,
    start_offset=1200,
    end_offset=1799,
    max_timestamp=1795814119042,
    log_size=1048480,
    log_crc32c=0x5E1F00C3,
    transform="none",
    kinds=KINDS,
    finished_ms=1795814120197,
    leader_epochs={4: 1200, 5: 1650},
    transform_detail="none",
    keys=_keys(),
    checks={
        "log": "1048480:1048576:Xh8Aww==",
        "index": "96:1048576:HSw7Sg==",
        "timeindex": "144:1048576:d+AfIg==",
        "leader-epoch-checkpoint": "26:1048576:C1yeQQ==",
    },
    started_ms=1795814118512,
)


def _example() -> dict[str, str]:
    block = re.search(r"## 4\. Worked example.*?```text\n(.*?)```", SPEC.read_text(), re.S)
    assert block is not None
    lines = block[1].splitlines()
    return {lines[i].rstrip(":"): lines[i + 1] for i in range(0, len(lines), 2)}


def _key_only(marker: SegmentMarker) -> SegmentMarker:
    """What a marker's key alone carries (the body-only fields empty)."""
    return replace(marker, transform_detail="", keys={}, checks={}, started_ms=None)


def test_the_worked_example_of_the_spec() -> None:
    example = _example()
    assert segment_marker_key(MARKER) == example["marker key"]
    parsed = parse_segment_marker_key(example["marker key"]).marker
    assert parsed == _key_only(MARKER)
    assert encode_segment_marker_body(MARKER).decode() == example["marker body"]
    assert decode_segment_marker_body(example["marker body"].encode()) == MARKER
    # the span checks: one 1 MiB span of the plain .log, whose CRC32C is then the key's c
    log_checks = ObjectChecksums.decode(MARKER.checks["log"])
    assert log_checks.size == MARKER.log_size
    assert log_checks.whole_crc32c == MARKER.log_crc32c
    # a body of an older release (version 1: no checks, no start time) still decodes
    older = json.loads(example["marker body"])
    for name in ("version", "checks", "started_ms"):
        del older[name]
    old = decode_segment_marker_body(json.dumps(older).encode())
    assert old == replace(MARKER, checks={}, started_ms=None)
    name = watermark_name("orders", TOPIC_ID, 3)
    tag = MARKER.segment_uuid
    assert watermark_key(KAFKA_KIND, name, 1799, tag) == example["watermark key"]
    wm = parse_watermark_key(example["watermark key"])
    assert (wm.kind, wm.name, wm.position, wm.tag) == (KAFKA_KIND, name, 1799, tag)
    assert parse_watermark_name(name) == ("orders", TOPIC_ID, 3)
    body = encode_watermark_body(KAFKA_KIND, name, 1799, tag, MARKER.finished_ms)
    assert body.decode() == example["watermark body"]
    assert decode_watermark_body(body) == (KAFKA_KIND, name, 1799, tag, MARKER.finished_ms)
    assert MARKER.keys["log"] in SPEC.read_text()


def test_round_trips_and_hashed_epochs() -> None:
    straddling = replace(
        MARKER, start_offset=1500, max_timestamp=-1, leader_epochs={}, transform="zstdaes"
    )
    key = segment_marker_key(straddling)
    assert key.endswith(".q")
    assert parse_segment_marker_key(key).marker == _key_only(straddling)
    many = replace(MARKER, leader_epochs={e: 1200 + e for e in range(200)})
    key = segment_marker_key(many)
    assert len(key) <= MAX_KEY_BYTES and key.endswith(".q~")
    parsed = parse_segment_marker_key(key)
    assert parsed.marker is None and parsed.segment_id == SEGMENT
    assert decode_segment_marker_body(encode_segment_marker_body(many)) == many


def test_a_marker_file_name_fits_a_file_store() -> None:
    """35 epochs fit in 1,024 bytes but not in one 255-byte file name: hashed to ``~``."""
    some = replace(MARKER, leader_epochs={e: 1200 + e for e in range(35)})
    key = segment_marker_key(some)
    assert len(key.rsplit("/", 1)[1]) <= 255 and key.endswith(".q~")
    few = replace(MARKER, leader_epochs={e: 1200 + e for e in range(3)})
    assert not segment_marker_key(few).endswith("~")


@pytest.mark.parametrize(
    "bad",
    [
        "_offloader/v1/kafka/segments/orders/3/nope",
        "_offloader/v1/kafka/segments/orders/03/" + segment_marker_key(MARKER).rsplit("/", 1)[1],
        segment_marker_key(MARKER).replace(".tnone", ".tgzip"),
        segment_marker_key(MARKER).replace(".klite", ".klitez"),
        segment_marker_key(MARKER).replace(".s1200", ".s01200"),
        segment_marker_key(MARKER).replace(".s1200", ".s1900"),
    ],
)
def test_bad_marker_keys_are_refused(bad: str) -> None:
    with pytest.raises(InvalidKeyError):
        parse_segment_marker_key(bad)


def test_bad_bodies_are_refused() -> None:
    for body in (
        b"\xff",
        b"[]",
        b'{"format":1,"kind":"ledger-marker"}',
        b'{"format":1,"kind":"kafka-segment-marker"}',
    ):
        with pytest.raises(FormatError):
            decode_segment_marker_body(body)


@pytest.mark.parametrize(
    "scheme",
    [
        KafkaKeyScheme(),
        KafkaKeyScheme(prefix="a/b"),
        KafkaKeyScheme(prefix="", hash_prefix_len=4),
        KafkaKeyScheme(prefix="t", hash_prefix_len=32),
        KafkaKeyScheme(prefix="p", cluster="c1", entropy_bits=5),
        KafkaKeyScheme(prefix="p", cluster="c1"),
    ],
)
def test_the_key_scheme_is_inferred_from_a_key(scheme: KafkaKeyScheme) -> None:
    key = scheme_key(scheme, "orders", TOPIC_ID, 3, 1200, SEGMENT, "log")
    found = infer_key_scheme(key, "orders", TOPIC_ID, 3, 1200, SEGMENT)
    assert found is not None
    for partition in range(8):  # the inferred scheme names every partition's keys alike
        assert scheme_key(found, "orders", TOPIC_ID, partition, 0, SEGMENT, "log") == scheme_key(
            scheme, "orders", TOPIC_ID, partition, 0, SEGMENT, "log"
        )
    assert infer_key_scheme("x/" + key + "x", "orders", TOPIC_ID, 3, 1200, SEGMENT) is None


def test_discover_finished_unfinished_duplicates_problems() -> None:
    listed: dict[str, int] = {}
    for key in MARKER.keys.values():
        listed[key] = MARKER.log_size if key.endswith(".log") else 10
    listed[segment_marker_key(MARKER)] = 300
    twin_id = "AAAAAAAAAAAAAAAAAAAAAA"
    twin = replace(MARKER, segment_id=twin_id, keys=_keys(twin_id))
    for key in twin.keys.values():
        listed[key] = MARKER.log_size if key.endswith(".log") else 10
    listed[segment_marker_key(twin)] = 300
    lost = _keys("BBBBBBBBBBBBBBBBBBBBBB", 1800)["log"]
    listed[lost] = 5
    # a marker whose objects are gone
    gone = replace(
        MARKER,
        segment_id="CCCCCCCCCCCCCCCCCCCCCC",
        base_offset=1800,
        start_offset=1800,
        end_offset=1900,
        leader_epochs={},
    )
    listed[segment_marker_key(gone)] = 300
    name = watermark_name("orders", TOPIC_ID, 3)
    listed[watermark_key(KAFKA_KIND, name, 1799, MARKER.segment_uuid)] = 100
    listed[watermark_key(KAFKA_KIND, name, 17, twin.segment_uuid)] = 100
    listed["0b3c7f4e-3a3e-4a4f-9f7e-1b2c3d4e5f60-ledger-7"] = 1  # Pulsar's: not ours
    upload = _keys("DDDDDDDDDDDDDDDDDDDDDD", 1800)["log"]
    found = discover_kafka(sorted(listed.items()), [upload], lambda key: b"")
    part = found.partitions[("orders", TOPIC_ID, 3)]
    # the watermark names MARKER's copy: it is kept over the lower segment id
    assert [s.marker.segment_id for s in part.kept] == [SEGMENT]
    assert [(s.marker.segment_id, k.marker.segment_id) for s, k in part.superseded] == [
        (twin_id, SEGMENT)
    ]
    assert part.watermark == (1799, MARKER.segment_uuid)
    assert [(a.segment_id, a.upload) for a in found.unfinished] == [
        ("BBBBBBBBBBBBBBBBBBBBBB", False),
        ("DDDDDDDDDDDDDDDDDDDDDD", True),
    ]
    assert len(found.problems) == 1 and "missing" in found.problems[0][1]
    none = discover_kafka(sorted(listed.items()), [], lambda key: b"", lambda t: t != "orders")
    assert not none.partitions and not none.unfinished
