"""A throwaway single-node Ceph RADOS Gateway for the S3 test tier.

:func:`start_rgw` builds a tiny cluster -- one monitor, one in-memory (``memstore``) OSD and one
``radosgw`` on 127.0.0.1, no manager -- in a fresh, short temporary directory, creates an S3 user
with random keys and yields an :class:`~devservers.endpoint.S3Endpoint` for it. On exit it stops
exactly the processes it started, by pid (radosgw, then the OSD, then the monitor; SIGTERM, then
SIGKILL after a short wait) and removes its directory. It starts in about 0.8 s (2 cores).

The quirks the configuration works around:

* ``auth none`` with ``ms mon client mode = crc``: radosgw defaults to "secure" mode, which cannot
  be negotiated without cephx, and then hangs forever.
* ``paxos propose interval = 0.01``: otherwise each pool creation costs about 2 s.
* No ``ceph`` mgr commands (``ceph df``, ``ceph config show`` ...): there is no mgr and they hang.
* memstore keeps every byte in RAM; RGW garbage collection is set to run after 10 s, not 2 h.
* CompleteMultipartUpload answers with an empty ETag; HEAD/GET carry the right ``"md5-N"``.
* ``LocationConstraint`` must be empty or ``default``: the endpoint uses region ``us-east-1``, for
  which boto3 sends no ``CreateBucketConfiguration`` at all.

Every subprocess call has a timeout, every wait has a deadline, readiness fails fast when a
daemon exits, and a failed start (for instance a port taken between choosing it and binding it)
is retried once with fresh ports. A startup failure raises :class:`RgwStartError` whose message
contains the tail of each daemon's log. When ``setpriv`` is available the daemons also get
``PDEATHSIG=KILL``, so they die with the test process even if it is killed without clean-up
(Linux delivers it when the *thread* that started them exits: start clusters from a thread that
outlives them, such as the main thread).

Set ``LEDGER_OFFLOADER_NO_RGW=1`` to disable the RGW tier even when Ceph is installed:
:func:`unavailable_reason` then returns ``"disabled by LEDGER_OFFLOADER_NO_RGW"``, and the conftest
deselects every RGW test and prints that reason in the terminal summary.

Run as a script (``python -m devservers.ceph_rgw``) it starts a cluster, prints the endpoint
and the startup time, and stops it on Enter (or after ``--seconds``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from devservers.endpoint import S3Endpoint

#: the executables the cluster needs; all must be on PATH
REQUIRED_EXECUTABLES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")

#: environment variable that disables the RGW tier (any non-empty value other than "0")
DISABLE_ENV = "LEDGER_OFFLOADER_NO_RGW"

#: longest base directory we use as given; longer ones get a short directory under /tmp instead
#: (unix socket paths, such as BASE/run/client.rgw.a.asok, are limited to 107 bytes)
MAX_BASE_LEN = 60

STARTUP_TIMEOUT = 60.0  # seconds for the whole cluster to answer S3
COMMAND_TIMEOUT = 30.0  # seconds for one CLI call (monmaptool, ceph, radosgw-admin, mkfs)
STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
LOG_TAIL_LINES = 25
PG_NUM = 8
USER_ID = "tester"


class RgwStartError(RuntimeError):
    """The cluster did not come up; the message includes the daemons' log tails."""


def unavailable_reason() -> str | None:
    """Why the RGW tier cannot run here, or None when it can."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return f"disabled by {DISABLE_ENV}"
    missing = [exe for exe in REQUIRED_EXECUTABLES if shutil.which(exe) is None]
    if missing:
        return f"Ceph is not installed ({', '.join(missing)} not on PATH)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lib_dir(name: str) -> str:
    """The multiarch directory that holds Ceph's plugins (``/usr/lib/<triplet>/<name>``)."""
    for candidate in sorted(Path("/usr/lib").glob(f"*/{name}")):
        if candidate.is_dir():
            return str(candidate)
    return f"/usr/lib/x86_64-linux-gnu/{name}"


