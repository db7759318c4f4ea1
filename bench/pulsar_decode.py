"""Pulsar message decoding, one core: messages per second for batches of 100 messages of 200
bytes, uncompressed and LZ4: ``formats.pulsar.decode_entry`` (CRC32C, metadata, LZ4, batch
split in C, one Message object each) and the columnar path (``split_columns``: per-field
lists, what an Arrow builder wants).

Baseline, same run: the floor of any pure-Python batch splitter: a loop over the same
decompressed batch payloads that reads each message's size prefix and slices its metadata and
value, with no protobuf decoding, no checksum and no objects. Goal: >= 2,000,000 msgs/s.

``pulsar_decode_block_*``: what a ``pulsar-messages`` worker does with a block once its bytes
are in memory, per message: the block's entries (packed, as the reader holds them) staged into
:class:`~offloader.spark.message_columns.MessageColumns` and flushed to Arrow batches of 8192
rows. Ours: the C block walk (``add_packed``: one C call per batch of rows, CRC32C, metadata,
split and message ids in C); baseline, same run: the per-entry path every entry took before
(``parse_entry`` + ``MessageColumns.add``). ``plain``: 200-byte values with a key (as
``bench pulsar_scan``); ``rich``: with a property and an event time too; ``lz4``: plain
messages in LZ4-compressed batches (the walk decompresses them through the Python codec).

    python -m bench pulsar_decode [--entries 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time
from array import array
from itertools import accumulate

from bench import report
from formats.pulsar import OutgoingMessage, decode_entry, encode_entry, parse_entry
from formats.pulsar.batch import split_columns
from formats.pulsar.compression import LZ4, NONE, decompress
from offloader.spark.message_columns import MessageColumns
from offloader.spark.message_rows import ValueDecoder, messages_arrow_schema

GOAL = 2_000_000
BATCH = 100
SIZE = 200


def _entries(count: int, codec: int, *, rich: bool = True) -> list[bytes]:
    out = []
    for i in range(count):
        batch = [
            OutgoingMessage(
                os.urandom(SIZE // 2) * 2,
                key=f"key-{j % 8}",
                properties=(("i", str(j)),) if rich else (),
                event_time=1_700_000_000_000 + j if rich else None,
            )
            for j in range(BATCH)
        ]
        out.append(
            encode_entry(
                batch,
                producer_name="bench",
                sequence_id=i * BATCH,
                publish_time=1_700_000_000_000 + i,
                compression=codec,
            )
        )
    return out


def _floor(payloads: list[bytes]) -> int:
    """Slice every message's metadata and value out of decompressed batch payloads, by the
    size prefixes and the (known, fixed) value size: no protobuf decoding."""
    n = 0
    for data in payloads:
        pos = 0
        end = len(data)
        while pos < end:
            size = int.from_bytes(data[pos : pos + 4], "big")
            meta = data[pos + 4 : pos + 4 + size]
            pos += 4 + size
            value = data[pos : pos + SIZE]
            pos += SIZE
            n += 1 if meta and value else 0
    return n


def _best(repeat: int, fn: object) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        start = time.process_time()
        count = fn()  # type: ignore[operator]
        best = min(best, time.process_time() - start)
    return best, count


_SCHEMA = messages_arrow_schema()


def _columns() -> MessageColumns:
    """A worker's staging, as the source makes it (binary values, its default batch limits)."""
    from offloader.spark.messages import DEFAULT_MESSAGE_BATCH_BYTES
    from offloader.spark.source import DEFAULT_BATCH_ROWS

    return MessageColumns(
        "persistent://public/default/bench",
        _SCHEMA,
        ValueDecoder("binary", None),
        batch_rows=DEFAULT_BATCH_ROWS,
        batch_bytes=DEFAULT_MESSAGE_BATCH_BYTES,
    )


def _block_walk(data: bytes, offsets: bytes, count: int) -> int:
    """Ours: the packed entries staged by the C walk, flushed as the reader flushes."""
    rows, i, n = _columns(), 0, 0
    while i < count:
        i = rows.add_packed(data, offsets, i, count, 0, 7)
        if rows.full or i == count:
            batch = rows.flush()
            n += batch.num_rows if batch is not None else 0
        elif i < count:
            raise AssertionError(f"entry {i} left aside")
    return n


