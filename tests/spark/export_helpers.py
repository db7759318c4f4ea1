"""Helpers of the export tests: a home with Pulsar-format topics, and DuckDB's view of a target."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from offloader.api import MessageOptions, Offloader
from offloader.api_types import Position

T0 = 1_750_000_000_000  # 2025-06-15T15:06:40Z
TOPIC = "persistent://public/default/orders"


class Clock:
    def __init__(self, start: int = T0) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def value_of(i: int, ts: Any) -> bytes:
    return json.dumps({"i": i, "ts": ts, "pad": "x" * (i % 17)}).encode()


def produce_ledger(
    off: Offloader,
    clock: Clock,
    topic: str,
    first: int,
    count: int,
    *,
    step_ms: int = 60_000,
    ts: Callable[[int, int], Any] | None = None,
    batch: int = 4,
) -> list[bytes]:
    """``count`` JSON messages (``batch`` per entry), one ``step_ms`` apart; then roll over."""
    values = [
        value_of(first + i, (ts or (lambda i, now: now))(first + i, clock.now + i * step_ms))
        for i in range(count)
    ]

    def gen() -> Any:
        for v in values:
            clock.now += step_ms
            yield v

    off.produce_messages(topic, gen(), MessageOptions(batch_size=batch, compression="zstd"))
    off.roll_over(topic)
    return values


def new_home(
    root: Path, clock: Clock, store_url: str | None = None, endpoint: str | None = None
) -> Offloader:
    off = Offloader.from_settings(root, store_url, endpoint_url=endpoint, clock_ms=clock)
    off.create_namespace("public/default")
    return off


def offload_all(off: Offloader, topic: str) -> None:
    info = off.topic_info(topic)
    last = [r for r in info.ledgers if r.state == "CLOSED"][-1]
    off.offload_prefix(topic, position=Position(last.ledger_id + 1, 0))


def duck(target: str, select: str, rest: str = "", **settings: str) -> list[tuple[Any, ...]]:
    """``SELECT select FROM <every Parquet file of target> rest`` through DuckDB."""
    import duckdb

    con = duckdb.connect()
    try:
        for key, value in settings.items():
            con.execute(f"SET {key} = '{value}'")
        source = f"read_parquet('{target}/**/*.parquet', hive_partitioning = true)"
        return list(con.execute(f"SELECT {select} FROM {source} {rest}").fetchall())
    finally:
        con.close()


def digest(values: list[bytes]) -> tuple[int, str]:
    """(count, SHA-256 over the sorted SHA-256s of the values)."""
    shas = sorted(hashlib.sha256(v).hexdigest() for v in values)
    return len(values), hashlib.sha256("".join(shas).encode()).hexdigest()


def duck_digest(target: str, **settings: str) -> tuple[int, int, str]:
    """(rows, distinct message ids, digest of the values) of every exported file."""
    ((rows, ids),) = duck(target, "count(*), count(DISTINCT message_id)", **settings)
    values = [bytes(r[0]) for r in duck(target, "value", **settings)]
    return int(rows), int(ids), digest(values)[1]


class ChunkedTopic:
    """Raw Pulsar entries produced into a topic: batches of several producers and chunked
    messages, whose chunks may be split across a ledger rollover by the test. Keeps every
    message's value (what the export must hold exactly once)."""

    def __init__(self, off: Offloader, clock: Clock, topic: str = TOPIC, seed: int = 24) -> None:
        import random

        self.off, self.clock, self.topic = off, clock, topic
        self.rng = random.Random(seed)
        self.seq: dict[str, int] = {}
        self.values: list[bytes] = []

    def _next(self, producer: str, n: int) -> int:
        seq = self.seq.get(producer, 0)
        self.seq[producer] = seq + n
        self.clock.now += 1000
        return seq

    def batch(self, producer: str, n: int = 3) -> bytes:
        from formats.pulsar import OutgoingMessage, encode_entry

        seq = self._next(producer, n)
        values = [f"{producer}-{seq + i}".encode() for i in range(n)]
        self.values += values
        return encode_entry(
            [OutgoingMessage(v, key=producer) for v in values],
            producer_name=producer,
            sequence_id=seq,
            publish_time=self.clock.now,
        )

    def chunked(
        self, producer: str, count: int, chunk_size: int = 900
    ) -> tuple[bytes, list[bytes]]:
        """A message of ``count`` chunks: (its value, its chunk entries in order)."""
        from formats.pulsar import OutgoingMessage, encode_chunks

        seq = self._next(producer, 1)
        value = self.rng.randbytes(chunk_size * count - 77)
        self.values.append(value)
        chunks = encode_chunks(
            OutgoingMessage(value, key=f"{producer}-big"),
            chunk_size=chunk_size,
            producer_name=producer,
            sequence_id=seq,
            publish_time=self.clock.now,
        )
        assert len(chunks) == count
        return value, chunks

    def produce(self, entries: list[bytes]) -> tuple[int, int]:
        """Append the entries to the open ledger: ``(ledger id, first entry id)``."""
        result = self.off.produce(self.topic, entries)
        assert result.first is not None
        return result.first.ledger_id, result.first.entry_id
