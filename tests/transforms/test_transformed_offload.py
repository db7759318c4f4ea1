"""Offload and read back transformed objects through the engine (local store; the S3 tier is
in test_transformed_s3.py): round trips, one GET per random read, Pulsar's version refusal,
tampering, wrong and missing keys, the already-compressed rule, verification."""

from __future__ import annotations

import json
import logging
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from formats.errors import UnsupportedVersionError
from formats.extension import TAG_TRANSFORM
from formats.index import decode_index
from formats.keys import check_format_version, data_key, index_key
from formats.transform import CHUNKED_FORMAT_VERSION, transform_of
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.errors import ChunkAuthenticationError, MissingKeyError, WrongKeyError
from offloader.read.handle import ReadHandle
from tests.transforms.helpers import (
    NS,
    TOPIC,
    CountingStore,
    broker,
    json_payloads,
    random_payloads,
    replace_object,
)

ZSTD_AES = TransformPolicy("zstd", None, "aes-256-gcm", None)


@pytest.fixture()
def off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Offloader]:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    o = Offloader.from_settings(tmp_path / "home", broker=broker())
    o.create_namespace(NS)
    yield o
    o.close()


def _create_key(off: Offloader, key_id: str = "k1") -> None:
    create_key(off.runtime.home, key_id, activate=True)


def _offloaded(off: Offloader, ledger_id: int = 0) -> tuple[str, int]:
    (record,) = [r for r in off.runtime.meta.list_ledgers(TOPIC) if r.ledger_id == ledger_id]
    assert record.offload is not None and record.offload.complete
    return record.offload.uuid, record.ledger_id


