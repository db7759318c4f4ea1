"""A throwaway ZooKeeper server for the tests (Debian's ``zookeeper`` package).

:func:`start_zookeeper` writes a standalone ``zoo.cfg`` into a temporary directory (its data
directory beside it), starts ``java ... org.apache.zookeeper.server.ZooKeeperServerMain`` on a
free port of 127.0.0.1 with the package's jars (``/usr/share/java``), waits until the server
answers ``ruok`` with ``imok``, and kills it and removes the directory at the end. It starts in
about 1.2 s on the development machine (JVM start included). The admin server is off.

:func:`unavailable_reason` says why the server cannot run here (no java, no jars, or
``LEDGER_OFFLOADER_NO_ZOOKEEPER`` set), or None.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devservers.postgres import free_port

DISABLE_ENV = "LEDGER_OFFLOADER_NO_ZOOKEEPER"
JARS_DIR = Path("/usr/share/java")
# the server's own jars and what it needs at run time (the package's Depends)
JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-transport.jar",
    "netty-resolver.jar",
    "netty-codec.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
    "commons-io.jar",
    "snappy-java.jar",
)
REQUIRED = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
START_TIMEOUT = 60.0


def unavailable_reason() -> str | None:
    if os.environ.get(DISABLE_ENV):
        return f"{DISABLE_ENV} is set"
    if shutil.which("java") is None:
        return "java is not installed"
    missing = [jar for jar in REQUIRED if not (JARS_DIR / jar).is_file()]
    if missing:
        return f"ZooKeeper is not installed (no {JARS_DIR / missing[0]})"
    return None


def _die_with_parent() -> None:
    """In the child before exec: the server is killed when the process that started it dies
    (a test run or benchmark killed by a timeout leaves no JVM behind). Linux only."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


@dataclass
class ZkServer:
    """A running standalone server: its directory, port and process."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    #: seconds from the JVM's start to the first ``imok``
    start_seconds: float = 0.0

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, chroot: str = "") -> str:
        """Pulsar's metadata-store URL of this server (``zk:host:port[/chroot]``)."""
        return f"zk:{self.hosts}{chroot}"

    def start(self) -> None:
        config = self.root / "zoo.cfg"
        config.write_text(
            "tickTime=2000\n"
            f"dataDir={self.root / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
            "maxClientCnxns=0\n"
        )
        classpath = ":".join(str(JARS_DIR / jar) for jar in JARS if (JARS_DIR / jar).is_file())
        started = time.monotonic()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    classpath,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    str(config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = started + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode}: "
                    + self.log.read_text(errors="replace")[-2000:]
                )
            if _ruok(self.port):
                self.start_seconds = time.monotonic() - started
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on port {self.port} in {START_TIMEOUT} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None


@contextmanager
def start_zookeeper(parent: Path | None = None) -> Iterator[ZkServer]:
    """A running server in a new directory under ``parent`` (default: the system temporary
    directory), killed and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="offloader-zk-", dir=parent))
    server = ZkServer(root, free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
