"""moto's S3 server in a child process, for the benchmarks that split CPU by role.

The tests run moto in-process (``devservers/moto_server.py``), where its CPU is the driver's:
a scan's and a download's server work could not be told from their clients'. Here the server
is a child of the bench (so still in the measured process tree), and :mod:`bench.cpu_roles`
counts it as ``s3_server``, as it counts Ceph's ``radosgw``. The child stops when its stdin
closes (the bench exiting, even killed, closes it).

A bench that lists many small objects can have the child fill a bucket itself before it
serves (:class:`Prefill`: the keys, sizes and user metadata a PUT fill would send, written
straight into moto's in-process backend): 100,000 objects take seconds that way instead of the
~7 ms per PUT over HTTP, and only what is measured goes over the wire.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from bench import cpu_roles
from devservers.endpoint import S3Endpoint
from devservers.moto_server import TEST_PART_MIN_SIZE

_SERVE = """
import json, logging, sys
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
if len(sys.argv) > 1:  # a Prefill: the bucket filled in moto's own backend before serving
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    backend.create_bucket(spec["bucket"], spec["region"])
    meta = {"x-amz-meta-" + k: v for k, v in spec["metadata"].items()}
    for name, size in spec["objects"]:
        key = backend.put_object(spec["bucket"], name, b"x" * size)
        if meta:
            key.set_metadata(meta)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"""


@dataclass(frozen=True)
class Prefill:
    """A bucket the child creates and fills in its own backend before it serves: each
    ``(key, size)`` of ``objects`` an object of ``size`` bytes (``b"x"`` repeated) with the
    user ``metadata`` (names without ``x-amz-meta-``), as a PUT of them would store."""

    bucket: str
    objects: Sequence[tuple[str, int]]
    metadata: dict[str, str] = field(default_factory=dict)
    region: str = "us-east-1"


@contextmanager
def start_moto_process() -> Iterator[S3Endpoint]:
    """moto on a free loopback port in a child process; its pid is an ``s3_server`` meanwhile."""
    with moto_child() as (endpoint, _pid):
        yield endpoint


@contextmanager
def moto_child(prefill: Prefill | None = None) -> Iterator[tuple[S3Endpoint, int]]:
    """As :func:`start_moto_process`, yielding the child's pid too (to pin it); with
    ``prefill``, the bucket is there, filled, when the server starts listening."""
    env = {**os.environ, "S3_UPLOAD_PART_MIN_SIZE": str(TEST_PART_MIN_SIZE)}
    with tempfile.TemporaryDirectory(prefix="bench-moto-prefill.") as tmp:
        argv = [sys.executable, "-c", _SERVE]
        if prefill is not None:
            spec = os.path.join(tmp, "prefill.json")
            with open(spec, "w") as f:
                json.dump(
                    {
                        "bucket": prefill.bucket,
                        "region": prefill.region,
                        "metadata": prefill.metadata,
                        "objects": list(prefill.objects),
                    },
                    f,
                )
            argv.append(spec)
        with _child(argv, env) as started:
            yield started


@contextmanager
def _child(argv: list[str], env: dict[str, str]) -> Iterator[tuple[S3Endpoint, int]]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"moto's server did not start (exit status {proc.poll()})")
        cpu_roles.SERVER_PIDS.add(proc.pid)
        endpoint = S3Endpoint(
            name="moto",
            url=f"http://127.0.0.1:{int(line)}",
            access_key="testing",
            secret_key="testing",
        )
        yield endpoint, proc.pid
    finally:
        cpu_roles.SERVER_PIDS.discard(proc.pid)
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
