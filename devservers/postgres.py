"""A throwaway PostgreSQL server for the tests (Debian's ``postgresql`` package).

:func:`start_postgres` runs ``initdb`` into a temporary directory, starts ``postgres`` with
``pg_ctl`` on a free port on 127.0.0.1 (and a Unix socket in the same directory), and stops it
(``pg_ctl stop -m fast``) and removes the directory at the end. Trust authentication, user
``postgres``; ``fsync`` is off (the data lives only as long as the test session, and a killed
server process still leaves its files in the OS page cache), ``synchronous_commit`` stays on:
a commit has reached the OS when it returns, so a server killed with ``pg_ctl stop -m
immediate`` (the restart tests) loses nothing that was committed.

``initdb`` refuses to run as root, so when the tests run as root the server runs as the
unprivileged ``postgres`` user that the Debian package creates: the directory is handed to it
(``chown``) and every server binary runs through ``runuser -u postgres --`` (util-linux; no
password, no login shell, the environment kept). The directory must be
reachable by that user: it is made under the system temporary directory, not under pytest's
``tmp_path`` (mode 0700, root's). As any other user the binaries run directly.

Each test gets its own schema (:meth:`PgServer.new_url`): ``CREATE SCHEMA`` takes milliseconds,
a database tens of times longer; the URL selects it with ``options=-csearch_path=...``.

:func:`unavailable_reason` says why the server cannot run here (no binaries, root without a
``postgres`` user, or ``LEDGER_OFFLOADER_NO_POSTGRES`` set), or None.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DISABLE_ENV = "LEDGER_OFFLOADER_NO_POSTGRES"
RUN_AS = "postgres"


def bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with initdb and pg_ctl, if any."""
    found = []
    for candidate in glob.glob("/usr/lib/postgresql/*/bin"):
        path = Path(candidate)
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            try:
                found.append((int(path.parent.name), path))
            except ValueError:
                continue
    return max(found)[1] if found else None


def _is_root() -> bool:
    return os.geteuid() == 0


def unavailable_reason() -> str | None:
    if os.environ.get(DISABLE_ENV):
        return f"{DISABLE_ENV} is set"
    if bin_dir() is None:
        return "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)"
    if _is_root():
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return f"running as root and there is no {RUN_AS!r} user to run initdb as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PgServer:
    """A running server: its binaries, data directory and port."""

    bin: Path
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def new_url(self) -> str:
        """A URL on a new, empty schema of its own (the metadata store creates its tables)."""
        import psycopg

        schema = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}".encode())
        return f"{self.admin_url()}?options=-csearch_path%3D{schema}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if _is_root():
            command = ["runuser", "-u", RUN_AS, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), *args, check=check)

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        result = self.pg_ctl(
            "-w", "-t", "60", "-l", str(self.log), "-o", options, "start", check=False
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr.strip()}\n{log}")

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("-w", "-m", mode, "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()


@contextmanager
def start_postgres(parent: Path | None = None) -> Iterator[PgServer]:
    """A running server in a new directory under ``parent`` (default: the system temporary
    directory; as root it must be reachable by the ``postgres`` user, which pytest's own
    ``tmp_path`` (mode 0700) is not)."""
    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError("PostgreSQL is not installed")
    root = Path(tempfile.mkdtemp(prefix="offloader-pg-", dir=parent))
    if _is_root():
        os.chmod(root, 0o755)
        entry = pwd.getpwnam(RUN_AS)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PgServer(binaries, root, free_port())
    try:
        initdb = server._run(
            str(binaries / "initdb"),
            "-D",
            str(server.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            check=False,
        )
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed: {initdb.stderr.strip()[-2000:]}")
        server.start()
        yield server
    finally:
        server.stop("immediate" if server.data.exists() else "fast")
        shutil.rmtree(root, ignore_errors=True)
