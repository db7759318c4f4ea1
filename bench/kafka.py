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

``fetch``: after uploading a ``--fetch-size`` segment of 1 KiB records (1 MiB batches),
``--fetches`` fetches of ``--count`` (1000) records at random offsets (the ``.index`` cached
after the first), in pairs: ``KafkaTier.read`` (records: what ``kafka read`` runs) and
``fetch_batches`` (the batches as stored) each beside its own raw ranged GET of the bytes the
records occupy (the baseline of the goals: p50 and p99 <= 1.5x, client CPU <= 2x, 1 GET, bytes
read <= 1.1x the records' bytes plus one batch; which of a pair goes first alternates, so load
hits both alike; the rows also give the p50 and p99 of the per-pair ratios), then one raw
ranged GET of exactly the bytes the fetch read (``raw_read_*``: the floor of a fetch that reads
whole verified batches).

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
from formats.kafka.batch import HEADER_SIZE, iter_batch_headers
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


class _RangeLog:
    """Wraps the tier's store: the data ranges each fetch GETs (key, start, bytes)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ranges: list[tuple[str, int, int]] = []
        self.gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, key: str) -> Any:
        self.gets += 1
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> Any:
        got = self.inner.get_range(key, start, end)
        self.ranges.append((key, start, len(got.data)))
        return got

    def reset(self) -> None:
        self.ranges, self.gets = [], 0


def _stats(runs: list[dict[str, float]]) -> dict[str, float]:
    lat = [r["s"] for r in runs]
    return {
        "p50_ms": round(percentile(lat, 50) * 1000, 2),
        "p99_ms": round(percentile(lat, 99) * 1000, 2),
        "cpu_ms": round(sum(r["cpu"] for r in runs) / len(runs) * 1000, 3),
    }


def _fetch(srv: Any, size: int, fetches: int, count: int) -> None:
    """Per fetch, in pairs: ``records`` (``KafkaTier.read``: the batch fetch and the records
    decoded into rows, what ``kafka read`` runs) beside a raw ranged GET of the bytes the
    records occupy (from the first record's first byte to the last's end: what the records
    need), then ``batches`` (``fetch_batches`` alone: the batches as stored) beside another
    such GET, then a raw ranged GET of exactly the bytes the fetch read. Each of ours runs next
    to its own baseline GET (which one goes first alternates), so load from the host's other
    work hits both alike: besides the ratio of the percentiles (the goals) the rows give the
    percentiles of the per-pair ratios."""
    from offloader.api import KafkaSettings, Offloader
    from offloader.kafka.batches import fetch_batches

    for key, value in srv.endpoint.env().items():
        os.environ[key] = value
    bucket = srv.endpoint.new_bucket()
    client = raw_client(srv.endpoint)
    names = ("records", "records_base", "batches", "batches_base", "raw_read")
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in names}
    gets: list[int] = []
    read_bytes: list[int] = []
    needed_bytes: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-kafka-fetch.") as tmp:
        log_path, records = write_segment(Path(tmp) / "logs", size)
        headers = list(iter_batch_headers(log_path.read_bytes()[: 4 * MiB], stop_at_partial=True))
        batch_size, per_batch = headers[0].size, headers[0].record_count
        record_size = (batch_size - HEADER_SIZE) // per_batch  # every record is the same size
        url = f"s3://{bucket}"
        with Offloader.from_settings(Path(tmp) / "home", url, endpoint_url=srv.endpoint.url) as off:
            tier = off.kafka(KafkaSettings(part_size=PART))
            assert tier.upload(Path(tmp) / "logs").ok
            seg = tier.ctx.meta.list_segments()[0]
            log_key = seg.keys["log"]
            ranges = _RangeLog(tier.ctx.store)
            tier.ctx.store = ranges  # type: ignore[assignment]
            tier.indexes._store = ranges  # type: ignore[assignment]
            list(tier.read("bench", 0, from_offset=0, count=1))  # the .index, once
            rng = random.Random(9)

            def timed(fn: Any) -> dict[str, float]:
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                return {"s": time.perf_counter() - t0, "cpu": time.process_time() - c0}

            def raw(start: int, length: int) -> None:
                client.get_object(
                    Bucket=bucket, Key=log_key, Range=f"bytes={start}-{start + length - 1}"
                )["Body"].read()

            for n in range(fetches):
                first = rng.randrange(0, records - count)

                def ours_records(first: int = first) -> None:
                    rows = list(tier.read("bench", 0, from_offset=first, count=count))
                    assert len(rows) == count and rows[0].offset == first

                def ours_batches(first: int = first) -> None:
                    got = fetch_batches(
                        tier.ctx, tier.indexes, "bench", 0, first, max_records=count
                    )
                    assert got.base_offsets[0] <= first < got.next_offset

                at = (first // per_batch) * batch_size + HEADER_SIZE
                needed = (at + (first % per_batch) * record_size, count * record_size)
                last = first + count - 1  # the records cross a batch's header: count it in
                if last // per_batch != first // per_batch:
                    needed = (needed[0], needed[1] + HEADER_SIZE)
                for variant, fn in (("records", ours_records), ("batches", ours_batches)):
                    pair = [(variant, fn), (f"{variant}_base", lambda nd=needed: raw(*nd))]
                    if n % 2:
                        pair.reverse()  # which of the pair goes first alternates
                    for name, call in pair:
                        ranges.reset()
                        runs[name].append(timed(call))
                        if name == "records":
                            data = [r for r in ranges.ranges if r[0] == log_key]
                            gets.append(len(ranges.ranges) + ranges.gets)
                            read_bytes.append(sum(r[2] for r in data))
                            exact = (data[0][1], sum(r[2] for r in data))
                runs["raw_read"].append(timed(lambda e=exact: raw(*e)))
                needed_bytes.append(needed[1])
    stats = {v: _stats(r) for v, r in runs.items()}
    mean_read = sum(read_bytes) / len(read_bytes)
    mean_needed = sum(needed_bytes) / len(needed_bytes)
    for variant in ("records", "batches"):
        ours, base, exact_base = stats[variant], stats[f"{variant}_base"], stats["raw_read"]
        pairs = [
            o["s"] / b["s"] for o, b in zip(runs[variant], runs[f"{variant}_base"], strict=True)
        ]
        p50_ratio = ours["p50_ms"] / base["p50_ms"]
        p99_ratio = ours["p99_ms"] / base["p99_ms"]
        cpu_ratio = ours["cpu_ms"] / base["cpu_ms"]
        bytes_goal = 1.1 * mean_needed + batch_size
        record = report(
            f"kafka.fetch.{variant}.{srv.name}",
            ours["p50_ms"],
            base["p50_ms"],
            "ms (p50)",
            higher_is_better=False,
            server=srv.name,
            server_note=srv.note,
            fetches=fetches,
            records_per_fetch=count,
            segment_bytes=size,
            batch_bytes=batch_size,
            p99_ms=ours["p99_ms"],
            # baseline: one raw ranged GET of the bytes the records occupy, run beside ours
            baseline_p99_ms=base["p99_ms"],
            p99_ratio=round(p99_ratio, 3),
            # the per-pair ratios (ours / the baseline GET run beside it): their p50 and p99
            pair_ratio_p50=round(percentile(pairs, 50), 3),
            pair_ratio_p99=round(percentile(pairs, 99), 3),
            # the other baseline: one raw ranged GET of exactly the bytes the fetch read, and
            # its ratio to the records' GET (what reading whole verified batches costs)
            raw_read_p50_ms=exact_base["p50_ms"],
            raw_read_p99_ms=exact_base["p99_ms"],
            raw_read_client_cpu_ms=exact_base["cpu_ms"],
            raw_read_p50_ratio=round(exact_base["p50_ms"] / base["p50_ms"], 3),
            ratio_vs_raw_read=round(ours["p50_ms"] / exact_base["p50_ms"], 3),
            # client CPU per fetch (this process: GET, checks, decoding)
            client_cpu_ms=ours["cpu_ms"],
            baseline_client_cpu_ms=base["cpu_ms"],
            cpu_ratio=round(cpu_ratio, 3),
            gets_per_fetch_mean=round(sum(gets) / len(gets), 3),
            gets_per_fetch_max=max(gets),
            bytes_read_mean=round(mean_read),
            bytes_needed_mean=round(mean_needed),
            bytes_goal=round(bytes_goal),
            goals_met={
                "p50<=1.5x": p50_ratio <= 1.5,
                "p99<=1.5x": p99_ratio <= 1.5,
                "cpu<=2x": cpu_ratio <= 2.0,
                "1 GET": max(gets) == 1,
                "bytes<=1.1x+batch": mean_read <= bytes_goal,
            },
        )
        note(
            f"kafka fetch ({variant}) {srv.name}: p50 {ours['p50_ms']} ms / p99 {ours['p99_ms']} "
            f"ms vs raw needed {base['p50_ms']} / {base['p99_ms']} ms (pairs: p50 "
            f"{record['pair_ratio_p50']}x, p99 {record['pair_ratio_p99']}x; raw read "
            f"{exact_base['p50_ms']} / {exact_base['p99_ms']}); CPU {ours['cpu_ms']} vs "
            f"{base['cpu_ms']} ms; {record['gets_per_fetch_mean']} GETs; bytes {mean_read:.0f} "
            f"vs needed {mean_needed:.0f}"
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
