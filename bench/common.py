"""Shared pieces of the offload and read benchmarks: servers, synthetic ledgers, workers.

* Servers: Ceph RGW (``devservers/ceph_rgw.py``) by default and moto's server as a second
  column. moto runs as a separate ``moto_server`` process (never in the benchmark's process,
  whose GIL it would share). When RGW cannot start, the run falls back to moto and every JSON
  line says so (``server_note``).
* :class:`SyntheticLedger`: a LedgerReader of ``count`` entries of ``entry_size`` bytes whose
  payloads are views into a 16 MiB random pool, so a 512 MiB ledger costs no memory; it also
  has the optional span read (``read_spans``: the same bytes, as spans of the pool).
* Workers: each measured variant runs in a fresh interpreter (``python -m bench.<mod> --worker
  JSON``) so that its peak RSS (``ru_maxrss``) is its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from devservers.endpoint import S3Endpoint
from formats.ledger_metadata import LedgerMetadata
from formats.spans import EntrySpans
from offloader.config import OffloadSettings

POOL_SIZE = 16 * 1024 * 1024
#: payload ``i`` of a SyntheticLedger starts at pool offset ``(i * POOL_STRIDE) % POOL_SIZE``
POOL_STRIDE = 4099
BENCH_UUID = "5b1e0c2a-7d3f-4c55-9e0a-3f6a1b2c4d5e"
BENCH_LEDGER = 1


@dataclass(frozen=True)
class Server:
    """A running S3 server for one benchmark column."""

    name: str  # "rgw" or "moto"
    endpoint: S3Endpoint
    note: str = ""
    #: the server's processes (for CPU placement, :mod:`bench.placement`)
    pids: tuple[int, ...] = ()


def endpoint_to_json(endpoint: S3Endpoint) -> dict[str, str]:
    return {
        "name": endpoint.name,
        "url": endpoint.url,
        "access_key": endpoint.access_key,
        "secret_key": endpoint.secret_key,
        "region": endpoint.region,
    }


def endpoint_from_json(data: dict[str, str]) -> S3Endpoint:
    return S3Endpoint(**data)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def moto_process() -> Iterator[tuple[S3Endpoint, int]]:
    """``moto_server`` in its own process on a free port (yields its endpoint and pid);
    stopped by its pid."""
    exe = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which(
        "moto_server"
    )
    if exe is None:
        raise RuntimeError("moto_server is not installed (pip install 'moto[server]')")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        endpoint = S3Endpoint(
            name="moto", url=f"http://127.0.0.1:{port}", access_key="testing", secret_key="testing"
        )
        yield endpoint, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def server(name: str) -> Iterator[Server]:
    """Start one server by name; ``rgw`` falls back to moto (with a note) if it cannot run."""
    if name == "rgw":
        from devservers import ceph_rgw

        reason = ceph_rgw.unavailable_reason()
        if reason is None:
            with tempfile.TemporaryDirectory(prefix="bench-rgw.") as base:
                try:
                    cm = ceph_rgw.start_cluster(Path(base))
                    cluster = cm.__enter__()
                except Exception as exc:  # any start failure -> moto fallback
                    reason = f"RGW failed to start: {type(exc).__name__}"
                else:
                    try:
                        assert cluster.endpoint is not None
                        yield Server("rgw", cluster.endpoint, pids=tuple(cluster.pids.values()))
                    finally:
                        cm.__exit__(None, None, None)
                    return
        with moto_process() as (endpoint, pid):
            note = f"RGW unavailable ({reason}); ran on moto"
            yield Server("moto", endpoint, note=note, pids=(pid,))
        return
    if name != "moto":
        raise ValueError(f"unknown server {name!r}: use rgw or moto")
    with moto_process() as (endpoint, pid):
        note = "moto: ranged GETs read the whole object server-side"
        yield Server("moto", endpoint, note=note, pids=(pid,))


class SyntheticLedger:
    """A closed ledger of ``count`` entries of ``entry_size`` bytes (views into a random
    pool; payload ``i`` starts at a different pool offset for every entry)."""

    def __init__(self, ledger_id: int, count: int, entry_size: int, seed: int = 1) -> None:
        self._ledger_id = ledger_id
        self._count = count
        self._size = entry_size
        rng = random.Random(seed)
        self._pool = memoryview(rng.randbytes(POOL_SIZE + entry_size))
        self._metadata = LedgerMetadata.closed_default(
            last_entry_id=count - 1, length=count * entry_size
        )

    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def last_entry_id(self) -> int:
        return self._count - 1

    @property
    def length(self) -> int:
        return self._count * self._size

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    def entry_lengths(self) -> list[int]:
        return [self._size] * self._count

    def payload(self, entry_id: int) -> memoryview:
        start = (entry_id * POOL_STRIDE) % POOL_SIZE
        return self._pool[start : start + self._size]

    def read(self, first: int, last: int) -> Sequence[bytes]:
        # views, not copies: the writer only takes len() and copies each payload once into
        # its block buffer, so a memoryview serves where the Protocol says bytes
        return cast(Sequence[bytes], [self.payload(i) for i in range(first, last + 1)])

    def read_spans(self, first: int, last: int) -> EntrySpans:
        """Entries ``first..last`` as spans of the pool: the bytes :meth:`read` returns."""
        count = last - first + 1
        return EntrySpans(self._pool, pool_starts(first, count), array("q", [self._size]) * count)


def pool_starts(first: int, count: int) -> array[int]:
    """``(i * POOL_STRIDE) % POOL_SIZE`` for ``i`` in ``first .. first + count - 1``, built a
    run between two wraps of the pool at a time (a ``range`` each, no Python step per entry)."""
    starts = array("q")
    at = (first * POOL_STRIDE) % POOL_SIZE
    while len(starts) < count:
        before_wrap = -(-(POOL_SIZE - at) // POOL_STRIDE)  # entries before passing the end
        take = min(count - len(starts), before_wrap)
        starts.extend(range(at, at + take * POOL_STRIDE, POOL_STRIDE))
        at = (at + take * POOL_STRIDE) % POOL_SIZE
    return starts


def quiet_logs() -> None:
    """Warnings only, on stderr: stdout carries the JSON result lines."""
    from offloader.logs import configure

    configure(level=logging.WARNING)


def ledger_for(total: int, entry_size: int) -> SyntheticLedger:
    return SyntheticLedger(BENCH_LEDGER, max(1, total // entry_size), entry_size)


def store_for(endpoint: S3Endpoint, bucket: str, settings: OffloadSettings) -> Any:
    from offloader.store.s3 import S3ObjectStore

    return S3ObjectStore(
        bucket,
        endpoint_url=endpoint.url,
        region=endpoint.region,
        settings=settings,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
    )


def raw_client(endpoint: S3Endpoint, pool: int = 16) -> Any:
    """A plain boto3 client configured like our store (path style, no default checksums)."""
    return endpoint.client(max_pool_connections=pool, connect_timeout=10, read_timeout=60)


def empty_bucket(endpoint: S3Endpoint, bucket: str) -> None:
    client = raw_client(endpoint)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=obj["Key"])
    for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


@dataclass
class ClientCost:
    """This process's CPU seconds and page faults since it was made (:meth:`fields` to read)."""

    cpu: float = field(default_factory=time.process_time)
    faults: int = field(default_factory=lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt)

    def fields(self) -> dict[str, float]:
        """``client_cpu_s`` and ``client_faults`` spent since, for a worker's result."""
        now = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        return {
            "client_cpu_s": round(time.process_time() - self.cpu, 3),
            "client_faults": now - self.faults,
        }


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB: ``VmHWM`` from /proc (``ru_maxrss`` would
    include the parent's high-water mark, which Linux carries across fork and exec)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def machine_cpu_seconds() -> float | None:
    """CPU time this machine has spent busy (every process, every CPU, user + system) since
    boot, from /proc/stat; None where there is no /proc. Deltas give a run's whole CPU cost,
    the S3 server's and Spark's JVM included."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    return None


def tree_cpu_seconds(root: int | None = None) -> float | None:
    """CPU time (user + system, reaped children included) of process ``root`` (default: this
    one) and every process below it, from /proc: the S3 server's daemons, Spark's JVM and its
    Python workers when they were started from here. Unlike :func:`machine_cpu_seconds` it
    leaves out what other programs on a shared machine do; None where there is no /proc."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/stat") as stat:
                text = stat.read()
            fields = text[text.rindex(")") + 2 :].split()
            # after the command: state ppid ...; utime stime cutime cstime are fields 14-17
            parents[int(name)] = int(fields[1])
            ticks[int(name)] = sum(int(x) for x in fields[11:15])
    if root not in ticks:
        return None
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def settle(quiet: float = 0.15, window: float = 0.2, most: float = 10.0) -> None:
    """Wait (at most ``most`` seconds) until the machine is quiet: under ``quiet`` of its CPUs
    busy over a ``window``. Between runs, so that a server's background work after the last
    one (RGW's garbage collection of deleted objects) does not land on the next."""
    cpus = os.cpu_count() or 1
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        before = machine_cpu_seconds()
        time.sleep(window)
        after = machine_cpu_seconds()
        if before is None or after is None or (after - before) / window / cpus < quiet:
            return


