"""CPU placement of the benchmarks (bench/placement.py): real processes, real affinity."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench import placement as placement_mod
from bench.placement import Placement, parse_placements, placed

# a child with a second thread, like a server daemon: every thread must be pinned
CHILD = (
    "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); "
    "print('up', flush=True); time.sleep(60)"
)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    yield proc
    proc.kill()
    proc.wait()


def _thread_masks(pid: int) -> list[set[int]]:
    tids = os.listdir(f"/proc/{pid}/task")
    return [set(os.sched_getaffinity(int(tid))) for tid in tids]


def test_shared_is_the_default_and_pins_nothing() -> None:
    assert parse_placements("shared") == [Placement("shared")]
    with placed([], Placement("shared")) as cpus:
        assert cpus is None


def test_unknown_placements_are_refused() -> None:
    with pytest.raises(SystemExit, match="expected a list of shared, split"):
        parse_placements("shared,spread")
    with pytest.raises(SystemExit):
        parse_placements(" , ")


def test_split_needs_two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_mod, "_allowed_cpus", lambda: {0})
    with pytest.raises(SystemExit, match="at least two CPUs"):
        parse_placements("split")


def test_split_halves_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_mod, "_allowed_cpus", lambda: {0, 1, 2, 3, 5})
    (split,) = parse_placements("split")
    assert split == Placement("split", server_cpus=(2, 3, 5), client_cpus=(0, 1))
    assert split.suffix == ".split" and Placement("shared").suffix == ""


def test_placed_pins_every_server_thread_and_gives_cpus_back(
    child: subprocess.Popen[str],
) -> None:
    # the highest CPU for the server, the lowest for the client (one and the same on a
    # one-CPU machine, where the pinning is still checked thread by thread)
    everything = set(os.sched_getaffinity(0))
    split = Placement("split", server_cpus=(max(everything),), client_cpus=(min(everything),))
    with placed([child.pid], split) as cpus:
        assert cpus == [min(everything)]
        masks = _thread_masks(child.pid)
        assert len(masks) == 2 and all(m == {max(everything)} for m in masks)
    assert all(m == everything for m in _thread_masks(child.pid))


def test_a_worker_pins_itself_to_the_cpus_of_its_spec() -> None:
    first = min(os.sched_getaffinity(0))
    code = (
        "import json, os, sys; from bench.placement import pin_worker; "
        "pin_worker(json.loads(sys.argv[1])); print(sorted(os.sched_getaffinity(0)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, f'{{"cpus": [{first}]}}'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"[{first}]"
