"""bench.spark._interleaved: the queries take turns, each round in the opposite order, and
each keeps its fastest run."""

from __future__ import annotations

from typing import Any

import pytest

import bench.spark as bench_spark


def test_queries_take_turns_and_keep_their_fastest_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_spark, "settle", lambda: None)
    calls: list[str] = []
    durations = {"scan": [5.0, 2.0, 3.0], "floor": [1.0, 4.0, 0.5]}

    t = [0.0]

    def perf_counter() -> float:
        return t[0]

    monkeypatch.setattr(bench_spark.time, "perf_counter", perf_counter)

    def query(name: str) -> Any:
        def run() -> str:
            calls.append(name)
            t[0] += durations[name][sum(1 for c in calls if c == name) - 1]
            return name

        return run

    best = bench_spark._interleaved(3, {"scan": query("scan"), "floor": query("floor")})
    assert calls == ["scan", "floor", "floor", "scan", "scan", "floor"]
    assert best["scan"].seconds == 2.0 and best["scan"].value == "scan"
    assert best["floor"].seconds == 0.5 and best["floor"].value == "floor"
