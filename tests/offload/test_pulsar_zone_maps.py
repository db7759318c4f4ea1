"""Zone maps (TAG_ZONE_MAPS): what a block's messages span, its codec, and the writer's."""

from __future__ import annotations

from pathlib import Path

import pytest

from formats.errors import CorruptDataError, FormatError, TruncatedError, UnsupportedVersionError
from formats.extension import TAG_TRANSFORM, TAG_ZONE_MAPS
from formats.index import decode_index
from formats.pulsar import Encryptor, OutgoingMessage, encode_chunks, encode_entry, generate_rsa_pem
from formats.pulsar.zone_maps import (
    BlockZone,
    decode_zone_maps,
    encode_zone_maps,
    zone_of_entries,
)
from offloader.store import open_store
from tests.cli.helpers import ok


def entry(publish: int, *events: int | None, **kw: object) -> bytes:
    msgs = [OutgoingMessage(b"v", event_time=e) for e in events] or [OutgoingMessage(b"v")]
    return encode_entry(msgs, producer_name="p", sequence_id=0, publish_time=publish, **kw)  # type: ignore[arg-type]


def test_zone_of_entries() -> None:
    zone = zone_of_entries([entry(50, 7, None, 3), entry(20), entry(90, 11)])
    assert zone == BlockZone((20, 90), (3, 11))
    assert zone_of_entries([entry(5)]) == BlockZone((5, 5), None)
    assert zone_of_entries([entry(5, marker_type=3)]) == BlockZone(None, None)
    assert zone_of_entries([]) == BlockZone(None, None)
    assert zone_of_entries([entry(5), b"not a pulsar entry"]) is None
    _, public = generate_rsa_pem(1024)
    secret = entry(8, 1, encryptor=Encryptor(public, "k"))
    assert zone_of_entries([secret, entry(9, 4)]) == BlockZone((8, 9), (4, 4), True)
    chunks = encode_chunks(
        OutgoingMessage(b"x" * 100, event_time=77),
        chunk_size=40, producer_name="p", sequence_id=1, publish_time=66,
    )  # fmt: skip
    assert zone_of_entries(chunks[1:]) == BlockZone((66, 66), (77, 77))


def test_codec_round_trip_and_typed_errors() -> None:
    zones = (BlockZone((1, 2), (3, 4)), None, BlockZone(None, None, True), BlockZone((-5, 9), None))
    payload = encode_zone_maps(zones)
    assert decode_zone_maps(payload, 4) == zones
    with pytest.raises(CorruptDataError):
        decode_zone_maps(payload, 3)
    with pytest.raises(TruncatedError):
        decode_zone_maps(payload[:3], 4)
    with pytest.raises(CorruptDataError):
        decode_zone_maps(payload[:-1], 4)
    with pytest.raises(UnsupportedVersionError):
        decode_zone_maps(b"\x02" + payload[1:], 4)
    bad = bytearray(payload)
    bad[5] = 0xF1  # unknown flag bits
    with pytest.raises(CorruptDataError):
        decode_zone_maps(bytes(bad), 4)
    inverted = encode_zone_maps([BlockZone((9, 1), None)])
    with pytest.raises(CorruptDataError):
        decode_zone_maps(inverted, 1)
    for cut in range(len(payload)):
        with pytest.raises(FormatError):
            decode_zone_maps(payload[:cut], 4)


def _indexes(home: Path) -> list[bytes]:
    store = open_store(f"file://{home / 'objects'}")
    try:
        keys = sorted(p.name for p in (home / "objects").glob("*-index"))
        return [bytes(store.get(key).data) for key in keys]
    finally:
        store.close()


