"""The process the export kill -9 harness kills: ``python -m tests.crash.export_worker HOME
TARGET [ENDPOINT]`` runs ``export run`` (the local engine: the same tasks as Spark's, in this
process) until nothing is left, printing ``READY`` first and ``DONE`` at the end."""

from __future__ import annotations

import sys

from offloader.api import ExportSpec, Offloader

TOPIC = "persistent://public/default/orders"


def spec(target: str, endpoint: str | None) -> ExportSpec:
    return ExportSpec(
        target, partition_by="dt,hr", time_field="ts", max_file_size=2048, endpoint_url=endpoint
    )


def main(argv: list[str]) -> int:
    home, target = argv[0], argv[1]
    endpoint = argv[2] if len(argv) > 2 else None
    print("READY", flush=True)
    with Offloader.from_settings(home) as off:
        off.export_run([TOPIC], spec(target, endpoint), engine="local")
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