def run_worker(module: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``python -m module --worker JSON`` in a fresh interpreter; its last stdout line is
    the JSON result."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", module, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {module} {spec.get('variant')} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def take_turns(
    module: str,
    variants: dict[str, dict[str, Any]],
    repeat: int,
    after_each: Any = None,
) -> dict[str, dict[str, Any]]:
    """Run every variant's worker ``repeat`` times, the variants taking turns (so a noisy
    stretch of the machine falls on all of them alike), each after :func:`settle`;
    ``after_each()`` runs after every run (emptying a bucket). Returns, per variant, its
    median run (by seconds; the lower median) with ``best_seconds`` and ``runs_seconds``
    added and ``rss_mb`` the highest of its runs."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(max(1, repeat)):
        for name, spec in variants.items():
            settle()
            runs[name].append(run_worker(module, spec))
            if after_each is not None:
                after_each()
    result = {}
    for name, got in runs.items():
        ordered = sorted(got, key=lambda r: float(r["seconds"]))
        median = dict(ordered[(len(ordered) - 1) // 2])
        median["best_seconds"] = ordered[0]["seconds"]
        median["runs_seconds"] = [round(float(r["seconds"]), 4) for r in got]
        median["rss_mb"] = max(float(r.get("rss_mb", 0.0)) for r in got)
        result[name] = median
    return result


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]
