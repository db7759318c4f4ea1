"""Worker functions for the multi-process contract tests (run in spawned processes).

Each worker opens its own store from a backend name and a location, waits on a barrier so the
processes really race, and reports what happened through a queue.
"""

from __future__ import annotations

import multiprocessing
import traceback
import uuid as uuidlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from offloader.errors import OffloadAlreadyComplete, OffloadConflict
from offloader.metadata.base import DriverMetadata
from tests.metadata.backends import open_backend

DRIVER = DriverMetadata("file", {"store_url": "file:///tmp/objects"})
BARRIER_TIMEOUT_S = 60.0


def reports_errors(worker: Callable[..., None]) -> Callable[..., None]:
    """Put ``("error", traceback)`` on the results queue (the last argument) if the worker
    fails, so the parent fails fast instead of waiting for a result that never comes."""

    @wraps(worker)
    def run(*args: Any) -> None:
        try:
            worker(*args)
        except BaseException:
            args[-1].put(("error", traceback.format_exc()))
            raise

    return run


def _wait(barrier: Any) -> None:
    barrier.wait(BARRIER_TIMEOUT_S)


@reports_errors
def allocate_ids(backend: str, location: str, count: int, barrier: Any, results: Any) -> None:
    _wait(barrier)  # open (create, migrate) at the same time, then allocate at the same time
    store = open_backend(backend, location)
    try:
        _wait(barrier)
        results.put([store.allocate_ledger_id() for _ in range(count)])
    finally:
        store.close()


@reports_errors
def race_offloads(
    backend: str, location: str, worker: int, ledger_ids: list[int], barrier: Any, results: Any
) -> None:
    """For every ledger: begin an attempt and try to complete it; report per-ledger outcomes.

    On even-numbered ledgers every process begins before any completes (a barrier in between),
    so the completes race on the compare-and-set; on odd ones the processes run freely.
    """
    store = open_backend(backend, location)
    outcomes: list[tuple[int, str, str]] = []
    try:
        for index, ledger_id in enumerate(ledger_ids):
            uuid = str(uuidlib.uuid4())
            _wait(barrier)
            began = True
            try:
                store.begin_offload(
                    ledger_id, uuid, DRIVER, 1_000, data_key=f"{uuid}-d", index_key=f"{uuid}-i"
                )
            except OffloadAlreadyComplete:
                began = False
                outcomes.append((ledger_id, uuid, "already-complete"))
            if index % 2 == 0:
                _wait(barrier)
            if not began:
                continue
            try:
                store.complete_offload(ledger_id, uuid, 2_000, data_size=10, index_size=5)
            except OffloadConflict:
                outcomes.append((ledger_id, uuid, "conflict"))
            else:
                outcomes.append((ledger_id, uuid, "won"))
        results.put((worker, outcomes))
    finally:
        store.close()


@reports_errors
def race_lock(
    backend: str, location: str, topic: str, owner: str, barrier: Any, results: Any
) -> None:
    store = open_backend(backend, location)
    try:
        _wait(barrier)
        results.put((owner, store.try_acquire_offload_lock(topic, owner, 5_000, 60_000)))
    finally:
        store.close()


def run_workers(target: Callable[..., None], args_list: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``target(*args, barrier, results)`` in one spawned process per ``args``; return what
    each put on the queue. A failing worker fails the caller; no process is left behind."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    barrier = ctx.Barrier(len(args_list))
    processes = [ctx.Process(target=target, args=(*args, barrier, results)) for args in args_list]
    for process in processes:
        process.start()
    try:
        collected = [results.get(timeout=2 * BARRIER_TIMEOUT_S) for _ in processes]
        errors = [item[1] for item in collected if isinstance(item, tuple) and item[0] == "error"]
        if errors:
            raise AssertionError("a worker process failed:\n" + "\n".join(errors))
        for process in processes:
            process.join(timeout=BARRIER_TIMEOUT_S)
            if process.exitcode != 0:
                raise AssertionError(f"worker exited with {process.exitcode}")
        return collected
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
