"""Read throughput and random-read cost vs raw boto3 and vs Pulsar's algorithm.

For every server (Ceph RGW by default, moto as a second column) and entry size, a synthetic
ledger is offloaded once with our writer (64 MiB blocks, index extension). Then, each in a
fresh process:

* sequential: every entry through ``ReadHandle.iter_entries`` (one ``(id, payload)`` tuple
  per entry), again through ``ReadHandle.iter_packed`` (packed batches, no object per entry)
  and through ``ReadHandle.iter_spans`` (spans of the fetched buffers, no copy), each with
  1 MiB reads of one streamed GET with read-ahead and every block's CRC32C checked, vs a raw
  boto3 ``get_object`` of the data object read in 1 MiB chunks, same server, same run (goal:
  ratio >= 0.9); each checks that every entry was read;
* random: single-entry reads at random ids: data GETs per read and latency p50/p99 for ours
  (fine offsets of the index extension) vs Pulsar's algorithm (the same objects opened with
  ``emulate_pulsar=True``: no extension, floor lookup, skip from the block's start, fixed
  ``read_buffer_size`` GETs, no read-ahead).

The sequential variants take turns (``--repeat`` runs each, every run after the machine went
quiet) and each row reports the median run (``best_ratio`` compares the best runs).

Pulsar's algorithm scans half a 64 MiB block per random read on average, so it runs fewer
reads (``--pulsar-random``). moto reads the whole object for every ranged GET: on moto the
sequential rows read the same 512 MiB ledger as on RGW (``--moto-size``), but the random reads
go to a second, smaller ledger (``--moto-random-size``, 64M), and fewer of them
(``--moto-random``).

    python -m bench read [--size 512M] [--moto-size 512M] [--moto-random-size 64M]
                         [--entries 1K,100K] [--servers rgw,moto] [--random 1000]
                         [--pulsar-random 100] [--moto-random 50] [--repeat 3]
                         [--placement shared,split]

``--placement split`` runs the S3 server and the measured process on separate CPUs (a stand-in
for a server on other machines, see ``bench/placement.py``); its rows end in ``.split``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

from bench import note, report
from bench.common import (
    BENCH_LEDGER,
    BENCH_UUID,
    ClientCost,
    Server,
    empty_bucket,
    endpoint_from_json,
    endpoint_to_json,
    ledger_for,
    peak_rss_mb,
    percentile,
    quiet_logs,
    raw_client,
    run_worker,
    server,
    store_for,
    take_turns,
)
from bench.placement import Placement, add_run_arguments, parse_placements, pin_worker, placed
from devservers.endpoint import S3Endpoint
from formats.keys import data_key
from offloader.config import OffloadSettings
from offloader.units import parse_size

GOAL_RATIO = 0.9
CHUNK = 1024 * 1024


def _settings(spec: dict[str, Any]) -> OffloadSettings:
    return OffloadSettings(max_block_size=spec["block"])


def _seq_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from offloader.read.handle import ReadHandle

    settings = _settings(spec)
    store = store_for(endpoint_from_json(spec["endpoint"]), spec["bucket"], settings)
    cost = ClientCost()
    start = time.perf_counter()
    with ReadHandle.open(store, BENCH_LEDGER, BENCH_UUID, settings) as handle:
        total = entries = 0
        api = spec.get("api", "entries")
        if api in ("packed", "spans"):
            batches = (handle.iter_packed if api == "packed" else handle.iter_spans)(
                0, handle.last_add_confirmed
            )
            for batch in batches:
                total += batch.payload_bytes
                entries += batch.count
        else:
            for entry in handle.iter_entries(0, handle.last_add_confirmed):
                total += len(entry.payload)
                entries += 1
        if entries != handle.last_add_confirmed + 1 or total != handle.length:
            raise SystemExit(f"read {entries} entries, {total} bytes: not the whole ledger")
        size, gets = handle.index.data_object_length, handle.data_gets
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "bytes": size,
        "payload": total,
        "gets": gets,
        "rss_mb": peak_rss_mb(),
        **cost.fields(),
    }


def _seq_raw(spec: dict[str, Any]) -> dict[str, Any]:
    client = raw_client(endpoint_from_json(spec["endpoint"]))
    cost = ClientCost()
    start = time.perf_counter()
    body = client.get_object(Bucket=spec["bucket"], Key=data_key(BENCH_UUID, BENCH_LEDGER))["Body"]
    total = 0
    for chunk in body.iter_chunks(CHUNK):
        total += len(chunk)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "bytes": total, "rss_mb": peak_rss_mb(), **cost.fields()}


def _random(spec: dict[str, Any]) -> dict[str, Any]:
    from offloader.read.handle import ReadHandle

    settings = _settings(spec)
    store = store_for(endpoint_from_json(spec["endpoint"]), spec["bucket"], settings)
    rng = random.Random(7)
    with ReadHandle.open(
        store, BENCH_LEDGER, BENCH_UUID, settings, emulate_pulsar=spec["variant"] == "random-pulsar"
    ) as handle:
        ids = [rng.randrange(handle.last_add_confirmed + 1) for _ in range(spec["count"])]
        latencies, gets = [], []
        for entry_id in ids:
            before = handle.data_gets
            start = time.perf_counter()
            handle.read(entry_id, entry_id)
            latencies.append(time.perf_counter() - start)
            gets.append(handle.data_gets - before)
    return {
        "count": len(ids),
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "mean_ms": sum(latencies) / len(latencies) * 1e3,
        "gets_per_read": sum(gets) / len(gets),
        "max_gets": max(gets),
    }


def _worker(spec: dict[str, Any]) -> None:
    pin_worker(spec)
    variant = spec["variant"]
    if variant == "seq-ours":
        result = _seq_ours(spec)
    elif variant == "seq-raw":
        result = _seq_raw(spec)
    else:
        result = _random(spec)
    print(json.dumps(result), flush=True)


def main(argv: list[str]) -> int:
    quiet_logs()
    if argv[:1] == ["--worker"]:
        _worker(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench read", description=__doc__)
    parser.add_argument("--size", default="512M", help="ledger payload size on RGW (512M)")
    parser.add_argument(
        "--moto-size", default="512M", help="ledger size on moto, sequential reads (512M)"
    )
    parser.add_argument(
        "--moto-random-size",
        default="64M",
        help="ledger size on moto for random reads (64M: moto reads the whole object per GET)",
    )
    parser.add_argument("--entries", default="1K,100K", help="entry sizes (1K,100K)")
    parser.add_argument("--servers", default="rgw,moto", help="columns: rgw,moto")
    parser.add_argument("--block", default="64M", help="max block size (64M)")
    parser.add_argument("--random", type=int, default=1000, help="random reads, ours (1000)")
    parser.add_argument(
        "--pulsar-random", type=int, default=100, help="random reads with Pulsar's algorithm (100)"
    )
    parser.add_argument(
        "--moto-random", type=int, default=50, help="random reads per variant on moto (50)"
    )
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    placements = parse_placements(args.placement)
    block = parse_size(args.block)
    for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
        with server(name) as srv:
            endpoint = srv.endpoint
            on_moto = srv.name == "moto"
            size = parse_size(args.moto_size if on_moto else args.size)
            random_size = parse_size(args.moto_random_size) if on_moto else size
            for entry in [parse_size(e) for e in args.entries.split(",")]:
                buckets = {size: _offloaded(endpoint, size, entry, block)}
                if random_size not in buckets:
                    buckets[random_size] = _offloaded(endpoint, random_size, entry, block)
                spec = {"endpoint": endpoint_to_json(endpoint), "block": block}
                for place in placements:
                    with placed(srv.pids, place) as cpus:
                        _measure(
                            srv,
                            {**spec, "bucket": buckets[size], "cpus": cpus},
                            {
                                **spec,
                                "bucket": buckets[random_size],
                                "cpus": cpus,
                                "ledger_size": random_size,
                            },
                            entry,
                            args,
                            place,
                        )
                for bucket in buckets.values():
                    empty_bucket(endpoint, bucket)
    return 0


def _offloaded(endpoint: S3Endpoint, size: int, entry: int, block: int) -> str:
    """A new bucket holding the bench ledger (``size`` bytes of ``entry``-byte entries),
    offloaded by our writer; returns the bucket's name."""
    from offloader.offload.writer import offload_ledger

    bucket = endpoint.new_bucket()
    settings = OffloadSettings(max_block_size=block)
    store = store_for(endpoint, bucket, settings)
    try:
        offload_ledger(ledger_for(size, entry), store, BENCH_UUID, settings)
    finally:
        store.close()
    return bucket


