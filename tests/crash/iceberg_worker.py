"""The process the Iceberg export kill -9 harness kills: ``python -m tests.crash.iceberg_worker
HOME WAREHOUSE [ENDPOINT]`` runs ``export run --to iceberg://lake.orders`` (the local engine)
until nothing is left, printing ``READY`` first and ``DONE`` at the end."""

from __future__ import annotations

import sys

from offloader.api import ExportSpec, Offloader

TOPIC = "persistent://public/default/orders"
TABLE = "iceberg://lake.orders"


def spec(warehouse: str, endpoint: str | None) -> ExportSpec:
    return ExportSpec(
        TABLE, partition_by="dt,hr", max_file_size=2048, warehouse=warehouse, endpoint_url=endpoint
    )


def main(argv: list[str]) -> int:
    home, warehouse = argv[0], argv[1]
    endpoint = argv[2] if len(argv) > 2 else None
    print("READY", flush=True)
    with Offloader.from_settings(home) as off:
        off.export_iceberg_run([TOPIC], spec(warehouse, endpoint), engine="local")
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
