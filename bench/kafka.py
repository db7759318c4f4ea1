"""Kafka tier benchmarks: segment upload vs raw boto3 multipart, and fetch by offset.

``upload``: one closed segment of ``--size`` (default 1 GiB on RGW, ``--moto-size`` 256 MiB on
moto, whose server holds objects in memory) is uploaded by ``KafkaTier.upload`` (64 MiB parts
with their CRC32C, 4 at a time, every batch's CRC32C checked as its part is read); the baseline
uploads the same file with plain boto3 ``upload_part`` calls (parts read from the file, same
size, same threads) to the same server, and again sending each part's CRC32C as ours does
(``raw-crc32c``: the server then checks it; ``ratio_vs_crc32c``). Each variant runs in a fresh
process, taking turns, ``--repeat`` times; the median run is reported. Goals: ratio >= 0.95,
client CPU <= 1.15x the baseline's, peak RSS <= the parts in flight (4 x 64 MiB) + 64 MiB.
``--placement split`` runs the server and the measured process on separate CPUs
(``bench/placement.py``); its rows end in ``.split``.

``fetch``: after uploading a ``--fetch-size`` segment of 1 KiB records, ``--fetches`` reads of
``--count`` (1000) records at random offsets through ``KafkaTier.read`` (the ``.index`` is
cached after the first); reported: data GETs per fetch (goal 1), p50/p99 latency, and the
baseline p50 of one raw ranged GET of the same bytes.

Every row carries this process's CPU seconds beside the figures (``client_cpu_s`` for ours,
``baseline_client_cpu_s`` for the raw boto3 variant; upload: the median run's worker process).

    python -m bench kafka [upload|fetch|all] [--servers rgw,moto] [--size 1G] [--moto-size 256M]
                          [--repeat 3] [--placement shared,split] [--fetches 50]
                          [--count 1000] [--fetch-size 64M]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import tempfile
import time
import uuid
from base64 import b64encode
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import crc32c

from bench import note, report
from bench.common import (
    ClientCost,
    empty_bucket,
    endpoint_from_json,
    endpoint_to_json,
    peak_rss_mb,
    percentile,
    quiet_logs,
    raw_client,
    server,
    take_turns,
)
from bench.placement import Placement, add_run_arguments, parse_placements, pin_worker, placed
from formats.kafka.batch import iter_batch_headers
from formats.kafka.encode import NewRecord, encode_batch
from formats.kafka.index import build_indexes
from formats.kafka.names import encode_partition_metadata, segment_file_name, uuid_to_kafka
from offloader.units import parse_size

MiB = 1024 * 1024
PART = 64 * MiB
CONCURRENCY = 4
GOAL_RATIO = 0.95
#: client CPU seconds at most this many times the raw upload's
GOAL_CPU_RATIO = 1.15
#: peak RSS at most the parts in flight plus this
RSS_SLACK = 64 * MiB


def write_segment(
    root: Path, size: int, record_size: int = 1024, partition: int = 0
) -> tuple[Path, int]:
    """A partition dir ``bench-<partition>`` with one closed segment of about ``size`` bytes
    (1 MiB batches of ``record_size`` records, copies of one batch with their base offsets
    patched: the CRC does not cover them) and a tiny active one; returns the .log path and its
    record count."""
    directory = root / f"bench-{partition}"
    directory.mkdir(parents=True)
    (directory / "partition.metadata").write_bytes(
        encode_partition_metadata(uuid_to_kafka(uuid.uuid4()))
    )
    rng = random.Random(5 + partition)
    per_batch = MiB // record_size
    rows = [
        NewRecord(1_700_000_000_000 + i, None, rng.randbytes(record_size - 20))
        for i in range(per_batch)
    ]
    template = bytearray(encode_batch(rows, base_offset=0))
    batches = max(1, size // len(template))
    log = directory / segment_file_name(0, "log")
    with log.open("wb") as out:
        for b in range(batches):
            struct.pack_into(">q", template, 0, b * per_batch)
            out.write(template)
    data = log.read_bytes()
    offsets, times = build_indexes(iter_batch_headers(data, verify_crc=False), 0)
    (directory / segment_file_name(0, "index")).write_bytes(offsets.encode())
    (directory / segment_file_name(0, "timeindex")).write_bytes(times.encode())
    active = batches * per_batch
    (directory / segment_file_name(active, "log")).write_bytes(
        encode_batch([NewRecord(1, None, b"x")], base_offset=active)
    )
    return log, active


def _ours(spec: dict[str, Any]) -> dict[str, Any]:
    from offloader.api import KafkaSettings, Offloader

    endpoint = endpoint_from_json(spec["endpoint"])
    home = Path(tempfile.mkdtemp(prefix="bench-kafka-home."))
    settings = KafkaSettings(part_size=PART, concurrency=CONCURRENCY, prefix=f"k{time.time_ns()}")
    with Offloader.from_settings(home, f"s3://{spec['bucket']}", endpoint_url=endpoint.url) as off:
        tier = off.kafka(settings)
        before = rss_mb()
        cost = ClientCost()
        start = time.perf_counter()
        report_ = tier.upload(Path(spec["log_dir"]))
        seconds = time.perf_counter() - start
        spent = cost.fields()
    assert report_.ok and len(report_.of("uploaded")) == 1, report_
    return {
        "seconds": seconds,
        "bytes": report_.segments[0].size_bytes,
        "rss_mb": peak_rss_mb(),
        "rss_before_mb": before,
        **spent,
    }


def _raw(spec: dict[str, Any]) -> dict[str, Any]:
    endpoint = endpoint_from_json(spec["endpoint"])
    client = raw_client(endpoint, pool=CONCURRENCY * 2 + 2)
    path = Path(spec["log"])
    size = path.stat().st_size
    bucket, key = spec["bucket"], f"raw-{time.time_ns()}"
    with_crc = spec["variant"] == "raw-crc32c"
    before = rss_mb()
    cost = ClientCost()
    start = time.perf_counter()
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    fd = os.open(path, os.O_RDONLY)

    def put(number: int) -> dict[str, Any]:
        body = os.pread(fd, PART, (number - 1) * PART)
        extra: dict[str, str] = {}
        if with_crc:  # the part's CRC32C sent as ours is (the server checks and keeps it)
            crc = crc32c.crc32c(body).to_bytes(4, "big")
            extra = {"ChecksumAlgorithm": "CRC32C", "ChecksumCRC32C": b64encode(crc).decode()}
        resp = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, **extra
        )
        return {"PartNumber": number, "ETag": resp["ETag"]}

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        parts = list(pool.map(put, range(1, -(-size // PART) + 1)))
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    seconds = time.perf_counter() - start
    spent = cost.fields()
    os.close(fd)
    return {
        "seconds": seconds,
        "bytes": size,
        "rss_mb": peak_rss_mb(),
        "rss_before_mb": before,
        **spent,
    }


def rss_mb() -> float:
    """This process's resident size now (VmRSS), MB: what the imports took before the run."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def _upload(srv: Any, size: int, repeat: int, placements: list[Placement]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kafka.") as tmp:
        log, _ = write_segment(Path(tmp), size)
        bucket = srv.endpoint.new_bucket()
        spec = {
            "endpoint": endpoint_to_json(srv.endpoint),
            "bucket": bucket,
            "log_dir": tmp,
            "log": str(log),
        }
        for place in placements:
            with placed(srv.pids, place) as cpus:
                runs = take_turns(
                    "bench.kafka",
                    {
                        v: {**spec, "variant": v, "cpus": cpus}
                        for v in ("raw", "raw-crc32c", "ours")
                    },
                    repeat,
                    after_each=lambda: empty_bucket(srv.endpoint, bucket),
                )
            _upload_row(srv, runs, place, repeat)


