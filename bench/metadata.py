"""The metadata store's cost per ledger: PostgreSQL (ours, shared) against SQLite (baseline).

``python -m bench metadata [--ledgers N] [--processes P]``

One ledger's metadata life is the changes the offloader makes for it: allocate an id, add the
ledger, close it, ``begin_offload``, ``complete_offload`` (the UUID compare-and-set),
``mark_local_deleted``, plus one ``list_ledgers`` read: seven transactions. The benchmark runs
that for N ledgers in each of P processes at once (one topic per process) against a fresh
SQLite file (the embedded baseline, ``synchronous=FULL``) and a throwaway local PostgreSQL
server (``devservers/postgres.py``; ``fsync`` off there, so the figures are of the
protocol and the round trips, not of the disk), and reports ledgers per second (higher is
better) with the client processes' CPU seconds beside them. Skipped, with a note, where
PostgreSQL cannot run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
import time
import uuid
from pathlib import Path

from bench import note, report

NS = "bench/metadata"
DRIVER_PROPS = {"store_url": "file:///tmp/x", "bucket": "", "region": "", "endpoint": ""}


def _worker(location: str, topic: str, ledgers: int, start: float) -> None:
    from offloader.metadata import open_metadata_store
    from offloader.metadata.base import DriverMetadata

    meta = open_metadata_store(location)
    driver = DriverMetadata("file", DRIVER_PROPS)
    meta.ensure_topic(topic, 1)
    while time.time() < start:
        time.sleep(0.001)
    for _ in range(ledgers):
        lid = meta.allocate_ledger_id()
        meta.add_ledger(topic, lid, 2)
        meta.close_ledger(lid, 3, 10, 1000)
        attempt = str(uuid.uuid4())
        meta.begin_offload(lid, attempt, driver, 4, data_key=f"d{lid}", index_key=f"i{lid}")
        meta.complete_offload(lid, attempt, 5, data_size=1000, index_size=100)
        meta.mark_local_deleted(lid, attempt)
        meta.list_ledgers(topic)
    meta.close()


def _run(location: str, ledgers: int, processes: int) -> tuple[float, float]:
    """(ledgers per second, client CPU seconds) of P processes doing N ledgers each."""
    from offloader.metadata import open_metadata_store

    meta = open_metadata_store(location)
    meta.create_namespace(NS, 1)
    meta.close()
    ctx = multiprocessing.get_context("spawn")
    start = time.time() + 2.0  # every process connected and migrated before the clock starts
    procs = [
        ctx.Process(target=_worker, args=(location, f"persistent://{NS}/t{i}", ledgers, start))
        for i in range(processes)
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a benchmark worker failed (exit {p.exitcode})")
    elapsed = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ledgers * processes / elapsed, cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench metadata", description=__doc__)
    parser.add_argument("--ledgers", type=int, default=200, help="ledgers per process (200)")
    parser.add_argument("--processes", type=int, default=2, help="concurrent processes (2)")
    args = parser.parse_args(argv)
    from devservers import postgres

    reason = postgres.unavailable_reason()
    if reason is not None:
        note(f"bench metadata: skipped, PostgreSQL cannot run here ({reason})")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-metadata.") as tmp:
        sqlite_rate, sqlite_cpu = _run(str(Path(tmp) / "home"), args.ledgers, args.processes)
        with postgres.start_postgres() as server:
            pg_rate, pg_cpu = _run(server.new_url(), args.ledgers, args.processes)
    report(
        f"metadata.ledger_life.p{args.processes}",
        pg_rate,
        sqlite_rate,
        "ledgers/s",
        ours_backend="postgresql (local server, fsync off)",
        baseline_backend="sqlite (synchronous=FULL)",
        transactions_per_ledger=7,
        ledgers=args.ledgers * args.processes,
        client_cpu_s_ours=round(pg_cpu, 3),
        client_cpu_s_baseline=round(sqlite_cpu, 3),
    )
    return 0
