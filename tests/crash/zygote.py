"""The pre-imported parent of the kill -9 harnesses' workers: ``python -m tests.crash.zygote
FD MODULE...`` imports the given modules once, then forks one child per request and runs a worker
module in it (as ``python -m`` would), so a killed worker costs a fork instead of a fresh
interpreter and its imports (about 1-2 CPU seconds each, most of a worker's run).

A child is an ordinary process of its own: the harness SIGKILLs it by its pid, and it dies with
everything it had not handed to the kernel, exactly as a freshly started worker would. Before
it runs the worker it takes the request's environment, working directory and ``argv``, and
re-reads ``LEDGER_OFFLOADER_CRASH_AT`` (:mod:`offloader.crashpoints` reads it at import).

The protocol (on ``FD``, a ``SOCK_SEQPACKET`` socket, one JSON message per packet):

* request ``{"id", "module", "args", "env", "cwd"}`` with three fds (stdin, stdout, stderr of
  the child); reply ``{"id", "pid"}`` once forked, or ``{"id", "error"}``;
* ``{"pid", "returncode"}`` when a child ends (``-N``: killed by signal N, as ``Popen``).

The zygote exits when the socket closes (its client, :mod:`tests.crash.launcher`, went away).
The zygote forks only while it is the one thread of its process (it checks after the imports,
and refuses to serve otherwise): pyarrow's jemalloc would start a background thread, which the
launcher turns off (``JE_ARROW_MALLOC_CONF=background_thread:false``, in the zygote only).
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import socket
import sys
import traceback

POLL_SECONDS = 0.005


def _child(request: dict[str, object], fds: list[int], sock: socket.socket) -> None:
    """In the forked child: become the worker, never return."""
    code = 1
    try:
        sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        from offloader import crashpoints

        importlib.reload(crashpoints)  # the crash point of this child's environment
        module, args = str(request["module"]), request["args"]
        assert isinstance(args, list)
        sys.argv = [module, *map(str, args)]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def serve(sock: socket.socket) -> None:
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock], [], [], POLL_SECONDS if children else None)
        if readable:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            if not data:
                return
            request = json.loads(data)
            try:
                if len(fds) != 3:
                    raise ValueError(f"expected 3 fds, got {len(fds)}")
                pid = os.fork()
            except Exception as exc:
                sock.send(json.dumps({"id": request.get("id"), "error": str(exc)}).encode())
                pid = -1
            if pid == 0:
                _child(request, fds, sock)
            for fd in fds:
                os.close(fd)
            if pid > 0:
                children.add(pid)
                sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            sock.send(json.dumps({"pid": pid, "returncode": _returncode(status)}).encode())


def _threads() -> list[str]:
    """This process's threads by name (Linux), for the fork-safety check."""
    tasks = "/proc/self/task"
    if not os.path.isdir(tasks):
        return ["?"]
    names = []
    for task in sorted(os.listdir(tasks)):
        with open(f"{tasks}/{task}/comm") as comm:
            names.append(comm.read().strip())
    return names


def main(fd: int, modules: list[str]) -> None:
    sock = socket.socket(fileno=fd)
    for module in modules:
        importlib.import_module(module)
    threads = _threads()
    if len(threads) != 1:  # a fork would copy locks held by the others: refuse
        sock.send(json.dumps({"ready": False, "threads": threads}).encode())
        return
    sock.send(b'{"ready": true}')
    serve(sock)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