def _per_entry(data: bytes, offsets: bytes, count: int) -> int:
    """Baseline: each entry parsed and staged on its own (the path before the C walk)."""
    rows, n = _columns(), 0
    ends = memoryview(offsets).cast("i")
    for i in range(count):
        rows.add(parse_entry(data[ends[i] : ends[i + 1]], ledger_id=7, entry_id=i), 7, i)
        if rows.full:
            n += rows.flush().num_rows  # type: ignore[union-attr]
    batch = rows.flush()
    return n + (batch.num_rows if batch is not None else 0)


def _block_rows(args: argparse.Namespace) -> None:
    for name, rich, codec in (("plain", False, NONE), ("rich", True, NONE), ("lz4", False, LZ4)):
        entries = _entries(args.entries, codec, rich=rich)
        data = b"".join(entries)
        offsets = array("i", accumulate(map(len, entries), initial=0)).tobytes()
        count = len(entries)

        def ours(data: bytes = data, offsets: bytes = offsets, count: int = count) -> int:
            return _block_walk(data, offsets, count)

        def base(data: bytes = data, offsets: bytes = offsets, count: int = count) -> int:
            return _per_entry(data, offsets, count)

        ours_s, n = _best(args.repeat, ours)
        base_s, m = _best(args.repeat, base)
        assert n == m == args.entries * BATCH, (n, m)
        report(
            f"pulsar_decode_block_{name}",
            n / ours_s,
            m / base_s,
            "msgs/s/core",
            messages=n,
            message_bytes=SIZE,
            batch=BATCH,
            ours_cpu_s=round(ours_s, 3),
            baseline_cpu_s=round(base_s, 3),
            ours_us_per_message=round(ours_s / n * 1e6, 3),
            baseline_us_per_message=round(base_s / m * 1e6, 3),
            baseline_is="parse_entry + MessageColumns.add per entry (the path before the C walk)",
            api="MessageColumns.add_packed + flush: one C call per Arrow batch of rows",
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench pulsar_decode")
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only-block", action="store_true", help="the block rows only")
    args = parser.parse_args(argv)
    _block_rows(args)
    if args.only_block:
        return 0
    for codec, name in ((NONE, "none"), (LZ4, "lz4")):
        entries = _entries(args.entries, codec)
        raw = []
        for e in entries:
            parsed = parse_entry(e)
            md = parsed.metadata
            raw.append(decompress(md.compression or 0, parsed.payload, md.uncompressed_size or 0))

        def ours(entries: list[bytes] = entries) -> int:
            return sum(len(decode_entry(e)) for e in entries)

        def floor(raw: list[bytes] = raw) -> int:
            return _floor(raw)

        def columns(entries: list[bytes] = entries) -> int:
            n = 0
            for e in entries:
                parsed = parse_entry(e)
                md = parsed.metadata
                raw_ = decompress(md.compression or 0, parsed.payload, md.uncompressed_size or 0)
                n += len(split_columns(md, raw_)[0])
            return n

        ours_s, n = _best(args.repeat, ours)
        floor_s, m = _best(args.repeat, floor)
        assert n == m == args.entries * BATCH, (n, m)
        report(
            f"pulsar_decode_{name}",
            n / ours_s,
            m / floor_s,
            "msgs/s/core",
            messages=n,
            message_bytes=SIZE,
            batch=BATCH,
            ours_cpu_s=round(ours_s, 3),
            baseline_cpu_s=round(floor_s, 3),
            goal=GOAL,
            goal_met=n / ours_s >= GOAL,
            baseline_is="slicing the decompressed batches by their size prefixes (no protobuf)",
            api="decode_entry: one Message object per message",
        )
        cols_s, k = _best(args.repeat, columns)
        assert k == n
        report(
            f"pulsar_decode_columns_{name}",
            k / cols_s,
            m / floor_s,
            "msgs/s/core",
            messages=k,
            ours_cpu_s=round(cols_s, 3),
            baseline_cpu_s=round(floor_s, 3),
            goal=GOAL,
            goal_met=k / cols_s >= GOAL,
            api="parse_entry + decompress + split_columns: per-field lists, no Message objects",
        )
    return 0