def test_writer_records_zone_maps_for_pulsar_entries_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", "t/ns")
    small = ("--max-entries-per-ledger", "30", "--min-rollover-time", "0",
             "--max-block-size", "2K")  # fmt: skip
    ok(home, "topics", "produce", "t/ns/m", "--synthetic", "300", "--size", "30",
       "--format", "pulsar", "--batch-size", "5", "--compression", "lz4", *small)  # fmt: skip
    ok(home, "topics", "produce", "t/ns/raw", "--synthetic", "40", "--size", "30", *small)
    ok(
        home,
        "topics",
        "offload-prefix",
        "t/ns/m",
        "--size-threshold",
        "0",
        "--max-block-size",
        "2K",
    )
    ok(home, "topics", "offload-prefix", "t/ns/raw", "--size-threshold", "0",
       "--max-block-size", "2K")  # fmt: skip
    with_zones = without = 0
    for body in _indexes(home):
        index = decode_index(memoryview(body))
        assert index.extension is not None
        section = index.extension.section(TAG_ZONE_MAPS)
        if section is None:
            without += 1
            continue
        with_zones += 1
        zones = decode_zone_maps(section.payload, len(index.entries))
        assert len(zones) > 1 and all(z is not None and z.publish is not None for z in zones)
        spans = [z.publish for z in zones if z is not None and z.publish is not None]
        assert spans == sorted(spans)
    assert with_zones >= 1 and without >= 1


def test_transformed_ledgers_get_zone_maps_too(tmp_path: Path) -> None:
    """A compressed + encrypted namespace's ledgers of Pulsar messages carry their zone maps
    (the pulsar-messages source skips their blocks as it does plain ones)."""
    home = tmp_path / "home"
    ok(home, "namespaces", "create", "t/ns")
    ok(home, "keys", "create", "k1")
    ok(home, "namespaces", "set-offload-transform", "t/ns", "--compression", "zstd",
       "--encryption", "aes-256-gcm")  # fmt: skip
    ok(home, "topics", "produce", "t/ns/m", "--synthetic", "300", "--size", "30",
       "--format", "pulsar", "--batch-size", "5", "--max-entries-per-ledger", "30",
       "--min-rollover-time", "0", "--max-block-size", "2K")  # fmt: skip
    ok(home, "topics", "offload-prefix", "t/ns/m", "--size-threshold", "0",
       "--max-block-size", "2K")  # fmt: skip
    bodies = _indexes(home)
    assert len(bodies) >= 2
    for body in bodies:
        index = decode_index(memoryview(body))
        assert index.extension is not None
        assert index.extension.section(TAG_TRANSFORM) is not None
        section = index.extension.section(TAG_ZONE_MAPS)
        assert section is not None
        zones = decode_zone_maps(section.payload, len(index.entries))
        assert len(zones) > 1 and all(z is not None and z.publish is not None for z in zones)


def test_pulsar_reader_reads_an_object_with_zone_maps(tmp_path: Path) -> None:
    """The writer's zone maps live where Pulsar's reader does not look: read the same ledger
    with Pulsar's algorithm (no extension used) and with ours, entry by entry and streamed."""
    from formats.keys import index_key
    from offloader.ledgers.base import InMemoryLedger
    from offloader.offload.writer import offload_ledger
    from offloader.read.handle import ReadHandle
    from offloader.store.local import LocalObjectStore
    from tests.offload.conftest import settings_for

    uuid = "0b7e2c1d-9a3f-4e55-8c1a-2f6b3d4c5e6f"
    payloads = [entry(1_000 + i, 2_000 + i, None) for i in range(400)]
    store = LocalObjectStore(tmp_path / "objects")
    settings = settings_for("file", 4096, write_index_extension=True)
    offload_ledger(InMemoryLedger(9, payloads), store, uuid, settings)
    index = decode_index(memoryview(bytes(store.get(index_key(uuid, 9)).data)))
    assert index.extension is not None
    section = index.extension.section(TAG_ZONE_MAPS)
    assert section is not None and len(index.entries) > 3
    zones = decode_zone_maps(section.payload, len(index.entries))
    assert zones[0] == BlockZone((1_000, 1_000 + index.entries[1].entry_id - 1),
                                 (2_000, 2_000 + index.entries[1].entry_id - 1))  # fmt: skip
    for emulate in (True, False):
        with ReadHandle.open(store, 9, uuid, settings, emulate_pulsar=emulate) as handle:
            assert handle.has_extension is not emulate
            assert [handle.read_entry(i) for i in (0, 137, 399)] == [
                payloads[0], payloads[137], payloads[399]
            ]  # fmt: skip
            streamed = [bytes(e.payload) for e in handle.iter_entries(0, 399)]
            assert streamed == payloads
    store.close()
