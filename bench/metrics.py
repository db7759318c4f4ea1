"""The cost of metrics: an offload and small ranged GETs through the metered object store
(``service run --metrics-addr``) against the same store without metrics, on moto (default).

Variant ``plain`` is the S3 store as the flows use it with metrics off; ``metered`` wraps it in
:class:`~offloader.store.metered.MeteredObjectStore` recording into a
:class:`~offloader.metrics.prometheus.PrometheusMetrics` (what every request costs: two clocks,
a counter, a histogram). Each variant runs in a fresh process, the variants take turns
(``--repeat``), the median run is reported with the client's CPU seconds. Two rows:
``metrics.offload`` (MB/s of an offload, ours = metered, baseline = plain) and
``metrics.get_range`` (requests/s of ``--gets`` 4 KiB ranged GETs).

    python -m bench metrics [--servers moto] [--size 64M] [--block 8M] [--gets 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench import note, report
from bench.common import (
    BENCH_UUID,
    empty_bucket,
    endpoint_from_json,
    endpoint_to_json,
    ledger_for,
    quiet_logs,
    server,
    store_for,
    take_turns,
)
from offloader.config import OffloadSettings
from offloader.units import parse_size

ENTRY = 1024
RANGE = 4096


def _worker(spec: dict[str, Any]) -> None:
    from formats.keys import data_key
    from offloader.offload.writer import offload_ledger

    endpoint = endpoint_from_json(spec["endpoint"])
    settings = OffloadSettings(
        max_block_size=spec["block"], offload_concurrency=4, enforce_min_block_size=False
    )
    store = store_for(endpoint, spec["bucket"], settings)
    if spec["variant"] == "metered":
        from offloader.metrics.prometheus import PrometheusMetrics
        from offloader.store.metered import MeteredObjectStore

        store = MeteredObjectStore(store, PrometheusMetrics())
    ledger = ledger_for(spec["size"], ENTRY)
    cpu, start = time.process_time(), time.perf_counter()
    result = offload_ledger(ledger, store, BENCH_UUID, settings)
    offload_s, offload_cpu = time.perf_counter() - start, time.process_time() - cpu
    key = data_key(BENCH_UUID, ledger.ledger_id)
    cpu, start = time.process_time(), time.perf_counter()
    for i in range(spec["gets"]):
        at = (i * 7919 * RANGE) % (result.data_size - RANGE)
        store.get_range(key, at, at + RANGE)
    gets_s, gets_cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        json.dumps(
            {
                "seconds": offload_s + gets_s,
                "offload_s": offload_s,
                "offload_cpu_s": offload_cpu,
                "bytes": result.data_size,
                "gets_s": gets_s,
                "gets_cpu_s": gets_cpu,
            }
        ),
        flush=True,
    )


def main(argv: list[str]) -> int:
    quiet_logs()
    if argv[:1] == ["--worker"]:
        _worker(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench metrics", description=__doc__)
    parser.add_argument("--servers", default="moto", help="servers: moto,rgw (moto)")
    parser.add_argument("--size", default="64M", help="ledger payload size (64M)")
    parser.add_argument("--block", default="8M", help="max block size (8M)")
    parser.add_argument("--gets", type=int, default=500, help="ranged GETs of 4 KiB (500)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
        with server(name) as srv:
            bucket = srv.endpoint.new_bucket()
            spec = {
                "endpoint": endpoint_to_json(srv.endpoint),
                "bucket": bucket,
                "size": parse_size(args.size),
                "block": parse_size(args.block),
                "gets": args.gets,
            }
            runs = take_turns(
                "bench.metrics",
                {v: {**spec, "variant": v} for v in ("plain", "metered")},
                args.repeat,
                after_each=lambda e=srv.endpoint, b=bucket: empty_bucket(e, b),
            )
            plain, metered = runs["plain"], runs["metered"]
            mb = metered["bytes"] / 1e6
            offload = report(
                f"metrics.offload.{srv.name}",
                mb / metered["offload_s"],
                plain["bytes"] / 1e6 / plain["offload_s"],
                "MB/s",
                server=srv.name,
                repeat=args.repeat,
                client_cpu_s=round(metered["offload_cpu_s"], 3),
                baseline_client_cpu_s=round(plain["offload_cpu_s"], 3),
            )
            gets = report(
                f"metrics.get_range.{srv.name}",
                args.gets / metered["gets_s"],
                args.gets / plain["gets_s"],
                "requests/s",
                server=srv.name,
                repeat=args.repeat,
                client_cpu_s=round(metered["gets_cpu_s"], 3),
                baseline_client_cpu_s=round(plain["gets_cpu_s"], 3),
            )
            note(
                f"metrics {srv.name}: offload {offload['ours']:.1f} vs {offload['baseline']:.1f}"
                f" MB/s (ratio {offload['ratio']}); 4 KiB GETs {gets['ours']:.0f} vs "
                f"{gets['baseline']:.0f}/s (ratio {gets['ratio']})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
