"""The Iceberg ``DataFile`` of each file an export run wrote, from the footer its task reported.

pyiceberg's ``add_files`` opens every file to read its Parquet footer, one round trip per file
on the driver (a GET of the footer on S3), and recomputes the table's statistics plan for each.
The export's tasks had that footer in hand when they wrote the file (pyarrow's
``FileMetaData``, carried back in :class:`~offloader.export.plan.WrittenFile`), so the driver
builds each ``DataFile`` from it with pyiceberg's own helpers, as ``add_files`` does
(``pyiceberg.io.pyarrow.parquet_file_to_data_file``): the file's Arrow schema checked against
the table's (once per distinct schema), the column statistics
(``data_file_statistics_from_parquet_metadata``, with the table's metrics plan computed once
per commit), the partition inferred from the bounds of each partition field's source column
(a file whose rows span two partitions is refused, as ``add_files`` refuses it), and the size
the task wrote. A file whose footer is not known is read as ``add_files`` reads it. We write
no Iceberg metadata: pyiceberg's snapshot producer writes the manifests from these
``DataFile`` values. Errors are pyiceberg's (``ValueError``), translated by the caller
(:mod:`offloader.export.iceberg_catalog`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    _check_pyarrow_schema_compatible,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_file_to_data_file,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table.metadata import TableMetadata

__all__ = ["NewFile", "data_files"]


@dataclass(frozen=True)
class NewFile:
    """A file to commit: its full URI, its size in bytes, and its Parquet footer as a
    ``_metadata`` file's bytes (empty: unknown, read from the file)."""

    path: str
    size: int
    footer: bytes = b""


def data_files(metadata: TableMetadata, io: FileIO, files: Sequence[NewFile]) -> list[DataFile]:
    """The ``DataFile`` of each of ``files`` for the table as ``metadata`` describes it (the
    transaction's metadata: after the schema union and the name mapping)."""
    schema = metadata.schema()
    plan = compute_statistics_plan(schema, metadata.properties)
    mapping = parquet_path_to_id_mapping(schema)
    spec = metadata.spec()
    checked: list[pa.Schema] = []
    out = []
    for f in files:
        if not f.footer:
            out.append(parquet_file_to_data_file(io, metadata, f.path))
            continue
        footer = pq.read_metadata(pa.BufferReader(f.footer))
        arrow = footer.schema.to_arrow_schema()
        if not any(arrow.equals(seen, check_metadata=True) for seen in checked):
            _check_pyarrow_schema_compatible(schema, arrow, format_version=metadata.format_version)
            checked.append(arrow)
        stats = data_file_statistics_from_parquet_metadata(footer, plan, mapping)
        out.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=f.path,
                file_format=FileFormat.PARQUET,
                partition=stats.partition(spec, schema),
                file_size_in_bytes=f.size,
                sort_order_id=None,
                spec_id=metadata.default_spec_id,
                equality_ids=None,
                key_metadata=None,
                **stats.to_serialized_dict(),
            )
        )
    return out
