"""Transforms (spec/transforms.md): zstd + AES-256-GCM objects vs plain ones, same run.

On one S3 server (moto in its own process by default; ``--server rgw`` for Ceph RGW):

* ``transform.offload.json`` / ``transform.offload.random``: offload throughput (MB/s of
  original bytes) of a ledger of 1 KiB JSON-like (compressible) or random (incompressible)
  entries, transformed vs plain (goal on random: ratio >= 0.8); ``stored_ratio`` is the stored
  size over the plain size (aim on JSON: < 0.4);
* every row carries the client's CPU seconds (``client_cpu_s``, ``baseline_client_cpu_s``; per
  read in milliseconds for random reads), measured with ``time.process_time`` around each run;
* ``transform.random_read``: random single-entry reads of the JSON ledger, each through a fresh
  ReadHandle: data GETs per read (goal 1) and data bytes per read, transformed vs plain;
* ``transform.sequential_read.json|random``: every entry of the ledger through one ReadHandle
  (MB/s), transformed vs plain (goal >= 0.8); the random ledger is the worst case (every byte
  decrypted, nothing saved on the download).

* ``transform.kafka.*``: the same for a Kafka segment (``bench/transform_kafka.py``): upload
  of a transformed topic vs a plain one, fetches by offset, sequential reads (``--no-kafka``
  leaves them out).

    python -m bench transform [--size 64M] [--server moto|rgw] [--reads 50] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid as uuid_mod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from bench import note, report
from bench.common import SyntheticLedger, quiet_logs, server, store_for
from formats.ledger_metadata import LedgerMetadata
from offloader.config import OffloadSettings
from offloader.keyring import KeyRing
from offloader.offload.transformed import WriteTransform
from offloader.read.handle import ReadHandle
from offloader.store.base import GetResult, ObjectStore, RangeReader
from offloader.units import parse_size

ENTRY = 1024
POOL = 4096


class JsonLedger:
    """A closed ledger of ~1 KiB JSON-like entries (a pool of distinct records, cycled)."""

    def __init__(self, ledger_id: int, count: int) -> None:
        rng = random.Random(5)
        self._pool = []
        for i in range(POOL):
            record = {
                "id": i,
                "user": f"user-{rng.randrange(10_000)}",
                "event": rng.choice(["click", "view", "purchase", "scroll"]),
                "ts": 1_700_000_000_000 + rng.randrange(10**9),
                "tags": [rng.choice(["red", "green", "blue", "sale", "new"]) for _ in range(8)],
                "text": " ".join(
                    rng.choice(["lorem", "ipsum", "dolor", "sit", "amet"]) for _ in range(90)
                ),
            }
            self._pool.append(json.dumps(record).encode()[:ENTRY].ljust(ENTRY, b" "))
        self._ledger_id, self._count = ledger_id, count
        self._metadata = LedgerMetadata.closed_default(
            last_entry_id=count - 1, length=count * ENTRY
        )

    ledger_id = property(lambda self: self._ledger_id)
    last_entry_id = property(lambda self: self._count - 1)
    length = property(lambda self: self._count * ENTRY)
    metadata = property(lambda self: self._metadata)

    def entry_lengths(self) -> list[int]:
        return [ENTRY] * self._count

    def payload(self, entry_id: int) -> bytes:
        return self._pool[entry_id % POOL]

    def read(self, first: int, last: int) -> Sequence[bytes]:
        return [self.payload(i) for i in range(first, last + 1)]


class _Counting:
    def __init__(self, store: ObjectStore) -> None:
        self._store, self.gets, self.bytes = store, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get_range(self, key: str, start: int, end: int) -> GetResult:
        result = self._store.get_range(key, start, end)
        if not key.endswith("-index"):
            self.gets, self.bytes = self.gets + 1, self.bytes + len(result.data)
        return result

    def open_range(self, key: str, start: int, end: int) -> RangeReader:
        if not key.endswith("-index"):
            self.gets, self.bytes = self.gets + 1, self.bytes + end - start
        return self._store.open_range(key, start, end)


def _offload(
    store: ObjectStore, ledger: Any, settings: OffloadSettings, t: WriteTransform | None
) -> tuple[float, str, int]:
    from offloader.offload.writer import offload_ledger

    uuid = str(uuid_mod.uuid4())
    start = time.perf_counter()
    result = offload_ledger(ledger, store, uuid, settings, transform=t)
    return time.perf_counter() - start, uuid, result.data_size


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench transform")
    parser.add_argument("--size", default="64M")
    parser.add_argument("--server", default="moto", choices=["moto", "rgw"])
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-kafka", action="store_true")
    args = parser.parse_args(argv)
    quiet_logs()
    size = parse_size(args.size)
    count = max(1, size // ENTRY)
    with tempfile.TemporaryDirectory(prefix="bench-keys.") as tmp, server(args.server) as srv:
        ring = KeyRing(Path(tmp) / "keys")
        ring.create("bench")
        settings = OffloadSettings(key_ring=str(ring.path))
        transform = WriteTransform(settings.transform_chunk_size, 3, "bench", ring.key("bench"))
        bucket = f"bench-transform-{uuid_mod.uuid4().hex[:8]}"
        srv.endpoint.client().create_bucket(Bucket=bucket)
        store = store_for(srv.endpoint, bucket, settings)
        common: dict[str, Any] = {
            "server": srv.name,
            "size": size,
            "entry": ENTRY,
            "note": srv.note,
        }
        uuids: dict[str, str] = {}
        for kind, ledger in (
            ("random", SyntheticLedger(1, count, ENTRY)),
            ("json", JsonLedger(1, count)),
        ):
            plain_s, ours_s, cpu, plain_cpu = [], [], [], []
            for _ in range(args.repeat):
                before = time.process_time()
                seconds, uuids[f"{kind}.plain"], plain_size = _offload(
                    store, ledger, settings, None
                )
                plain_cpu.append(time.process_time() - before)
                plain_s.append(seconds)
                before = time.process_time()
                seconds, uuids[f"{kind}.ours"], stored = _offload(
                    store, ledger, settings, transform
                )
                cpu.append(time.process_time() - before)
                ours_s.append(seconds)
            mb = plain_size / 1e6
            report(
                f"transform.offload.{kind}",
                mb / statistics.median(ours_s),
                mb / statistics.median(plain_s),
                "MB/s",
                stored_ratio=round(stored / plain_size, 4),
                client_cpu_s=round(statistics.median(cpu), 3),
                baseline_client_cpu_s=round(statistics.median(plain_cpu), 3),
                goal=">= 0.8 (random)" if kind == "random" else "stored_ratio < 0.4",
                **common,
            )
        picks = random.Random(11).sample(range(count), min(args.reads, count))
        per_read: dict[str, tuple[float, float, float]] = {}
        for variant in ("plain", "ours"):
            counting = _Counting(store)
            before = time.process_time()
            for entry in picks:
                uuid = uuids[f"json.{variant}"]
                with ReadHandle.open(cast(ObjectStore, counting), 1, uuid, settings) as handle:
                    handle.read_entry(entry)
            per_read[variant] = (
                counting.gets / len(picks),
                counting.bytes / len(picks),
                (time.process_time() - before) / len(picks),
            )
        report(
            "transform.random_read",
            per_read["ours"][0],
            per_read["plain"][0],
            "data GETs per single-entry read",
            higher_is_better=False,
            bytes_per_read=round(per_read["ours"][1]),
            plain_bytes_per_read=round(per_read["plain"][1]),
            client_cpu_ms_per_read=round(per_read["ours"][2] * 1000, 3),
            baseline_client_cpu_ms_per_read=round(per_read["plain"][2] * 1000, 3),
            goal="1 GET",
            **common,
        )
        for kind in ("json", "random"):
            runs: dict[str, list[float]] = {"plain": [], "ours": []}
            cpus: dict[str, list[float]] = {"plain": [], "ours": []}
            for _ in range(args.repeat):
                for variant in ("plain", "ours"):
                    start, before = time.perf_counter(), time.process_time()
                    with ReadHandle.open(store, 1, uuids[f"{kind}.{variant}"], settings) as h:
                        total = sum(len(e.payload) for e in h.iter_entries(0, count - 1))
                    runs[variant].append(total / 1e6 / (time.perf_counter() - start))
                    cpus[variant].append(time.process_time() - before)
            report(
                f"transform.sequential_read.{kind}",
                statistics.median(runs["ours"]),
                statistics.median(runs["plain"]),
                "MB/s",
                client_cpu_s=round(statistics.median(cpus["ours"]), 3),
                baseline_client_cpu_s=round(statistics.median(cpus["plain"]), 3),
                goal=">= 0.8",
                **common,
            )
        store.close()
        if not args.no_kafka:
            from bench.transform_kafka import kafka_rows

            pool = JsonLedger(1, 1)
            values = [pool.payload(i) for i in range(POOL)]
            kafka_rows(srv, size, args.reads, values, common)
    note("bench transform: done")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(__import__("sys").argv[1:]))
