"""Helpers of the Iceberg export tests: DuckDB's own Iceberg reader, loaded offline.

The ``iceberg``, ``avro`` and ``httpfs`` extensions come from the PyPI packages
``duckdb-extension-iceberg``, ``duckdb-extension-avro`` and ``duckdb-extension-httpfs`` (built
for the installed ``duckdb``), loaded by path, avro first, with DuckDB's automatic extension
download off.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from devservers.endpoint import S3Endpoint


def _extension(package: str, name: str) -> str:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, f"{package} is not installed"
    found = sorted(Path(spec.origin).parent.glob(f"extensions/*/{name}.duckdb_extension"))
    assert found, f"{package} ships no {name}.duckdb_extension"
    return str(found[-1])


def iceberg_duck(s3: S3Endpoint | None = None) -> Any:
    """A DuckDB connection with the Iceberg reader (and httpfs with a secret for ``s3``)."""
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    con.execute(f"LOAD '{_extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{_extension('duckdb_extension_iceberg', 'iceberg')}'")
    if s3 is not None:
        con.execute(f"LOAD '{_extension('duckdb_extension_httpfs', 'httpfs')}'")
        parts = urlsplit(s3.url)
        con.execute(
            "CREATE SECRET s3 (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, REGION ?, "
            "URL_STYLE 'path', USE_SSL ?)",
            [s3.access_key, s3.secret_key, parts.netloc, s3.region, parts.scheme == "https"],
        )
    return con


def scan(
    metadata_location: str, select: str, rest: str = "", s3: S3Endpoint | None = None
) -> list[tuple[Any, ...]]:
    """``SELECT select FROM iceberg_scan(metadata_location) rest`` through DuckDB."""
    con = iceberg_duck(s3)
    try:
        sql = f"SELECT {select} FROM iceberg_scan('{metadata_location}') {rest}"
        return list(con.execute(sql).fetchall())
    finally:
        con.close()


def digest(values: list[bytes]) -> str:
    shas = sorted(hashlib.sha256(v).hexdigest() for v in values)
    return hashlib.sha256("".join(shas).encode()).hexdigest()


def table_digest(metadata_location: str, s3: S3Endpoint | None = None) -> tuple[int, int, str]:
    """(rows, distinct message ids, digest of the values) as DuckDB reads the table."""
    ((rows, ids),) = scan(metadata_location, "count(*), count(DISTINCT message_id)", s3=s3)
    values = [bytes(r[0]) for r in scan(metadata_location, "value", s3=s3)]
    return int(rows), int(ids), digest(values)
