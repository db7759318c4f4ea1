"""Start the kill -9 harnesses' workers from :mod:`tests.crash.zygote` (one pre-imported
process per pytest session, forked once per worker) instead of a fresh ``python -m`` each time.

:func:`spawn` returns a :class:`Worker`, the small part of :class:`subprocess.Popen` the
harnesses use (``pid``, ``stdout``, ``kill``, ``wait``, ``communicate``, ``returncode``).
The zygote is started on first use with the modules of :data:`PRELOAD` and stopped at exit;
it is restarted if it died. ``LEDGER_OFFLOADER_CRASH_FRESH=1`` starts every worker as a fresh
interpreter instead (``subprocess.Popen``), for a comparison or a doubt about the zygote.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

REPO = Path(__file__).resolve().parents[2]
FRESH_ENV = "LEDGER_OFFLOADER_CRASH_FRESH"
#: what the workers import (the lazy imports of the export engines included); not the worker
#: modules themselves: the child runs those as ``__main__``
PRELOAD = (
    "offloader.api",
    "offloader.spark.export_job",
    "offloader.spark.iceberg_job",
    "offloader.export.iceberg_catalog",
)


class Worker(Protocol):
    pid: int
    stdout: IO[str] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def communicate(self, input: None = None, timeout: float | None = None) -> tuple[str, str]: ...


class _Forked:
    """A worker forked by the zygote (not our child: the zygote reports its exit)."""

    def __init__(self, pid: int, stdout: IO[str], stderr: IO[str], exits: queue.Queue[int]):
        self.pid = pid
        self.stdout: IO[str] | None = stdout
        self._stderr = stderr
        self._exits = exits
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(queue.Empty):
                self.returncode = self._exits.get_nowait()
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self._exits.get(timeout=timeout)
            except queue.Empty:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0) from None
        return self.returncode

    def communicate(self, input: None = None, timeout: float | None = None) -> tuple[str, str]:
        assert self.stdout is not None and input is None
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(self.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        self.wait(timeout)
        self.stdout.close()
        self._stderr.seek(0)
        err = self._stderr.read()
        self._stderr.close()
        return out[0], err


class _Zygote:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash.zygote", str(theirs.fileno()), *PRELOAD],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            # no jemalloc background thread: the zygote must stay single-threaded to fork
            env={**os.environ, "JE_ARROW_MALLOC_CONF": "background_thread:false"},
        )
        theirs.close()
        self.sock = ours
        ready = self.sock.recv(1 << 16)
        answer = json.loads(ready or b"{}")
        if answer.get("ready") is not True:
            self.proc.wait()
            raise RuntimeError(f"the crash zygote did not start: {answer or self.proc.returncode}")
        self.lock = threading.Lock()
        self.replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.exits: dict[int, queue.Queue[int]] = {}
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:  # closed at exit
                return
            if not data:
                return
            message = json.loads(data)
            with self.lock:
                if "returncode" in message:
                    self._exits(message["pid"]).put(message["returncode"])
                else:
                    self.replies.pop(message["id"]).put(message)

    def _exits(self, pid: int) -> queue.Queue[int]:
        return self.exits.setdefault(pid, queue.Queue())

    def spawn(self, module: str, args: Sequence[str], env: Mapping[str, str]) -> _Forked:
        out_r, out_w = os.pipe()
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        reply: queue.Queue[dict[str, Any]] = queue.Queue()
        try:
            with self.lock:
                self.next_id += 1
                request_id = self.next_id
                self.replies[request_id] = reply
                request = {
                    "id": request_id,
                    "module": module,
                    "args": list(args),
                    "env": dict(env),
                    "cwd": str(REPO),
                }
                fds = [os.open(os.devnull, os.O_RDONLY), out_w, stderr.fileno()]
                try:
                    socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
                finally:
                    os.close(fds[0])
            answer = reply.get(timeout=60)
        finally:
            os.close(out_w)
        if "error" in answer:
            os.close(out_r)
            raise RuntimeError(f"the crash zygote could not fork: {answer['error']}")
        pid = int(answer["pid"])
        with self.lock:
            exits = self._exits(pid)
        return _Forked(pid, open(out_r, encoding="utf-8"), stderr, exits)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _shared() -> _Zygote:
    global _zygote
    with _zygote_lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = _Zygote()
            atexit.register(_zygote.close)
        return _zygote


def spawn(module: str, args: Sequence[str], env: Mapping[str, str]) -> Worker:
    """Start ``python -m module args`` with ``env`` in the repository (forked from the zygote
    unless :data:`FRESH_ENV` is set); stdout is a text pipe, stderr comes from
    ``communicate``."""
    if os.environ.get(FRESH_ENV) == "1":
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    return _shared().spawn(module, args, env)