def _upload_row(srv: Any, runs: dict[str, dict[str, Any]], place: Placement, repeat: int) -> None:
    raw, raw_crc, ours = runs["raw"], runs["raw-crc32c"], runs["ours"]
    rss_goal = (CONCURRENCY * PART + RSS_SLACK) / 1e6
    cpu_ratio = round(ours["client_cpu_s"] / max(raw["client_cpu_s"], 1e-9), 3)
    growth = ours["rss_mb"] - ours["rss_before_mb"]
    record = report(
        f"kafka.upload.{srv.name}{place.suffix}",
        ours["bytes"] / 1e6 / ours["seconds"],
        raw["bytes"] / 1e6 / raw["seconds"],
        "MB/s",
        server=srv.name,
        server_note=srv.note,
        placement=place.name,
        repeat=repeat,
        bytes=ours["bytes"],
        part_size=PART,
        concurrency=CONCURRENCY,
        goal_ratio=GOAL_RATIO,
        client_cpu_ratio=cpu_ratio,
        goal_client_cpu_ratio=GOAL_CPU_RATIO,
        cpu_ok=cpu_ratio <= GOAL_CPU_RATIO,
        peak_rss_mb=round(ours["rss_mb"], 1),
        baseline_peak_rss_mb=round(raw["rss_mb"], 1),
        rss_goal_mb=round(rss_goal, 1),
        rss_ok=ours["rss_mb"] <= rss_goal,
        # the resident size the imports took before the upload (offloader.api loads pyarrow
        # through the export modules), and the growth from there
        rss_before_mb=round(ours["rss_before_mb"], 1),
        baseline_rss_before_mb=round(raw["rss_before_mb"], 1),
        rss_growth_mb=round(growth, 1),
        baseline_rss_growth_mb=round(raw["rss_mb"] - raw["rss_before_mb"], 1),
        rss_growth_ok=growth <= rss_goal,
        # raw boto3 sending each part's CRC32C as ours does (the server checks it)
        baseline_crc32c=round(raw_crc["bytes"] / 1e6 / raw_crc["seconds"], 3),
        ratio_vs_crc32c=round(raw_crc["seconds"] / ours["seconds"], 4),
        baseline_crc32c_client_cpu_s=raw_crc["client_cpu_s"],
        baseline_crc32c_runs_s=raw_crc["runs_seconds"],
        # the measured process alone (the median run's): CPU seconds and page faults
        client_cpu_s=ours["client_cpu_s"],
        baseline_client_cpu_s=raw["client_cpu_s"],
        client_faults=ours["client_faults"],
        baseline_client_faults=raw["client_faults"],
        best_ratio=round(raw["best_seconds"] / ours["best_seconds"], 4),
        ours_runs_s=ours["runs_seconds"],
        baseline_runs_s=raw["runs_seconds"],
    )
    note(
        f"kafka upload {srv.name} {place.name}: {record['ours']:.1f} vs "
        f"{record['baseline']:.1f} MB/s (ratio {record['ratio']}; client CPU "
        f"{record['client_cpu_s']} s vs {record['baseline_client_cpu_s']} s, {cpu_ratio}x; "
        f"vs raw + CRC32C {record['ratio_vs_crc32c']}; peak RSS {ours['rss_mb']:.0f} MB, "
        f"{growth:.0f} MB above the imports', goal <= {rss_goal:.0f})"
    )