def _ceph_conf(base: Path, fsid: str, mon_port: int, rgw_port: int) -> str:
    ceph_lib = _lib_dir("ceph")
    return f"""\
[global]
fsid = {fsid}
mon host = [v2:127.0.0.1:{mon_port}]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
# radosgw/radosgw-admin default to ms_mon_client_mode=secure, impossible with auth none
ms mon client mode = crc
ms client mode = crc
keyring = {base}/keyring
run dir = {base}/run
admin socket = {base}/run/$name.asok
log file = {base}/log/$name.log
mon cluster log file = {base}/log/cluster.log
crash dir = {base}/crash
exec dir = {base}/tmp
erasure code dir = {ceph_lib}/erasure-code
plugin dir = {ceph_lib}
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd pool default pg autoscale mode = off
osd pool default pg num = {PG_NUM}
osd pool default pgp num = {PG_NUM}
mon max pg per osd = 2000
osd crush chooseleaf type = 0
mon data avail warn = 1
mon data avail crit = 0
mon warn on missing mgr = false
mon warn on insecure global id reclaim allowed = false
debug ms = 0
debug mon = 1
debug osd = 1
debug rgw = 1

[mon]
mon data = {base}/mon/$id
# a taken port fails (and the start is retried) at once, not after 3 binds 5 s apart
ms bind retry count = 1
paxos propose interval = 0.01
paxos min wait = 0.001

[osd]
osd data = {base}/osd/$id
osd objectstore = memstore
memstore device bytes = 8589934592
osd class dir = {_lib_dir("rados-classes")}
osd crush update on start = true
osd memory target = 1073741824
osd mon shutdown timeout = 1

[client.rgw.a]
# tcp_nodelay: without it beast's small responses wait for the client's delayed ACK, and a
# GET of a few KiB takes 44 ms instead of 4 (measured)
rgw frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
# memstore keeps deleted data in RAM until RGW GC reclaims it (default: after 2 h)
rgw gc obj min wait = 10
rgw gc processor period = 10
rgw data = {base}/rgw
rgw thread pool size = 64
rgw enable usage log = false
"""


@dataclass
class RgwCluster:
    """A running (or partly started) cluster: its directory, daemons and S3 endpoint."""

    base: Path
    mon_port: int
    rgw_port: int
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    endpoint: S3Endpoint | None = None
    started: float = field(default_factory=time.monotonic)
    deadline: float = field(default_factory=lambda: time.monotonic() + STARTUP_TIMEOUT)
    #: seconds since the start at which each step finished (for diagnosing slow starts)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.base / "ceph.conf"

    @property
    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.daemons.items()}

    # -- running things ---------------------------------------------------------------------

    def run(self, *args: str) -> str:
        """Run one Ceph CLI command to completion; raise RgwStartError when it fails."""
        cmd = [args[0], "-c", str(self.conf), *args[1:]]
        if args[0] in ("ceph", "radosgw-admin"):  # not the daemon's asok ("File exists")
            cmd[3:3] = ["--admin-socket", ""]
        timeout = max(1.0, min(COMMAND_TIMEOUT, self.deadline - time.monotonic()))
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            try:
                # poll, so that a daemon dying under a CLI call fails the start at once
                started = time.monotonic()
                while proc.poll() is None:
                    if time.monotonic() - started > timeout:
                        raise RgwStartError(
                            self._failure(f"{' '.join(cmd)} timed out after {timeout:.0f}s")
                        )
                    self.check_daemons()
                    time.sleep(0.02)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode("utf-8", "replace")
            stderr = err.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            output = (stderr or stdout)[-2000:]
            raise RgwStartError(
                self._failure(f"{' '.join(cmd)} exited {proc.returncode}: {output}")
            )
        words = [a for a in args if not a.startswith("-") and not a[:1].isdigit()][:3]
        self.timings[" ".join(words)] = round(time.monotonic() - self.started, 3)
        return stdout

    def spawn(self, name: str, *args: str) -> None:
        """Start a daemon in the foreground (``-f``), detached, its output in log/NAME.out."""
        cmd = [args[0], "-f", "-c", str(self.conf), *args[1:]]
        if shutil.which("setpriv"):  # the daemon dies with us, even on SIGKILL of pytest
            cmd = ["setpriv", "--pdeathsig", "KILL", "--", *cmd]
        with open(self.base / "log" / f"{name}.out", "wb") as out:
            self.daemons[name] = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.base,
            )

    def check_daemons(self) -> None:
        for name, proc in self.daemons.items():
            code = proc.poll()
            if code is not None:
                raise RgwStartError(self._failure(f"{name} (pid {proc.pid}) exited with {code}"))

    # -- starting ---------------------------------------------------------------------------

    def start(self) -> S3Endpoint:
        for sub in ("run", "log", "crash", "tmp", "mon/a", "osd/0", "rgw"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        fsid = str(uuid.uuid4())
        self.conf.write_text(_ceph_conf(self.base, fsid, self.mon_port, self.rgw_port))

        monmap = str(self.base / "monmap")
        self.run(
            "monmaptool",
            "--create",
            "--fsid",
            fsid,
            "--addv",
            "a",
            f"[v2:127.0.0.1:{self.mon_port}]",
            monmap,
        )
        self.run("ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap)
        self.spawn("mon", "ceph-mon", "-i", "a")

        osd_uuid = str(uuid.uuid4())
        osd_id = self.run("ceph", "--connect-timeout", "20", "osd", "new", osd_uuid).strip()
        if osd_id != "0":
            raise RgwStartError(self._failure(f"ceph osd new returned {osd_id!r}, expected 0"))
        self.check_daemons()
        self.run("ceph-osd", "--mkfs", "-i", "0", "--osd-uuid", osd_uuid)
        self.spawn("osd", "ceph-osd", "-i", "0")
        # radosgw started before the OSD is up parks its first reads for an objecter tick (5 s)
        self._wait_osd_up()
        self.spawn("rgw", "radosgw", "-n", "client.rgw.a")

        url = f"http://127.0.0.1:{self.rgw_port}"
        self._wait_s3(url)
        access_key = secrets.token_hex(10).upper()
        secret_key = secrets.token_urlsafe(30)
        self.run(
            "radosgw-admin",
            "-n",
            "client.rgw.a",
            "user",
            "create",
            "--uid",
            USER_ID,
            "--display-name",
            "ledger-offloader tests",
            "--access-key",
            access_key,
            "--secret-key",
            secret_key,
        )
        self.endpoint = S3Endpoint(
            name="rgw", url=url, access_key=access_key, secret_key=secret_key, region="us-east-1"
        )
        return self.endpoint

    def _wait_osd_up(self) -> None:
        """Wait until the monitor reports the OSD up (``osd stat`` is a mon command, no mgr)."""
        while True:
            stat = json.loads(
                self.run("ceph", "--connect-timeout", "10", "osd", "stat", "-f", "json")
            )
            if stat.get("num_up_osds", 0) >= 1:
                self.timings["osd up"] = round(time.monotonic() - self.started, 3)
                return
            if time.monotonic() > self.deadline:
                raise RgwStartError(self._failure(f"the OSD did not come up: {stat}"))
            time.sleep(0.05)

    def _wait_s3(self, url: str) -> None:
        """Wait until an anonymous ``GET /`` answers ``ListAllMyBucketsResult`` from radosgw."""
        last = "no answer yet"
        while True:
            self.check_daemons()
            try:
                with urllib.request.urlopen(url + "/", timeout=2) as resp:
                    body = resp.read(4096).decode("utf-8", "replace")
                if "ListAllMyBucketsResult" in body:
                    self.timings["s3 ready"] = round(time.monotonic() - self.started, 3)
                    return
                last = f"unexpected body: {body[:200]!r}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                last = repr(exc)
            if time.monotonic() > self.deadline:
                raise RgwStartError(
                    self._failure(
                        f"radosgw did not answer at {url} within {STARTUP_TIMEOUT:.0f}s ({last})"
                    )
                )
            time.sleep(0.1)

    def _failure(self, what: str) -> str:
        lines = [f"Ceph RGW failed to start in {self.base}: {what}"]
        for log in sorted((self.base / "log").glob("*")):
            try:
                tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            except OSError:
                continue
            lines.append(f"--- tail of {log.name} ---")
            lines.extend(tail or ["(empty)"])
        return "\n".join(lines)

    # -- stopping ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop our daemons by pid (rgw, osd, mon), then remove the directory. Idempotent."""
        for name in ("rgw", "osd", "mon"):
            proc = self.daemons.get(name)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)


def _make_base(base_dir: Path) -> Path:
    """A fresh, short directory: inside ``base_dir`` when its path is short, else under /tmp."""
    parent = base_dir if len(str(base_dir)) <= MAX_BASE_LEN else Path("/tmp")
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="rgw.", dir=parent))


