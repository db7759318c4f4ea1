"""Offload throughput vs a raw boto3 multipart upload, on Ceph RGW (default) and moto.

For every server and entry size: our writer offloads a synthetic ledger (default 512 MiB of
1 KiB and of 100 KiB entries, on moto too: ``--moto-size`` makes it smaller there) with
64 MiB blocks and ``offload_concurrency`` 4; the baseline uploads the same number of bytes,
in parts of the same sizes, with plain boto3 ``upload_part`` calls on the same number of
threads, to the same server, in the same run; each row carries both processes' client CPU
seconds. Each variant runs in a fresh process, so its peak
RSS is its own (goal: <= concurrency x block size + 150 MB). The variants take turns,
``--repeat`` runs each, every run after the machine went quiet; the median run is reported
(``best_ratio`` compares the best runs).

    python -m bench offload [--size 512M] [--moto-size 512M] [--entries 1K,100K]
                            [--servers rgw,moto] [--concurrency 4] [--block 64M] [--repeat 3]
                            [--placement shared,split] [--ledgers 1]

``--ledgers N`` offloads N ledgers one after another in each measured process, as a broker
does (the raw baseline uploads N objects from its buffers): from the second on, the offload
frames into the block buffers the first gave back (offloader/offload/block_buffers.py), so
the rows show the steady state beside the first ledger's page faults.

``--placement split`` runs the S3 server and the measured process on separate CPUs (a stand-in
for a server on other machines, see ``bench/placement.py``); its rows end in ``.split``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid as uuid_mod
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import note, report
from bench.common import (
    BENCH_UUID,
    ClientCost,
    Server,
    empty_bucket,
    endpoint_from_json,
    endpoint_to_json,
    ledger_for,
    peak_rss_mb,
    quiet_logs,
    raw_client,
    server,
    store_for,
    take_turns,
)
from bench.placement import Placement, add_run_arguments, parse_placements, pin_worker, placed
from devservers.endpoint import S3Endpoint
from formats.layout import plan_blocks
from offloader.config import OffloadSettings
from offloader.units import parse_size

GOAL_RATIO = 0.9
RSS_SLACK_MB = 150.0


def _ours(spec: dict[str, Any]) -> dict[str, Any]:
    from offloader.offload.writer import offload_ledger

    endpoint = endpoint_from_json(spec["endpoint"])
    settings = OffloadSettings(
        max_block_size=spec["block"], offload_concurrency=spec["concurrency"]
    )
    store = store_for(endpoint, spec["bucket"], settings)
    ledgers = spec.get("ledgers", 1)
    ledger = ledger_for(spec["size"], spec["entry"])
    uuids = [BENCH_UUID, *(str(uuid_mod.uuid4()) for _ in range(ledgers - 1))]
    cost = ClientCost()
    start = time.perf_counter()
    # ledger after ledger in one process, as a broker offloads them: from the second on,
    # the blocks are framed into the buffers the first one gave back
    per_ledger, total_bytes = [], 0
    for uuid in uuids:
        began = time.perf_counter()
        result = offload_ledger(ledger, store, uuid, settings)
        per_ledger.append(round(time.perf_counter() - began, 4))
        total_bytes += result.data_size
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "bytes": total_bytes,
        "rss_mb": peak_rss_mb(),
        "blocks": result.block_count,
        "ledger_seconds": per_ledger,
        **cost.fields(),
    }


def _raw(spec: dict[str, Any]) -> dict[str, Any]:
    endpoint = endpoint_from_json(spec["endpoint"])
    concurrency, block = spec["concurrency"], spec["block"]
    ledger = ledger_for(spec["size"], spec["entry"])
    sizes = [p.size for p in plan_blocks(ledger.entry_lengths(), block)]
    client = raw_client(endpoint, pool=concurrency * 2 + 2)
    # the same bytes our writer sends: part sizes of the plan, from concurrency+1 buffers
    source = bytes(ledger.payload(0)) * (block // max(1, spec["entry"]) + 1)
    buffers = [bytearray(source[:block]) for _ in range(concurrency + 1)]
    bucket, key = spec["bucket"], f"raw-{time.time_ns()}"
    cost = ClientCost()
    start = time.perf_counter()
    per_ledger = []
    for n in range(spec.get("ledgers", 1)):
        began = time.perf_counter()
        _raw_object(client, bucket, f"{key}-{n}", buffers, sizes, concurrency)
        per_ledger.append(round(time.perf_counter() - began, 4))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "bytes": sum(sizes) * len(per_ledger),
        "ledger_seconds": per_ledger,
        "rss_mb": peak_rss_mb(),
        "blocks": len(sizes),
        **cost.fields(),
    }


def _raw_object(
    client: Any,
    bucket: str,
    key: str,
    buffers: list[bytearray],
    sizes: list[int],
    concurrency: int,
) -> None:
    """One object in parts of ``sizes``, sent from ``buffers`` on ``concurrency`` threads."""
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]

    def put(number: int, size: int) -> dict[str, Any]:
        buf = buffers[number % len(buffers)]
        body = buf if size == len(buf) else bytes(memoryview(buf)[:size])
        resp = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )
        return {"PartNumber": number, "ETag": resp["ETag"]}

    with ThreadPoolExecutor(concurrency) as pool:
        parts = list(pool.map(put, range(1, len(sizes) + 1), sizes))
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )


def _worker(spec: dict[str, Any]) -> None:
    pin_worker(spec)
    result = _ours(spec) if spec["variant"] == "ours" else _raw(spec)
    print(json.dumps(result), flush=True)


def main(argv: list[str]) -> int:
    quiet_logs()
    if argv[:1] == ["--worker"]:
        _worker(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench offload", description=__doc__)
    parser.add_argument("--size", default="512M", help="ledger payload size on RGW (512M)")
    parser.add_argument("--moto-size", default="512M", help="ledger size on moto (512M)")
    parser.add_argument("--entries", default="1K,100K", help="entry sizes (1K,100K)")
    parser.add_argument("--servers", default="rgw,moto", help="columns: rgw,moto")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--block", default="64M", help="max block size (64M)")
    parser.add_argument(
        "--ledgers",
        type=int,
        default=1,
        help="ledgers offloaded one after another in each measured process (1); the raw "
        "baseline uploads as many objects; rows with more than one end in .xN",
    )
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    placements = parse_placements(args.placement)
    block = parse_size(args.block)
    for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
        with server(name) as srv:
            endpoint = srv.endpoint
            bucket = endpoint.new_bucket()
            size = parse_size(args.moto_size if srv.name == "moto" else args.size)
            for entry in [parse_size(e) for e in args.entries.split(",")]:
                spec = {
                    "endpoint": endpoint_to_json(endpoint),
                    "bucket": bucket,
                    "size": size,
                    "entry": entry,
                    "block": block,
                    "concurrency": args.concurrency,
                    "ledgers": max(1, args.ledgers),
                }
                for place in placements:
                    with placed(srv.pids, place) as cpus:
                        _measure_entry(srv, {**spec, "cpus": cpus}, args, place)
    return 0


def _measure_entry(
    srv: Server, spec: dict[str, Any], args: argparse.Namespace, place: Placement
) -> None:
    """Ours vs raw for one entry size in one placement: one row."""
    entry, block = spec["entry"], spec["block"]

    def cleanup(e: S3Endpoint = srv.endpoint, b: str = spec["bucket"]) -> None:
        empty_bucket(e, b)

    # the variants take turns, each after the bucket was emptied and the machine went quiet,
    # so that RGW's garbage collection after a cleanup falls on both alike
    runs = take_turns(
        "bench.offload",
        {v: {**spec, "variant": v} for v in ("raw", "ours")},
        args.repeat,
        after_each=cleanup,
    )
    raw, ours = runs["raw"], runs["ours"]
    ledgers = spec.get("ledgers", 1)
    ledgers_suffix = f".x{ledgers}" if ledgers > 1 else ""
    mb = ours["bytes"] / 1e6
    rss_goal = args.concurrency * block / 1e6 + RSS_SLACK_MB
    record = report(
        f"offload.{srv.name}.{entry // 1024}KiB{place.suffix}{ledgers_suffix}",
        mb / ours["seconds"],
        raw["bytes"] / 1e6 / raw["seconds"],
        "MB/s",
        server=srv.name,
        server_note=srv.note,
        placement=place.name,
        bytes=ours["bytes"],
        blocks=ours["blocks"],
        entry_size=entry,
        block_size=block,
        concurrency=args.concurrency,
        goal_ratio=GOAL_RATIO,
        peak_rss_mb=round(ours["rss_mb"], 1),
        baseline_peak_rss_mb=round(raw["rss_mb"], 1),
        rss_goal_mb=round(rss_goal, 1),
        rss_ok=ours["rss_mb"] <= rss_goal,
        repeat=args.repeat,
        best_ratio=round(raw["best_seconds"] / ours["best_seconds"], 4),
        ours_runs_s=ours["runs_seconds"],
        baseline_runs_s=raw["runs_seconds"],
        # the measured process alone (the median run's): CPU seconds and page faults
        client_cpu_s=ours["client_cpu_s"],
        baseline_client_cpu_s=raw["client_cpu_s"],
        client_faults=ours["client_faults"],
        baseline_client_faults=raw["client_faults"],
        ledgers=ledgers,
        # the median run's seconds per ledger (the first pays for fresh block buffers)
        ledger_seconds=ours["ledger_seconds"],
        baseline_ledger_seconds=raw["ledger_seconds"],
    )
    note(
        f"offload {srv.name} {entry}B entries {place.name}: {record['ours']:.1f} MB/s vs raw "
        f"{record['baseline']:.1f} MB/s (ratio {record['ratio']}), peak RSS "
        f"{ours['rss_mb']:.0f} MB (goal <= {rss_goal:.0f}); client CPU "
        f"{ours['client_cpu_s']:.2f} s vs raw {raw['client_cpu_s']:.2f} s"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