def _measure(
    srv: Server,
    spec: dict[str, Any],
    random_spec: dict[str, Any],
    entry: int,
    args: argparse.Namespace,
    place: Placement,
) -> None:
    """The sequential rows (the ledger of ``spec``) and the random rows (that of
    ``random_spec``: the same one except on moto) of one entry size in one placement."""
    on_moto = srv.name == "moto"
    block = spec["block"]
    common: dict[str, Any] = {
        "server": srv.name,
        "server_note": srv.note,
        "entry_size": entry,
        "block_size": block,
        "placement": place.name,
    }
    where = f"{srv.name} {entry}B {place.name}"
    tail = f"{srv.name}.{entry // 1024}KiB{place.suffix}"
    # iter_entries keeps the historical row name; the batch APIs get a suffix
    apis = (("entries", ""), ("packed", "_packed"), ("spans", "_spans"))
    variants = {"raw": {**spec, "variant": "seq-raw"}}
    variants.update({api: {**spec, "variant": "seq-ours", "api": api} for api, _ in apis})
    runs = take_turns("bench.read", variants, args.repeat)
    raw = runs["raw"]
    for api, suffix in apis:
        ours = runs[api]
        record = report(
            f"read.sequential{suffix}.{tail}",
            ours["bytes"] / 1e6 / ours["seconds"],
            raw["bytes"] / 1e6 / raw["seconds"],
            "MB/s",
            bytes=ours["bytes"],
            gets=ours["gets"],
            goal_ratio=GOAL_RATIO,
            peak_rss_mb=round(ours["rss_mb"], 1),
            baseline_peak_rss_mb=round(raw["rss_mb"], 1),
            api=api,
            best_ratio=round(raw["best_seconds"] / ours["best_seconds"], 4),
            # the measured process alone (the median run's): CPU seconds and page faults
            client_cpu_s=ours["client_cpu_s"],
            baseline_client_cpu_s=raw["client_cpu_s"],
            client_faults=ours["client_faults"],
            baseline_client_faults=raw["client_faults"],
            ours_runs_s=ours["runs_seconds"],
            baseline_runs_s=raw["runs_seconds"],
            **common,
        )
        note(
            f"read seq {api} {where}: {record['ours']:.1f} MB/s vs raw "
            f"{record['baseline']:.1f} MB/s (ratio {record['ratio']})"
        )
    n_ours = args.moto_random if on_moto else args.random
    n_pulsar = min(args.moto_random, args.pulsar_random) if on_moto else args.pulsar_random
    mine = run_worker("bench.read", {**random_spec, "variant": "random-ours", "count": n_ours})
    pulsar = run_worker(
        "bench.read", {**random_spec, "variant": "random-pulsar", "count": n_pulsar}
    )
    extra = {
        "ours_reads": mine["count"],
        "pulsar_reads": pulsar["count"],
        "ours_gets_per_read": round(mine["gets_per_read"], 3),
        "pulsar_gets_per_read": round(pulsar["gets_per_read"], 3),
        "ours_max_gets": mine["max_gets"],
        "ledger_size": random_spec.get("ledger_size"),
        **common,
    }
    for stat in ("p50_ms", "p99_ms"):
        report(
            f"read.random.{stat}.{tail}",
            mine[stat],
            pulsar[stat],
            "ms",
            higher_is_better=False,
            **extra,
        )
    note(
        f"read random {where}: ours {mine['gets_per_read']:.2f} GETs/read p50 "
        f"{mine['p50_ms']:.1f} ms p99 {mine['p99_ms']:.1f} ms; Pulsar "
        f"{pulsar['gets_per_read']:.1f} GETs/read p50 {pulsar['p50_ms']:.1f} ms "
        f"p99 {pulsar['p99_ms']:.1f} ms"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
