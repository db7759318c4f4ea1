"""Encode throughput: a data object of 64 MiB blocks of 1 KiB entries.

Ours: plan the blocks (Pulsar's block-size rule) and frame every entry into one reused
:class:`~formats.block.BlockWriter` buffer, block after block (what the offload writer does
before each part upload). Baseline, same run, same size: ``bytes(bytearray(x))``, a plain
copy of the object's bytes. A second line adds the per-block CRC32C the writer records.

    python -m bench encode [--total 256M] [--block 64M] [--entry 1K] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import note, report
from formats.block import BlockWriter
from formats.extension import crc32c
from formats.layout import plan_blocks
from offloader.units import parse_size

GOAL_MB_S = 1000.0


def _best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _payloads(count: int, entry_size: int) -> list[bytes]:
    """``count`` distinct payloads (no cache-friendly reuse), as the ledger store yields them."""
    source = os.urandom(count * entry_size)
    return [source[i * entry_size : (i + 1) * entry_size] for i in range(count)]


def encode_data_object(
    payloads: Sequence[bytes], max_block_size: int, *, with_crc: bool = False
) -> tuple[int, int]:
    """Encode every block into one reused writer; returns (bytes, blocks)."""
    plans = plan_blocks([len(p) for p in payloads], max_block_size)
    writer = BlockWriter(max_block_size)
    total = 0
    for plan in plans:
        block = writer.write_block(
            plan.first_entry_id, payloads[plan.first_entry_id : plan.last_entry_id + 1], plan.size
        )
        if with_crc:
            crc32c(block)
        total += len(block)
    return total, len(plans)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench encode", description=__doc__)
    parser.add_argument("--total", default="256M", help="payload bytes to encode (default 256M)")
    parser.add_argument("--block", default="64M", help="max block size (default 64M)")
    parser.add_argument("--entry", default="1K", help="entry size (default 1K)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    args = parser.parse_args(argv)
    total, block, entry = parse_size(args.total), parse_size(args.block), parse_size(args.entry)
    payloads = _payloads(max(1, total // entry), entry)
    size, blocks = encode_data_object(payloads, block)  # warm-up, and the object size
    source = os.urandom(size)

    ours = _best_of(args.repeat, lambda: encode_data_object(payloads, block))
    ours_crc = _best_of(args.repeat, lambda: encode_data_object(payloads, block, with_crc=True))
    baseline = _best_of(args.repeat, lambda: bytes(bytearray(source)))

    mb = size / 1e6
    common: dict[str, Any] = {
        "bytes": size,
        "blocks": blocks,
        "entry_size": entry,
        "max_block_size": block,
    }
    result = report(
        "encode.data_object", mb / ours, mb / baseline, "MB/s", goal=GOAL_MB_S, **common
    )
    report("encode.data_object+crc32c", mb / ours_crc, mb / baseline, "MB/s", **common)
    baseline_copy = "bytes(bytearray(x))"
    note(
        f"bench encode: {result['ours']:.0f} MB/s encoding vs {result['baseline']:.0f} MB/s "
        f"for {baseline_copy} of {size} bytes (goal >= {GOAL_MB_S:.0f} MB/s)"
    )
    return 0
