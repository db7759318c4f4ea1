"""CPU placement of a benchmark: which CPUs the S3 server and the measured client run on.

On a small machine the S3 server (Ceph RGW: three daemons) and the client share every CPU,
so a client that does more work per byte than the baseline (parsing, CRC32C checks) slows the
*server* too: the ratio then measures CPU contention as much as the client. In production
the object store runs on other machines. Two placements:

* ``shared``: no pinning; server and client compete for every CPU.
* ``split``: the server's processes (every thread) are pinned to the upper half of the CPUs
  this benchmark may use, and the measured workers to the lower half: a stand-in for a
  server on other machines. The baseline runs in the same placement, so ratios stay fair.

Rows measured with ``split`` carry ``placement: "split"`` and a ``.split`` name suffix.
Linux only (``os.sched_setaffinity``); ``split`` needs at least two CPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLACEMENTS = ("shared", "split")


@dataclass(frozen=True)
class Placement:
    """Where the server and the client run (``None``: anywhere)."""

    name: str
    server_cpus: tuple[int, ...] | None = None
    client_cpus: tuple[int, ...] | None = None

    @property
    def suffix(self) -> str:
        """The row-name suffix: none for ``shared``."""
        return "" if self.name == "shared" else f".{self.name}"


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--repeat`` and ``--placement``, as the offload and read benchmarks take them."""
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per variant, taking turns; medians reported (3)"
    )
    parser.add_argument(
        "--placement",
        default="shared",
        help="CPU placements to measure in: shared, split (server and client on separate "
        "CPUs, see bench/placement.py), or both: shared,split",
    )


def parse_placements(text: str) -> list[Placement]:
    """``"shared,split"`` -> placements; ``split`` halves the CPUs this process may use."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PLACEMENTS]
    if unknown or not names:
        raise SystemExit(f"--placement: expected a list of {', '.join(PLACEMENTS)}, not {text!r}")
    result = []
    for name in names:
        if name == "shared":
            result.append(Placement("shared"))
            continue
        cpus = sorted(_allowed_cpus())
        if len(cpus) < 2:
            raise SystemExit("--placement split needs at least two CPUs")
        half = len(cpus) // 2
        result.append(Placement("split", tuple(cpus[half:]), tuple(cpus[:half])))
    return result


def _allowed_cpus() -> set[int]:
    if not hasattr(os, "sched_getaffinity"):  # pragma: no cover - Linux only
        raise SystemExit("--placement split needs Linux (os.sched_setaffinity)")
    return set(os.sched_getaffinity(0))


def _pin_process(pid: int, cpus: Sequence[int]) -> None:
    """Pin every thread of ``pid`` (threads it starts later inherit the mask)."""
    for tid in os.listdir(Path("/proc") / str(pid) / "task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just exited
            os.sched_setaffinity(int(tid), cpus)


@contextlib.contextmanager
def placed(server_pids: Sequence[int], placement: Placement) -> Iterator[list[int] | None]:
    """Pin the server's processes for ``placement``; yields the client's CPUs (for
    :func:`pin_worker`), and gives the server every CPU back on exit."""
    if placement.server_cpus is None:
        yield None
        return
    if not server_pids:
        raise SystemExit(f"--placement {placement.name}: the server's processes are unknown")
    everything = sorted(_allowed_cpus())
    for pid in server_pids:
        _pin_process(pid, placement.server_cpus)
    try:
        yield list(placement.client_cpus or ())
    finally:
        for pid in server_pids:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                _pin_process(pid, everything)


def pin_worker(spec: dict[str, Any]) -> None:
    """In a measured worker: run on the CPUs ``spec["cpus"]`` names, if any."""
    cpus = spec.get("cpus")
    if cpus:
        os.sched_setaffinity(0, cpus)
