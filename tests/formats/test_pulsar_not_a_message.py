"""``not_a_message``: telling an entry that is not a Pulsar message at all from one that may
be, from its first bytes (what the ``pulsar-messages`` source checks on the driver)."""

from __future__ import annotations

import random

import pytest

from formats.golden_payloads import drawn_length_payloads
from formats.pulsar import NotPulsarMessagesError, OutgoingMessage, encode_entry, frame_entry
from formats.pulsar.compression import LZ4
from formats.pulsar.entry import not_a_message, parse_entry
from formats.pulsar.metadata import BrokerEntryMetadata
from tests.formats.test_pulsar_golden import MANIFEST, entries_of


def _messages() -> list[bytes]:
    """Real entries of every shape: the official client's captures and our encoder's, with
    broker entry metadata and without a checksum (very old clients)."""
    out = [e for case in MANIFEST["cases"] for e in entries_of(case)]
    single = encode_entry(
        [OutgoingMessage(b"v", key="k")], producer_name="p", sequence_id=1, publish_time=5
    )
    batch = encode_entry(
        [OutgoingMessage(b"x" * 300), OutgoingMessage(None)],
        producer_name="p",
        sequence_id=2,
        publish_time=6,
        compression=LZ4,
    )
    md = parse_entry(single).metadata
    payload = parse_entry(single).payload
    out += [single, batch, frame_entry(md, payload, checksum=False)]
    out.append(frame_entry(md, payload, broker_metadata=BrokerEntryMetadata(broker_timestamp=9)))
    return out


def test_every_message_entry_and_every_prefix_of_one_may_be_a_message() -> None:
    for entry in _messages():
        assert not_a_message(entry) is None
        for cut in range(len(entry)):
            assert not_a_message(entry[:cut], len(entry)) is None, (cut, entry[:40])


def test_raw_payloads_are_not_messages_with_the_reason() -> None:
    reason = not_a_message(b"entry-0")
    assert reason is not None
    assert "metadata of 1701737586 bytes does not fit the entry (3 bytes left" in reason
    assert "no Pulsar magic" in reason
    assert not_a_message(b"") == "the entry is empty"
    assert not_a_message(b"ab") == "an entry of 2 bytes ends inside the metadata size"
    # a plausible size, but what follows is no MessageMetadata
    assert "metadata does not decode" in str(not_a_message(b"\x00\x00\x00\x02\x08\x01rest"))
    # magics announcing more than the entry holds
    assert "broker entry metadata of 4096 bytes" in str(not_a_message(b"\x0e\x02\x00\x00\x10\x00"))
    assert "ends inside its checksum" in str(not_a_message(b"\x0e\x01\x00"))
    # judged on a prefix: the whole entry's length decides whether the size fits (an entry of
    # 2 GiB could hold 1701737586 bytes of metadata; the prefix ends before it: no verdict)
    assert not_a_message(b"entry-0", 1 << 31) is None
    assert not_a_message(b"\x00\x00\x00\x10", 12) is not None
    assert not_a_message(b"\x00\x00\x00\x10", 100) is None


def test_raw_payloads_of_every_size_are_told_apart() -> None:
    rng = random.Random(11)
    raw = list(drawn_length_payloads(3, 500, 0, 2000)) + [rng.randbytes(64) for _ in range(500)]
    raw += [f"entry-{i}".encode() for i in range(200)]
    assert all(not_a_message(p) is not None for p in raw)


def test_the_error_names_the_ledger_its_source_and_what_to_do() -> None:
    err = NotPulsarMessagesError(
        "metadata of 1701737586 bytes does not fit the entry",
        ledger_id=12,
        entry_id=0,
        source="managed ledger public/default/persistent/raw",
        hint="read its entries with the offloaded-ledger source",
    )
    assert str(err) == (
        "ledger 12 (managed ledger public/default/persistent/raw) entry 0 is not in Pulsar "
        "message format: metadata of 1701737586 bytes does not fit the entry; read its "
        "entries with the offloaded-ledger source"
    )
    assert (err.ledger_id, err.entry_id) == (12, 0)
    bare = NotPulsarMessagesError("the entry is empty")
    located = bare.located(3, 4)
    assert isinstance(located, NotPulsarMessagesError)
    assert str(located) == "ledger 3 entry 4 is not in Pulsar message format: the entry is empty"
    with pytest.raises(NotPulsarMessagesError):
        raise located
