"""Pulsar-format messages on topics: the encoder side of ``topics produce --format pulsar`` and
the decoder side of ``topics read --decode pulsar`` (the facade calls these).

Values become messages, ``batch_size`` of them per entry (one batched entry; ``batch_size`` 1
writes plain, non-batched entries as a non-batching producer does), compressed with the chosen
codec; entries read back are decoded by :mod:`formats.pulsar` with chunks reassembled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from formats.pulsar import (
    Message,
    OutgoingMessage,
    codec_number,
    encode_entry,
    iter_messages,
)
from formats.pulsar.errors import MessageEncodeError
from offloader.errors import ConfigError

__all__ = ["MessageOptions", "MessageRecord", "decode_records", "encode_values"]

#: the producer name of entries written by ``topics produce --format pulsar``
DEFAULT_PRODUCER = "ledger-offloader"
MAX_BATCH_SIZE = 100_000


@dataclass(frozen=True)
class MessageOptions:
    """How ``produce_messages`` encodes values."""

    batch_size: int = 1
    compression: str = "none"
    key: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    producer_name: str = DEFAULT_PRODUCER

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ConfigError(f"batch size {self.batch_size} is outside 1..{MAX_BATCH_SIZE}")
        try:
            codec_number(self.compression)
        except MessageEncodeError as exc:
            raise ConfigError(exc.reason) from None


@dataclass(frozen=True)
class MessageRecord:
    """One decoded message of a topic."""

    topic: str
    message: Message


def encode_values(
    values: Iterable[bytes],
    options: MessageOptions,
    clock_ms: Callable[[], int],
    counter: list[int] | None = None,
) -> Iterator[bytes]:
    """Pulsar entries holding ``values`` as messages; ``counter[0]`` counts the messages."""
    codec = codec_number(options.compression)
    it = iter(values)
    sequence_id = 0
    while True:
        chunk = list(islice(it, options.batch_size))
        if not chunk:
            return
        messages = [
            OutgoingMessage(v, key=options.key, properties=options.properties) for v in chunk
        ]
        yield encode_entry(
            messages,
            producer_name=options.producer_name,
            sequence_id=sequence_id,
            publish_time=clock_ms(),
            batch=options.batch_size > 1,
            compression=codec,
        )
        sequence_id += len(chunk)
        if counter is not None:
            counter[0] += len(chunk)


def decode_records(
    topic: str,
    entries: Iterable[tuple[int, int, bytes]],
    *,
    decrypt_key_pem: bytes | None = None,
    count: int | None = None,
) -> Iterator[MessageRecord]:
    """The messages of ``(ledger_id, entry_id, payload)`` entries, at most ``count``."""
    from formats.pulsar.crypto import Decryptor  # cryptography: loaded only when needed

    decryptor = Decryptor(decrypt_key_pem) if decrypt_key_pem else None
    messages = iter_messages(entries, decryptor=decryptor)
    for message in islice(messages, count):
        yield MessageRecord(topic, message)
