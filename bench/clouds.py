"""The GCS and Azure stores on their emulators, each against its own SDK's raw calls, in one run.

For each emulator (fake-gcs-server, Azurite):

* ``offload``: our writer offloads a synthetic ledger (``--size``, default 32 MiB of 1 KiB
  entries, ``--block`` 8 MiB blocks, ``offload_concurrency`` 4) vs the SDK's own upload of the
  same number of bytes (``Blob.upload_from_string`` / ``ContainerClient.upload_blob`` with
  ``max_concurrency`` 4). Goal: ratio >= 0.9. A ledger within ``one_request_upload_max`` (64 MiB
  by default) is sent in one request, as the SDK sends it.
* ``offload_vs_blocks``: the same offload vs the SDK's own upload in the same blocks (parts
  uploaded on 4 threads then composed and deleted on GCS; blocks staged on 4 threads then the
  block list committed on Azure), the request pattern a block format needs.
* ``offload_multipart`` / ``offload_multipart_vs_blocks``: the same offload forced through
  the store's multipart emulation (``one_request_upload_max=0``), against the same baselines.
* ``read``: reading every entry back sequentially through the ReadHandle vs the SDK's own
  download of the data object (``Blob.download_as_bytes`` / ``download_blob().readall()``).
  Goal: ratio >= 0.9.
* ``random_gets``: store GETs per random single-entry read (ours) vs 1.0. Goal: 1.0.

The variants take turns, ``--repeat`` times (each baseline's object deleted after it, untimed,
so that the emulators' memory does not grow round after round); the median run of each is
reported, with the client process's CPU seconds of that run beside it (``ours_cpu_s``,
``baseline_cpu_s``; the emulators run in their own processes and are not counted).

    python -m bench clouds [--size 32M] [--block 8M] [--repeat 3] [--clouds gcs,azure]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import note, report
from bench.common import BENCH_LEDGER, BENCH_UUID, ledger_for, quiet_logs
from formats.keys import data_key, index_key
from offloader.config import OffloadSettings
from offloader.offload.writer import offload_ledger
from offloader.read.handle import ReadHandle
from offloader.store.base import ObjectStore
from offloader.store.faulty import FaultyObjectStore
from offloader.units import parse_size

GOAL_RATIO = 0.9


@contextlib.contextmanager
def _cloud(name: str) -> Iterator[tuple[ObjectStore, Callable[[str, bytes], None], Any, Any]]:
    """(our store, the SDK's raw upload, the SDK's raw download, the SDK's raw upload in
    blocks as ours makes them: parts composed on GCS, staged blocks committed on Azure)."""
    from devservers.cloud import start_azurite, start_gcs

    if name == "gcs":
        from offloader.store.gcs import GCSObjectStore

        with start_gcs() as gcs:
            bucket = gcs.new_bucket()
            raw = gcs.client().bucket(bucket)
            store = GCSObjectStore(bucket, endpoint=gcs.url)

            def upload(key: str, data: bytes) -> None:
                raw.blob(key).upload_from_string(data)

            def download(key: str) -> bytes:
                return bytes(raw.blob(key).download_as_bytes())

            def blocks(key: str, data: bytes, block: int) -> None:
                spans = [(i, data[i : i + block]) for i in range(0, len(data), block)]
                parts = [raw.blob(f"{key}.part{i}") for i, _ in spans]
                with ThreadPoolExecutor(4) as pool:
                    list(pool.map(lambda p, c: p.upload_from_string(c[1]), parts, spans))
                raw.blob(key).compose(parts)
                for part in parts:
                    part.delete()

            yield store, upload, download, blocks
            store.close()
        return
    from offloader.store.azure import AzureObjectStore

    with tempfile.TemporaryDirectory() as work, start_azurite(Path(work)) as azurite:
        container = azurite.new_container()
        raw_container = azurite.client().get_container_client(container)
        store = AzureObjectStore(container, connection_string=azurite.connection_string)

        def upload_az(key: str, data: bytes) -> None:
            raw_container.upload_blob(key, data, overwrite=True, max_concurrency=4)

        def download_az(key: str) -> bytes:
            return bytes(raw_container.download_blob(key, max_concurrency=4).readall())

        def blocks_az(key: str, data: bytes, block: int) -> None:
            from azure.storage.blob import BlobBlock

            blob = raw_container.get_blob_client(key)
            spans = list(range(0, len(data), block))
            ids = [base64.b64encode(f"{n:08d}".encode()).decode() for n in range(len(spans))]
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i, at: blob.stage_block(i, data[at : at + block]), ids, spans))
            blob.commit_block_list([BlobBlock(block_id=i) for i in ids])

        yield store, upload_az, download_az, blocks_az
        store.close()


def _timed(fn: Callable[[], Any], runs: list[tuple[float, float]]) -> Any:
    """Run ``fn``; append its (wall seconds, this process's CPU seconds) to ``runs``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median run by wall time: (wall, cpu)."""
    return sorted(runs)[len(runs) // 2]


def _measure(name: str, size: int, block: int, repeat: int) -> None:
    settings = OffloadSettings(
        max_block_size=block, offload_concurrency=4, enforce_min_block_size=False
    )
    # the store's multipart emulation (parts composed / blocks staged), never one request
    staged_settings = settings.replace(one_request_upload_max=0)
    ledger = ledger_for(size, 1024)
    whole = b"".join(bytes(ledger.payload(i)) for i in range(len(ledger.entry_lengths())))
    with _cloud(name) as (store, upload, download, blocks):
        ours_up: list[tuple[float, float]] = []
        ours_staged: list[tuple[float, float]] = []
        raw_up: list[tuple[float, float]] = []
        raw_blocks: list[tuple[float, float]] = []
        ours_read: list[tuple[float, float]] = []
        raw_read: list[tuple[float, float]] = []
        nbytes = 0

        def read_all() -> int:
            with ReadHandle.open(store, BENCH_LEDGER, BENCH_UUID, settings) as handle:
                return sum(1 for _ in handle.read(0, handle.last_add_confirmed))

        for _ in range(repeat):
            raw_key, blocks_key = f"raw-{time.time_ns()}", f"blocks-{time.time_ns()}"
            _timed(lambda k=raw_key: upload(k, whole), raw_up)  # type: ignore[misc]
            _timed(lambda k=blocks_key: blocks(k, whole, block), raw_blocks)  # type: ignore[misc]
            # the baselines' objects go at once (untimed): an in-memory emulator that keeps
            # every round's copies slows down (garbage collection) whichever variant runs next
            store.delete(raw_key)
            store.delete(blocks_key)
            store.delete(data_key(BENCH_UUID, BENCH_LEDGER))  # the previous run's objects
            store.delete(index_key(BENCH_UUID, BENCH_LEDGER))
            result = _timed(lambda: offload_ledger(ledger, store, BENCH_UUID, settings), ours_up)
            store.delete(index_key(BENCH_UUID, BENCH_LEDGER))
            _timed(lambda: offload_ledger(ledger, store, BENCH_UUID, staged_settings), ours_staged)
            nbytes = result.data_size
            _timed(lambda: download(data_key(BENCH_UUID, BENCH_LEDGER)), raw_read)
            count = _timed(read_all, ours_read)
            assert count == len(ledger.entry_lengths())

        counting = FaultyObjectStore(store)
        reads = 20
        with ReadHandle.open(counting, BENCH_LEDGER, BENCH_UUID, settings) as handle:
            counting.reset_counts()
            for entry in random.Random(5).sample(range(len(ledger.entry_lengths())), reads):
                handle.read_entry(entry)
            gets = counting.calls["get_range"] + counting.calls["get"]
            gets += counting.calls.get("open_range", 0)
    mb = nbytes / 1e6
    for what, ours, raw in (
        ("offload", ours_up, raw_up),
        ("offload_vs_blocks", ours_up, raw_blocks),
        ("offload_multipart", ours_staged, raw_up),
        ("offload_multipart_vs_blocks", ours_staged, raw_blocks),
        ("read", ours_read, raw_read),
    ):
        (ours_s, ours_cpu), (raw_s, raw_cpu) = _median(ours), _median(raw)
        record = report(
            f"clouds.{name}.{what}",
            mb / ours_s,
            mb / raw_s,
            "MB/s",
            bytes=nbytes,
            block_size=block,
            goal_ratio=GOAL_RATIO,
            repeat=repeat,
            ours_cpu_s=round(ours_cpu, 3),
            baseline_cpu_s=round(raw_cpu, 3),
            ours_runs_s=[round(w, 3) for w, _ in ours],
            baseline_runs_s=[round(w, 3) for w, _ in raw],
            ours_runs_cpu_s=[round(c, 3) for _, c in ours],
            baseline_runs_cpu_s=[round(c, 3) for _, c in raw],
        )
        note(
            f"{name} {what}: {record['ours']:.1f} MB/s ({ours_cpu:.2f} CPU s) vs SDK "
            f"{record['baseline']:.1f} MB/s ({raw_cpu:.2f} CPU s) (ratio {record['ratio']})"
        )
    report(
        f"clouds.{name}.random_gets",
        gets / reads,
        1.0,
        "GETs per random read",
        higher_is_better=False,
        reads=reads,
    )
    note(f"{name}: {gets / reads:.2f} GETs per random single-entry read")


def main(argv: list[str]) -> int:
    quiet_logs()
    parser = argparse.ArgumentParser(prog="python -m bench clouds", description=__doc__)
    parser.add_argument("--size", default="32M", help="ledger payload size (32M)")
    parser.add_argument("--block", default="8M", help="max block size (8M)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clouds", default="gcs,azure")
    args = parser.parse_args(argv)
    for name in [c.strip() for c in args.clouds.split(",") if c.strip()]:
        _measure(name, parse_size(args.size), parse_size(args.block), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