def _produce_and_offload(off: Offloader, payloads: list[bytes]) -> None:
    off.produce(TOPIC, payloads)
    off.offload_prefix(TOPIC, position=Position(len(payloads) // 300, 0))


@pytest.mark.parametrize(
    "policy",
    [ZSTD_AES, TransformPolicy("zstd"), TransformPolicy(encryption="aes-256-gcm", key_id="k1")],
)
def test_round_trip_and_format_markers(off: Offloader, policy: TransformPolicy) -> None:
    _create_key(off)
    off.set_offload_transform(NS, policy)
    payloads = json_payloads(300) + random_payloads(300)
    _produce_and_offload(off, payloads)
    records = list(off.read(TOPIC, count=600))
    assert [e.payload for e in records] == payloads
    # every chunk is checked (CRC32C, GCM tag) before its entries are returned
    assert {(e.tier, e.verified) for e in records} == {("offloaded", True)}
    store = off.runtime.store
    for ledger in (0, 1):
        uuid, _ = _offloaded(off, ledger)
        head = store.head(data_key(uuid, ledger))
        assert head.metadata["s3managedledgeroffloaderformatversion"] == CHUNKED_FORMAT_VERSION
        with pytest.raises(UnsupportedVersionError, match="Invalid object version"):
            check_format_version(head.metadata, data_key(uuid, ledger))  # Pulsar refuses
        index = decode_index(store.get(index_key(uuid, ledger)).data)
        assert index.extension is not None
        section = index.extension.section(TAG_TRANSFORM)
        assert section is not None and section.critical
        table = transform_of(index.extension, index.data_object_length)
        assert table is not None and table.stored_size == head.size
        assert table.encrypted == policy.encrypted
    (compressible_uuid, _), (random_uuid, _) = _offloaded(off, 0), _offloaded(off, 1)
    if policy.compression == "zstd":
        compressible = store.head(data_key(compressible_uuid, 0)).size
        assert compressible < 0.4 * sum(map(len, payloads[:300]))
    # random payloads: compression does not pay, the chunks are stored as they are
    assert store.head(data_key(random_uuid, 1)).size >= sum(map(len, payloads[300:]))
    results = off.verify(checksums=True)
    assert [r.ok for r in results] == [True, True]


def test_a_random_single_entry_read_costs_one_data_get(off: Offloader) -> None:
    _create_key(off)
    off.set_offload_transform(NS, ZSTD_AES)
    payloads = json_payloads(300)
    # info lines too, whatever level an earlier CLI test configured structlog with
    wrapper_class = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            _produce_and_offload(off, payloads)
    finally:
        structlog.configure(wrapper_class=wrapper_class)
    (done,) = [e for e in logs if e["event"] == "offload finished"]
    assert done["stored_size"] < 0.4 * done["data_size"]  # the data size is the original's
    expected = done["data_size"] / 1e6 / max(done["seconds"], 1e-3)
    assert done["mb_per_s"] == pytest.approx(expected, rel=0.2, abs=0.2)
    uuid, ledger = _offloaded(off)
    counting = CountingStore(off.runtime.store)
    settings = off.runtime.broker.offload
    rng = random.Random(7)
    for entry in rng.sample(range(300), 25):
        before = counting.data_gets
        with ReadHandle.open(counting, ledger, uuid, settings) as handle:  # type: ignore[arg-type]
            assert handle.read_entry(entry) == payloads[entry]
        assert counting.data_gets - before == 1
    assert counting.data_bytes / 25 <= 2 * settings.transform_chunk_size


def test_tampered_stored_bytes_fail_loudly(off: Offloader) -> None:
    _create_key(off)
    off.set_offload_transform(NS, ZSTD_AES)
    payloads = json_payloads(300)
    _produce_and_offload(off, payloads)
    uuid, ledger = _offloaded(off)
    store = off.runtime.store
    key = data_key(uuid, ledger)
    original = store.get(key)
    settings = off.runtime.broker.offload
    rng = random.Random(1)
    for position in rng.sample(range(len(original.data)), 12):
        bad = bytearray(original.data)
        bad[position] ^= 0x40
        replace_object(store, key, bytes(bad), original.metadata)
        with (
            pytest.raises(ChunkAuthenticationError),
            ReadHandle.open(store, ledger, uuid, settings) as handle,
        ):
            handle.read(0, 299)
    replace_object(store, key, original.data, original.metadata)
    with ReadHandle.open(store, ledger, uuid, settings) as handle:
        assert [e.payload for e in handle.read(0, 299)] == payloads


def test_missing_and_wrong_keys_are_typed_errors(off: Offloader) -> None:
    _create_key(off, "k1")
    off.set_offload_transform(NS, ZSTD_AES)
    _produce_and_offload(off, json_payloads(300))
    uuid, ledger = _offloaded(off)
    ring = off.runtime.home / "keys"
    doc = json.loads(ring.read_text())
    secret = doc["keys"][0]["key"]
    settings = off.runtime.broker.offload
    doc["keys"][0]["id"] = doc["active"] = "other"
    ring.write_text(json.dumps(doc))
    with pytest.raises(MissingKeyError, match="'k1'") as missing:
        ReadHandle.open(off.runtime.store, ledger, uuid, settings)
    assert secret not in str(missing.value)
    doc["keys"][0]["id"] = doc["active"] = "k1"
    doc["keys"][0]["key"] = "A" * 43 + "="
    ring.write_text(json.dumps(doc))
    with pytest.raises(WrongKeyError, match="'k1'") as wrong:
        ReadHandle.open(off.runtime.store, ledger, uuid, settings)
    assert secret not in str(wrong.value)


def _pulsar_message(codec: int, body: bytes) -> bytes:
    meta = b"\x0a\x01p\x10\x01\x18\x05\x40" + bytes([codec])
    return b"\x0e\x01\x00\x00\x00\x00" + struct.pack(">I", len(meta)) + meta + body


def test_already_compressed_entries_are_not_compressed_again(off: Offloader) -> None:
    off.set_offload_transform(NS, TransformPolicy("zstd"))
    # compressible bytes, but the metadata says LZ4: stored as they are
    flagged = [_pulsar_message(1, b"z" * 1000) for _ in range(300)]
    plain = [_pulsar_message(0, b"z" * 1000) for _ in range(300)]
    _produce_and_offload(off, flagged + plain)
    store = off.runtime.store
    tables = []
    for ledger in (0, 1):
        uuid, _ = _offloaded(off, ledger)
        index = decode_index(store.get(index_key(uuid, ledger)).data)
        tables.append(transform_of(index.extension))
    assert tables[0] is not None and tables[1] is not None
    assert all(c.flags == 0 for c in tables[0].chunks)
    assert all(c.flags == 1 for c in tables[1].chunks)
    assert [e.payload for e in off.read(TOPIC, count=600)] == flagged + plain


def test_identity_policy_writes_pulsar_objects(off: Offloader) -> None:
    off.set_offload_transform(NS, TransformPolicy())
    _produce_and_offload(off, json_payloads(300))
    uuid, ledger = _offloaded(off)
    head = off.runtime.store.head(data_key(uuid, ledger))
    check_format_version(head.metadata, data_key(uuid, ledger))
    index = decode_index(off.runtime.store.get(index_key(uuid, ledger)).data)
    assert transform_of(index.extension) is None
    assert head.size == index.data_object_length