def _fetch(srv: Any, size: int, fetches: int, count: int) -> None:
    from offloader.api import KafkaSettings, Offloader
    from offloader.store.faulty import FaultyObjectStore

    for key, value in srv.endpoint.env().items():
        os.environ[key] = value
    bucket = srv.endpoint.new_bucket()
    client = raw_client(srv.endpoint)
    with tempfile.TemporaryDirectory(prefix="bench-kafka-fetch.") as tmp:
        _, records = write_segment(Path(tmp) / "logs", size)
        url = f"s3://{bucket}"
        with Offloader.from_settings(Path(tmp) / "home", url, endpoint_url=srv.endpoint.url) as off:
            tier = off.kafka(KafkaSettings(part_size=PART))
            assert tier.upload(Path(tmp) / "logs").ok
            seg = tier.ctx.meta.list_segments()[0]
            counting = FaultyObjectStore(tier.ctx.store)
            tier.ctx.store = counting
            tier.indexes._store = counting
            rng = random.Random(9)
            list(tier.read("bench", 0, from_offset=0, count=1))  # the .index, once
            latencies, raw_latencies, gets = [], [], []
            cpu = raw_cpu = 0.0
            for _ in range(fetches):
                start_offset = rng.randrange(0, records - count)
                counting.reset_counts()
                c0, t0 = time.process_time(), time.perf_counter()
                rows = list(tier.read("bench", 0, from_offset=start_offset, count=count))
                latencies.append(time.perf_counter() - t0)
                cpu += time.process_time() - c0
                assert len(rows) == count and rows[0].offset == start_offset
                gets.append(counting.calls["get_range"] + counting.calls["get"])
                # baseline: one raw ranged GET of the bytes those records occupy
                first = (start_offset // 1024) * (seg.size_bytes // (records // 1024))
                c0, t0 = time.process_time(), time.perf_counter()
                client.get_object(
                    Bucket=bucket,
                    Key=seg.keys["log"],
                    Range=f"bytes={first}-{first + count * 1030}",
                )["Body"].read()
                raw_latencies.append(time.perf_counter() - t0)
                raw_cpu += time.process_time() - c0
    p50 = percentile(latencies, 50) * 1000
    record = report(
        f"kafka.fetch.{srv.name}",
        p50,
        percentile(raw_latencies, 50) * 1000,
        "ms (p50)",
        higher_is_better=False,
        server=srv.name,
        server_note=srv.note,
        fetches=fetches,
        records_per_fetch=count,
        segment_bytes=size,
        gets_per_fetch_mean=round(sum(gets) / len(gets), 3),
        gets_per_fetch_max=max(gets),
        p99_ms=round(percentile(latencies, 99) * 1000, 2),
        baseline_p99_ms=round(percentile(raw_latencies, 99) * 1000, 2),
        # this process's CPU seconds over all the fetches (ours: GET, decode, rows)
        client_cpu_s=round(cpu, 3),
        baseline_client_cpu_s=round(raw_cpu, 3),
    )
    note(
        f"kafka fetch {srv.name}: p50 {record['ours']:.1f} ms, p99 {record['p99_ms']} ms, "
        f"{record['gets_per_fetch_mean']} GETs per fetch; client CPU {record['client_cpu_s']} s "
        f"vs {record['baseline_client_cpu_s']} s raw"
    )


def main(argv: list[str]) -> int:
    quiet_logs()
    if argv[:1] == ["--worker"]:
        spec = json.loads(argv[1])
        pin_worker(spec)
        endpoint = endpoint_from_json(spec["endpoint"])
        for key, value in endpoint.env().items():
            os.environ[key] = value
        result = _ours(spec) if spec["variant"] == "ours" else _raw(spec)
        print(json.dumps(result), flush=True)
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench kafka", description=__doc__)
    parser.add_argument("which", nargs="?", default="all", choices=["upload", "fetch", "all"])
    parser.add_argument("--servers", default="rgw,moto")
    parser.add_argument("--size", default="1G")
    parser.add_argument("--moto-size", default="256M")
    add_run_arguments(parser)
    parser.add_argument("--fetches", type=int, default=50)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--fetch-size", default="64M")
    args = parser.parse_args(argv)
    placements = parse_placements(args.placement)
    for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
        with server(name) as srv:
            if args.which in ("upload", "all"):
                size = parse_size(args.moto_size if srv.name == "moto" else args.size)
                _upload(srv, size, args.repeat, placements)
            if args.which in ("fetch", "all"):
                _fetch(srv, parse_size(args.fetch_size), args.fetches, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
