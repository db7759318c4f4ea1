"""Pulsar message decoding, one core: messages per second for batches of 100 messages of 200
bytes, uncompressed and LZ4: ``formats.pulsar.decode_entry`` (CRC32C, metadata, LZ4, batch
split in C, one Message object each) and the columnar path (``split_columns``: per-field
lists, what an Arrow builder wants).

Baseline, same run: the floor of any pure-Python batch splitter: a loop over the same
decompressed batch payloads that reads each message's size prefix and slices its metadata and
value, with no protobuf decoding, no checksum and no objects. Goal: >= 2,000,000 msgs/s.

    python -m bench pulsar_decode [--entries 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

from bench import report
from formats.pulsar import OutgoingMessage, decode_entry, encode_entry, parse_entry
from formats.pulsar.batch import split_columns
from formats.pulsar.compression import LZ4, NONE, decompress

GOAL = 2_000_000
BATCH = 100
SIZE = 200


def _entries(count: int, codec: int) -> list[bytes]:
    out = []
    for i in range(count):
        batch = [
            OutgoingMessage(
                os.urandom(SIZE // 2) * 2,
                key=f"key-{j % 8}",
                properties=(("i", str(j)),),
                event_time=1_700_000_000_000 + j,
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench pulsar_decode")
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
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
