"""Query an Iceberg table the export wrote with DuckDB's own Iceberg reader, offline.

DuckDB's ``iceberg`` and ``avro`` extensions ship as the PyPI packages
``duckdb-extension-iceberg`` and ``duckdb-extension-avro`` (built for one DuckDB version):
they are loaded by path from the package folder, avro first, with DuckDB's automatic
extension download off (it would otherwise try to fetch them).

    python -m examples.iceberg_query METADATA_LOCATION
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def extension(package: str, name: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{package} is not installed (pip install {package.replace('_', '-')})")
    found = sorted(Path(spec.origin).parent.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        raise SystemExit(f"{package} ships no {name}.duckdb_extension")
    return str(found[-1])


def connect() -> Any:
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    con.execute(f"LOAD '{extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{extension('duckdb_extension_iceberg', 'iceberg')}'")
    return con


def per_topic(metadata_location: str) -> list[tuple[str, int, int]]:
    """``(topic, messages, distinct message ids)`` per topic of the table."""
    con = connect()
    try:
        rows = con.execute(
            "SELECT topic, count(*), count(DISTINCT message_id) "
            f"FROM iceberg_scan('{metadata_location}') GROUP BY topic ORDER BY topic"
        ).fetchall()
        return [(str(t), int(n), int(d)) for t, n, d in rows]
    finally:
        con.close()


def main(argv: list[str]) -> int:
    for topic, n, distinct in per_topic(argv[0]):
        print(f"{topic} messages={n} distinct_ids={distinct}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
