"""The Kafka rows of ``python -m bench transform`` (spec/transforms.md §8): a closed segment of
``--size`` uploaded by ``KafkaTier.upload`` for a topic with zstd + AES-256-GCM vs the same
segment of a topic without a policy, on the same server in the same run.

* ``transform.kafka.upload.random|json``: upload throughput (MB/s of ``.log`` bytes), stored
  size over the ``.log`` size; records of random bytes (incompressible: compression skipped
  after a 64 KiB probe per chunk) and JSON-like records (compressible); goal on random >= 0.8;
* ``transform.kafka.fetch``: single-record fetches at random offsets once the ``.index`` (and
  the ``.chunks`` table) are cached: data GETs per fetch (goal 1) and bytes per fetch;
* ``transform.kafka.sequential_read.random|json``: every record of the segment read back by
  ``KafkaTier.read`` (MB/s of ``.log`` bytes), goal >= 0.8.

Every row carries this process's CPU seconds (``client_cpu_s`` ours, ``baseline_client_cpu_s``
plain; per fetch in milliseconds).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import note, report
from formats.kafka.batch import iter_batch_headers
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.index import build_indexes
from formats.kafka.names import encode_partition_metadata, segment_file_name, uuid_to_kafka

MiB = 1024 * 1024
TOPIC = "bench"


def write_segment(root: Path, size: int, values: list[bytes]) -> int:
    """A partition dir ``bench-0`` with one closed segment of about ``size`` bytes (1 MiB
    batches of the ``values``, copies of one batch with their base offsets patched) and a tiny
    active one; its record count."""
    directory = root / f"{TOPIC}-0"
    directory.mkdir(parents=True)
    (directory / "partition.metadata").write_bytes(
        encode_partition_metadata(uuid_to_kafka(uuid.uuid4()))
    )
    rows, total = [], 0
    for i, value in enumerate(values * (1 + MiB // max(1, len(values) * 1024))):
        rows.append(NewRecord(1_700_000_000_000 + i, None, value))
        total += len(value) + 20
        if total >= MiB:
            break
    template = bytearray(encode_batch(rows, base_offset=0))
    batches = max(1, size // len(template))
    log = directory / segment_file_name(0, "log")
    with log.open("wb") as out:
        for b in range(batches):
            struct.pack_into(">q", template, 0, b * len(rows))
            out.write(template)
    data = log.read_bytes()
    offsets, times = build_indexes(iter_batch_headers(data, verify_crc=False), 0)
    (directory / segment_file_name(0, "index")).write_bytes(offsets.encode())
    (directory / segment_file_name(0, "timeindex")).write_bytes(times.encode())
    active = batches * len(rows)
    (directory / segment_file_name(active, "log")).write_bytes(
        encode_batch([NewRecord(1, None, b"x")], base_offset=active)
    )
    return active


def kafka_rows(
    srv: Any, size: int, fetches: int, json_values: list[bytes], common: dict[str, Any]
) -> None:
    from offloader.api import KafkaSettings, Offloader, TransformPolicy
    from offloader.keyring import KeyRing
    from offloader.store.faulty import FaultyObjectStore

    for key, value in srv.endpoint.env().items():
        os.environ[key] = value
    rng = random.Random(3)
    kinds = {"random": [rng.randbytes(1000) for _ in range(1100)], "json": json_values}
    with tempfile.TemporaryDirectory(prefix="bench-transform-kafka.") as tmp:
        ring = KeyRing(Path(tmp) / "keys")
        ring.create("bench")
        bucket = srv.endpoint.new_bucket()
        for kind, values in kinds.items():
            logs = Path(tmp) / f"logs-{kind}"
            records = write_segment(logs, size, values)
            seconds, cpu, tiers, offs = {}, {}, {}, []
            for variant in ("plain", "ours"):
                off = Offloader.from_settings(
                    Path(tmp) / f"home-{kind}-{variant}",
                    f"s3://{bucket}/{kind}-{variant}",
                    endpoint_url=srv.endpoint.url,
                )
                offs.append(off)
                tier = off.kafka(KafkaSettings(key_ring=str(ring.path)))
                if variant == "ours":
                    tier.set_transform(TOPIC, TransformPolicy("zstd", None, "aes-256-gcm", "bench"))
                c0, t0 = time.process_time(), time.perf_counter()
                assert tier.upload(logs).ok
                seconds[variant] = time.perf_counter() - t0
                cpu[variant] = time.process_time() - c0
                tiers[variant] = tier
            seg = tiers["ours"].ctx.meta.list_segments()[0]
            stored = tiers["ours"].ctx.store.head(seg.keys["log"]).size
            mb = seg.size_bytes / 1e6
            report(
                f"transform.kafka.upload.{kind}",
                mb / seconds["ours"],
                mb / seconds["plain"],
                "MB/s",
                stored_ratio=round(stored / seg.size_bytes, 4),
                client_cpu_s=round(cpu["ours"], 3),
                baseline_client_cpu_s=round(cpu["plain"], 3),
                goal=">= 0.8 (random)" if kind == "random" else "stored_ratio < 0.4",
                **common,
            )
            if kind == "json":
                _fetches(tiers, records, fetches, common, FaultyObjectStore)
            runs, cpus = {}, {}
            for variant, tier in tiers.items():
                c0, t0 = time.process_time(), time.perf_counter()
                n = sum(1 for _ in tier.read(TOPIC, 0, from_offset=0))
                runs[variant] = mb / (time.perf_counter() - t0)
                cpus[variant] = time.process_time() - c0
                assert n == records, (n, records)
            report(
                f"transform.kafka.sequential_read.{kind}",
                runs["ours"],
                runs["plain"],
                "MB/s",
                client_cpu_s=round(cpus["ours"], 3),
                baseline_client_cpu_s=round(cpus["plain"], 3),
                goal=">= 0.8",
                **common,
            )
            for off in offs:
                off.close()
    note("bench transform (kafka): done")


def _fetches(
    tiers: dict[str, Any], records: int, fetches: int, common: dict[str, Any], counting: Any
) -> None:
    picks = random.Random(13).sample(range(records), min(fetches, records))
    per: dict[str, tuple[float, float]] = {}
    for variant, tier in tiers.items():
        store = counting(tier.ctx.store)
        tier.ctx.store = store
        tier.indexes._store = store
        list(tier.read(TOPIC, 0, from_offset=0, count=1))  # .index and .chunks, once
        store.reset_counts()
        gets = 0
        c0 = time.process_time()
        for offset in picks:
            store.reset_counts()
            (row,) = tier.read(TOPIC, 0, from_offset=offset, count=1)
            assert row.offset == offset
            gets += store.calls["get_range"] + store.calls["get"]
        spent = time.process_time() - c0
        per[variant] = (gets / len(picks), spent / len(picks))
    report(
        "transform.kafka.fetch",
        per["ours"][0],
        per["plain"][0],
        "data GETs per single-record fetch",
        higher_is_better=False,
        client_cpu_ms_per_read=round(per["ours"][1] * 1000, 3),
        baseline_client_cpu_ms_per_read=round(per["plain"][1] * 1000, 3),
        goal="1 GET",
        **common,
    )