@contextlib.contextmanager
def start_cluster(base_dir: Path, attempts: int = 2) -> Iterator[RgwCluster]:
    """Start a cluster (retrying a failed start once) and yield it; stop it on exit."""
    errors: list[str] = []
    for _attempt in range(attempts):
        cluster = RgwCluster(
            base=_make_base(base_dir), mon_port=_free_port(), rgw_port=_free_port()
        )
        try:
            cluster.start()
        except BaseException as exc:
            cluster.stop()
            if not isinstance(exc, RgwStartError):
                raise
            errors.append(str(exc))
            continue
        try:
            yield cluster
        finally:
            cluster.stop()
        return
    raise RgwStartError(f"{len(errors)} attempts failed:\n\n" + "\n\n".join(errors))


@contextlib.contextmanager
def start_rgw(base_dir: Path) -> Iterator[S3Endpoint]:
    """Start a throwaway RGW under ``base_dir`` and yield its S3 endpoint; stop it on exit."""
    with start_cluster(base_dir) as cluster:
        assert cluster.endpoint is not None
        yield cluster.endpoint


def main() -> None:  # pragma: no cover - manual use
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stop after this many seconds instead of waiting for Enter",
    )
    args = parser.parse_args()
    if (reason := unavailable_reason()) is not None:
        raise SystemExit(f"RGW unavailable: {reason}")
    started = time.monotonic()
    with start_cluster(Path("/tmp")) as cluster:
        ep = cluster.endpoint
        assert ep is not None
        print(
            f"RGW up in {time.monotonic() - started:.2f}s at {ep.url} "
            f"(access key {ep.access_key}, secret key {ep.secret_key}) pids {cluster.pids}",
            flush=True,
        )
        if args.seconds is None:
            with contextlib.suppress(EOFError):
                input("press Enter to stop\n")
        else:
            time.sleep(args.seconds)
    print("stopped", flush=True)


if __name__ == "__main__":  # pragma: no cover
    main()
