"""CPU seconds of this process tree split by role, from /proc: where a Spark scan's CPU goes.

Roles: ``jvm`` (Spark's ``java``), ``python_workers`` (Python processes below the JVM: PySpark's
daemon and its workers), ``s3_server`` (Ceph's ``radosgw``/``ceph-*`` daemons started here) and
``driver`` (this process and anything else below it: the bench, boto3's download threads).
moto's server, which the benches run as a child process (:mod:`bench.moto_process`), is an
``s3_server`` too: its pid is in :data:`SERVER_PIDS` while it runs. A process's CPU includes
its reaped children's, so a worker that exited is counted with its parent. Linux only;
:func:`role_cpu_seconds` is None elsewhere.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["ROLES", "role_cpu_seconds", "role_delta"]

ROLES = ("jvm", "python_workers", "s3_server", "driver")

#: pids of S3 servers this process started (moto in a child process): role ``s3_server``
SERVER_PIDS: set[int] = set()


def _processes() -> dict[int, tuple[int, str, int]]:
    """pid -> (ppid, command, CPU ticks with reaped children's) for every visible process."""
    out: dict[int, tuple[int, str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/stat") as stat:
                text = stat.read()
            command = text[text.index("(") + 1 : text.rindex(")")]
            fields = text[text.rindex(")") + 2 :].split()
            out[int(name)] = (int(fields[1]), command, sum(int(x) for x in fields[11:15]))
    return out


def _role(command: str, below_jvm: bool, pid: int = 0) -> str:
    if command == "java":
        return "jvm"
    if command == "radosgw" or command.startswith("ceph") or pid in SERVER_PIDS:
        return "s3_server"
    if below_jvm:
        return "python_workers"
    return "driver"


def role_cpu_seconds(root: int | None = None) -> dict[str, float] | None:
    """CPU seconds so far of process ``root`` (default: this one) and its descendants, by
    role; None where there is no /proc."""
    root = os.getpid() if root is None else root
    try:
        procs = _processes()
    except OSError:
        return None
    if root not in procs:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    totals = dict.fromkeys(ROLES, 0)
    todo = [(root, False)]
    while todo:
        pid, below_jvm = todo.pop()
        _, command, ticks = procs[pid]
        role = _role(command, below_jvm, pid)
        totals[role] += ticks
        todo.extend((child, below_jvm or role == "jvm") for child in children.get(pid, ()))
    tick = os.sysconf("SC_CLK_TCK")
    return {role: value / tick for role, value in totals.items()}


def role_delta(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, float] | None:
    """``after - before`` per role, rounded to 10 ms."""
    if before is None or after is None:
        return None
    return {role: round(after[role] - before[role], 2) for role in ROLES}
