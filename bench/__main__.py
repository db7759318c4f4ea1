"""Dispatcher: ``python -m bench <name> [args...]`` or ``python -m bench all``.

Each benchmark is a module with ``main(argv: list[str]) -> int`` registered in
:data:`BENCHMARKS` (name -> module path). To add one, create the module and add a line here.
A registered module that does not exist yet is skipped with a message on stderr, so the
registry can name benchmarks other work will add.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import cast

from bench import note

#: name -> module path; every module exposes ``main(argv: list[str]) -> int``
BENCHMARKS: dict[str, str] = {
    "encode": "bench.encode",
    "pulsar_decode": "bench.pulsar_decode",
    "pulsar_scan": "bench.pulsar_scan",
    "pulsar_stages": "bench.pulsar_stages",
    "offload": "bench.offload",
    "read": "bench.read",
    "spark": "bench.spark",
    "transform": "bench.transform",
    "kafka": "bench.kafka",
    "kafka_spark": "bench.kafka_spark",
    "kafka_kraft": "bench.kafka_kraft",
    "metrics": "bench.metrics",
    "metadata": "bench.metadata",
    "rebuild": "bench.rebuild",
    "export": "bench.export",
    "iceberg": "bench.iceberg",
    "pulsar_cluster": "bench.pulsar_cluster",
    "kafka_cluster": "bench.kafka_cluster",
    "clouds": "bench.clouds",
}

USAGE = f"usage: python -m bench <name> [args...] | all | list\nbenchmarks: {', '.join(BENCHMARKS)}"


def _load(name: str) -> Callable[[list[str]], int] | None:
    module_path = BENCHMARKS[name]
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_path.startswith(exc.name):
            note(f"bench: skipping {name!r}: module {module_path} does not exist yet")
            return None
        raise
    return cast(Callable[[list[str]], int], module.main)


def run(name: str, argv: list[str]) -> int:
    main = _load(name)
    if main is None:
        return 0
    return main(argv)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        note(USAGE)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name == "list":
        for bench_name, module_path in BENCHMARKS.items():
            print(f"{bench_name}\t{module_path}")
        return 0
    if name == "all":
        status = 0
        for bench_name in BENCHMARKS:
            status = max(status, run(bench_name, rest))
        return status
    if name not in BENCHMARKS:
        note(f"bench: unknown benchmark {name!r}\n{USAGE}")
        return 2
    return run(name, rest)


if __name__ == "__main__":
    sys.exit(main())
