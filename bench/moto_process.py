"""moto's S3 server in a child process, for the benchmarks that split CPU by role.

The tests run moto in-process (``devservers/moto_server.py``), where its CPU is the driver's:
a scan's and a download's server work could not be told from their clients'. Here the server
is a child of the bench (so still in the measured process tree), and :mod:`bench.cpu_roles`
counts it as ``s3_server``, as it counts Ceph's ``radosgw``. The child stops when its stdin
closes (the bench exiting, even killed, closes it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench import cpu_roles
from devservers.endpoint import S3Endpoint
from devservers.moto_server import TEST_PART_MIN_SIZE

_SERVE = """
import logging, sys
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"""


@contextmanager
def start_moto_process() -> Iterator[S3Endpoint]:
    """moto on a free loopback port in a child process; its pid is an ``s3_server`` meanwhile."""
    env = {**os.environ, "S3_UPLOAD_PART_MIN_SIZE": str(TEST_PART_MIN_SIZE)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"moto's server did not start (exit status {proc.poll()})")
        cpu_roles.SERVER_PIDS.add(proc.pid)
        yield S3Endpoint(
            name="moto",
            url=f"http://127.0.0.1:{int(line)}",
            access_key="testing",
            secret_key="testing",
        )
    finally:
        cpu_roles.SERVER_PIDS.discard(proc.pid)
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
