"""The export's Iceberg tables through pyiceberg: the one module that calls pyiceberg's
catalogs and tables, and translates their errors into :class:`~offloader.errors.IcebergError`.

pyiceberg writes every metadata file (we write none): the table is created in one transaction
(schema from the export's Arrow columns, partition spec ``identity(topic)`` + ``day`` or
``hour`` of the time column, sort order ``ledger_id, entry_id, batch_index``, zstd Parquet),
and a run's files are committed in one transaction (schema union by name, the files appended
as ``add_files`` appends them, each file's ``DataFile`` built from the footer its task
reported (:mod:`offloader.export.iceberg_files`), the run's snapshot summary, the watermark
properties). pyiceberg's own commit retry, which
would re-apply an append on a newer snapshot without looking at our watermarks, is off
(``commit.retry.num-retries=0``): a conflict comes back as
:class:`~offloader.errors.IcebergConflict` and the run decides (:mod:`offloader.export.iceberg`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform
from pyiceberg.utils.properties import property_as_bool

from offloader.errors import (
    ConfigError,
    IcebergConflict,
    IcebergError,
    IcebergSchemaError,
    OffloaderError,
)
from offloader.export.iceberg_fileio import ENDPOINT, REGION
from offloader.export.iceberg_files import NewFile, data_files
from offloader.export.iceberg_target import (
    PUBLISH_PREFIX,
    RESET_KEY,
    RUN_KEY,
    SETTINGS_KEY,
    SORT_COLUMNS,
    IcebergTarget,
    TableWatermark,
    watermark_properties,
    watermarks_from,
)
from offloader.location import s3_endpoint
from offloader.logs import get_logger

__all__ = [
    "SORT_COLUMNS",
    "TABLE_PROPERTIES",
    "CatalogPool",
    "IcebergCatalog",
    "IcebergTable",
    "open_catalog",
]

log = get_logger(__name__)

#: what every export table is created with
TABLE_PROPERTIES = {
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    "commit.retry.num-retries": "0",
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}
_TIME_TYPES = (pa.types.is_timestamp, pa.types.is_date)


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    """pyiceberg's (and SQLAlchemy's, pyarrow's) errors as :class:`IcebergError`."""
    try:
        yield
    except OffloaderError:
        raise
    except CommitFailedException as exc:
        raise IcebergConflict(f"{what}: another writer committed first ({exc})") from None
    except (ImportError, ModuleNotFoundError) as exc:
        raise IcebergError(f"{what}: a catalog driver is missing: {exc}") from None
    except Exception as exc:  # pyiceberg raises bare ValueError/OSError/SQLAlchemy errors
        raise IcebergError(f"{what}: {type(exc).__name__}: {exc}") from None


def _sql_uri(uri: str) -> str:
    """SQLAlchemy's URI: ``postgresql://`` through psycopg (3) when it is installed."""
    scheme, sep, rest = uri.partition("://")
    if scheme in ("postgresql", "postgres"):
        if importlib.util.find_spec("psycopg") is not None:
            return f"postgresql+psycopg{sep}{rest}"
        return f"postgresql{sep}{rest}"
    return uri


def open_catalog(target: IcebergTarget) -> IcebergCatalog:
    """The catalog of ``target`` (a SQLite file's directory is created)."""
    props: dict[str, str] = {
        "uri": target.catalog_uri,
        "warehouse": target.warehouse,
        "py-io-impl": "offloader.export.iceberg_fileio.StoreFileIO",
    }
    endpoint = s3_endpoint(target.endpoint_url)
    region = target.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    if endpoint:
        props[ENDPOINT] = endpoint
    props[REGION] = region
    if target.catalog_kind == "rest":
        props["type"] = "rest"
    else:
        props["type"] = "sql"
        props["uri"] = _sql_uri(target.catalog_uri)
        if target.catalog_uri.startswith("sqlite:///"):
            Path(target.catalog_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        props["init_catalog_tables"] = "true"
    if target.warehouse.startswith("file://"):
        Path(target.warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    with _translated(f"Iceberg catalog {target.catalog_display}"):
        catalog = load_catalog("ledger-offloader", **props)
    return IcebergCatalog(catalog, target)


def _time_type(schema: pa.Schema, path: Sequence[str]) -> pa.DataType:
    kind: Any = schema
    name = ".".join(path)
    for i, part in enumerate(path):
        if i and not pa.types.is_struct(kind):
            kind = None
            break
        index = kind.get_field_index(part)
        if index < 0:
            kind = None
            break
        kind = kind.field(index).type
    if kind is None:
        raise IcebergSchemaError(f"time field {name}: no such column in the export", name)
    if not any(check(kind) for check in _TIME_TYPES):
        raise IcebergSchemaError(
            f"time field {name} is {kind}: an Iceberg day/hour partition needs a timestamp or "
            "date column (declare it TIMESTAMP in --schema, or partition by publish_time)",
            name,
        )
    return kind


class _Transaction(Transaction):
    """pyiceberg's transaction, whose ``table_metadata`` (the table's metadata with the staged
    updates applied, which pyiceberg recomputes and deep-copies on every access: some 18
    accesses in one append, a quarter of the commit's CPU) is computed once per table metadata
    and set of staged updates. pyiceberg's metadata models are frozen and none of its callers
    changes the object returned; a new update or a commit makes the next access recompute."""

    _seen: tuple[TableMetadata, tuple[Any, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        seen = self._seen
        base, updates = self._table.metadata, self._updates
        if seen is None or seen[0] is not base or seen[1] is not updates:
            compute = Transaction.table_metadata.fget  # type: ignore[attr-defined]
            seen = self._seen = (base, updates, compute(self))
        return seen[2]


class IcebergCatalog:
    def __init__(self, catalog: Catalog, target: IcebergTarget) -> None:
        self._catalog = catalog
        self.target = target

    def load(self) -> IcebergTable | None:
        """The table, or None when it does not exist."""
        with _translated(f"load {self.target.url}"):
            try:
                table = self._catalog.load_table(self.target.identifier)
            except NoSuchTableError:
                return None
        return IcebergTable(table, self.target)

    def create(
        self,
        schema: pa.Schema,
        time_path: Sequence[str],
        transform: str,
        settings: str,
        sort_columns: Sequence[str] = SORT_COLUMNS,
    ) -> IcebergTable:
        """Create the table (or load it when another exporter just created it)."""
        _time_type(schema, time_path)
        props = {**TABLE_PROPERTIES, SETTINGS_KEY: settings}
        what = f"create {self.target.url}"
        with _translated(what):
            self._catalog.create_namespace_if_not_exists(self.target.namespace)
            try:
                tx = self._catalog.create_table_transaction(
                    self.target.identifier, schema=schema, properties=props
                )
                with tx.update_spec() as spec:
                    spec.add_identity("topic")
                    spec.add_field(
                        ".".join(time_path),
                        DayTransform() if transform == "day" else HourTransform(),
                        f"{time_path[-1]}_{transform}",
                    )
                with tx.update_sort_order() as order:
                    for column in sort_columns:
                        order.asc(column, IdentityTransform())
                tx.commit_transaction()
                log.info("iceberg.table_created", table=self.target.url)
            except TableAlreadyExistsError:
                pass
        table = self.load()
        if table is None:  # pragma: no cover - created a moment ago
            raise IcebergError(f"{what}: the table is not there after its creation")
        return table

    def load_metadata(self, metadata_location: str) -> IcebergTable:
        """The table one metadata file describes, read without the catalog (read-only: what
        :meth:`register` would register)."""
        from pyiceberg.table import StaticTable

        with _translated(f"read {metadata_location}"):
            table = StaticTable.from_metadata(metadata_location, self._catalog.properties)
        return IcebergTable(table, self.target)

    def register(self, metadata_location: str) -> IcebergTable:
        """Register the table in the catalog at ``metadata_location`` (a catalog that lost it:
        ``metadata rebuild``); its namespace is created when missing. IcebergConflict when the
        catalog has the table already (another process registered or created it meanwhile)."""
        what = f"register {self.target.url}"
        with _translated(what):
            self._catalog.create_namespace_if_not_exists(self.target.namespace)
            try:
                table = self._catalog.register_table(self.target.identifier, metadata_location)
            except TableAlreadyExistsError:
                raise IcebergConflict(
                    f"{what}: the catalog {self.target.catalog_display} has the table already"
                ) from None
        log.info("iceberg.table_registered", table=self.target.url, metadata=metadata_location)
        return IcebergTable(table, self.target)

    def drop(self) -> None:
        with _translated(f"drop {self.target.url}"):
            self._catalog.drop_table(self.target.identifier)

    def close(self) -> None:
        io = getattr(self._catalog, "_io", None)
        engine = getattr(self._catalog, "engine", None)
        if engine is not None:
            engine.dispose()
        close = getattr(io, "close", None)
        if close is not None:
            close()


class CatalogPool:
    """Catalogs kept open across the export runs of one process (one per target: its
    SQLAlchemy engine, its FileIO and their connections), so a run does not open and close
    the catalog again; closed with the facade. A run that fails drops its target's catalog
    (:meth:`discard`: the next run opens it anew). Each run still loads the table itself: the
    pool keeps connections, never a table's state."""

    def __init__(self) -> None:
        self._open: dict[IcebergTarget, IcebergCatalog] = {}

    def get(self, target: IcebergTarget) -> IcebergCatalog:
        catalog = self._open.get(target)
        if catalog is None:
            catalog = self._open[target] = open_catalog(target)
        return catalog

    def discard(self, target: IcebergTarget) -> None:
        catalog = self._open.pop(target, None)
        if catalog is not None:
            catalog.close()

    def close(self) -> None:
        open_, self._open = self._open, {}
        for catalog in open_.values():
            catalog.close()


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    timestamp_ms: int
    summary: Mapping[str, str]


class IcebergTable:
    """One export table, as loaded (``refresh`` reloads it)."""

    def __init__(self, table: Table, target: IcebergTarget) -> None:
        self._table = table
        self.target = target

    @property
    def location(self) -> str:
        return str(self._table.location()).rstrip("/")

    @property
    def data_url(self) -> str:
        """Where an export run's files go (a local path, or ``s3://bucket/prefix``)."""
        loc = self.location + "/data"
        return loc[len("file://") :] if loc.startswith("file://") else loc

    @property
    def metadata_location(self) -> str:
        return str(self._table.metadata_location)

    @property
    def snapshot_id(self) -> int | None:
        snap = self._table.current_snapshot()
        return None if snap is None else int(snap.snapshot_id)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._table.properties)

    @property
    def arrow_schema(self) -> pa.Schema:
        with _translated(f"schema of {self.target.url}"):
            return self._table.schema().as_arrow()

    def refresh(self) -> None:
        with _translated(f"load {self.target.url}"):
            self._table = self._table.refresh()

    def snapshots(self) -> list[SnapshotInfo]:
        """Every snapshot the metadata keeps, oldest first."""
        out = []
        for s in self._table.metadata.snapshots:
            summary = dict(s.summary.additional_properties) if s.summary is not None else {}
            out.append(SnapshotInfo(int(s.snapshot_id), int(s.timestamp_ms), summary))
        return sorted(out, key=lambda s: (s.timestamp_ms, s.snapshot_id))

    def current_summary(self) -> dict[str, str]:
        snap = self._table.current_snapshot()
        if snap is None or snap.summary is None:
            return {}
        return {**snap.summary.additional_properties, "operation": str(snap.summary.operation)}

    def watermarks(self) -> dict[str, TableWatermark]:
        """Every topic's watermark: from the table's properties (written in the same atomic
        commit as the rows), else from the newest snapshot an export run committed."""
        marks = watermarks_from(self._table.properties)
        for snap in ancestors_of(self._table.current_snapshot(), self._table.metadata):
            summary = snap.summary.additional_properties if snap.summary is not None else {}
            if RUN_KEY in summary:
                return {**watermarks_from(summary), **marks}
        return marks

    def ensure_properties(self, props: Mapping[str, str]) -> None:
        """Set ``props`` where the table differs (one commit, or none)."""
        changed = {k: v for k, v in props.items() if self._table.properties.get(k) != v}
        if changed:
            with _translated(f"set properties of {self.target.url}"):
                self._table = self._table.transaction().set_properties(changed).commit_transaction()

    def commit_files(
        self,
        files: Sequence[NewFile | str],
        schema: pa.Schema,
        summary: Mapping[str, str],
        properties: Mapping[str, str],
    ) -> None:
        """One transaction on the snapshot this table was loaded at: the schema's new fields
        (union by name), ``files`` as data files with ``summary`` in the snapshot's summary,
        and ``properties``. :class:`IcebergConflict` when another commit came first.

        Each file's ``DataFile`` is built from the footer its task reported
        (:mod:`offloader.export.iceberg_files`: what ``add_files`` computes, without reading
        the file); a file given by its path alone is read, as ``add_files`` does."""
        what = f"commit to {self.target.url}"
        news = [NewFile(f, 0) if isinstance(f, str) else f for f in files]
        tx = _Transaction(self._table)
        self._union(tx, schema)
        with _translated(what):
            props = dict(properties)
            if news:  # what add_files sets first: files without field ids are read by name
                staged = tx.table_metadata
                if staged.name_mapping() is None:
                    mapping = staged.schema().name_mapping.model_dump_json()
                    props[TableProperties.DEFAULT_NAME_MAPPING] = mapping
            if props:
                tx.set_properties(props)
            if news:
                metadata = tx.table_metadata
                added = data_files(metadata, self._table.io, news)
                update = tx.update_snapshot(snapshot_properties=dict(summary))
                merge = property_as_bool(
                    metadata.properties,
                    TableProperties.MANIFEST_MERGE_ENABLED,
                    TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT,
                )
                append = update.merge_append() if merge else update.fast_append()
                with append:
                    for data_file in added:
                        append.append_data_file(data_file)
            self._table = tx.commit_transaction()

    def _union(self, tx: Any, schema: pa.Schema) -> None:
        current = self._table.schema().as_arrow()
        if _covers(current, schema):
            return
        try:
            with tx.update_schema() as update:
                update.union_by_name(schema)
        except OffloaderError:
            raise
        except Exception as exc:
            text = str(exc)
            match = re.search(r"(?:column type|field)[:\s]+`?([\w.]+)`?", text)
            field = match.group(1) if match else _first_changed(current, schema)
            raise IcebergSchemaError(
                f"{self.target.url}: the export's column {field} cannot be added to the "
                f"table's schema ({text}); export to a new table, or give the value a "
                "compatible schema",
                field,
            ) from None

    def expire_snapshots(self, older_than_ms: int, retain_last: int) -> list[int]:
        """Expire the snapshots older than ``older_than_ms``, keeping the newest
        ``retain_last`` and the current one; the ids expired."""
        if retain_last < 1:
            raise ConfigError(f"--retain-last {retain_last}: must be 1 or more")
        snaps = self.snapshots()
        keep = {s.snapshot_id for s in snaps[-retain_last:]}
        current = self.snapshot_id
        if current is not None:
            keep.add(current)
        ids = [s.snapshot_id for s in snaps if s.timestamp_ms < older_than_ms]
        ids = [i for i in ids if i not in keep]
        if ids:
            with _translated(f"expire snapshots of {self.target.url}"):
                self._table.maintenance.expire_snapshots().by_ids(ids).commit()
                self._table = self._table.refresh()
        return ids

    def referenced_files(self) -> set[str]:
        """Every file a kept snapshot or metadata version refers to (metadata files, manifest
        lists, manifests, data and delete files, statistics files), as full URIs."""
        meta = self._table.metadata
        io = self._table.io
        out = {self.metadata_location}
        out.update(entry.metadata_file for entry in meta.metadata_log)
        out.update(s.statistics_path for s in meta.statistics)
        out.update(s.statistics_path for s in meta.partition_statistics)
        with _translated(f"read the manifests of {self.target.url}"):
            for snap in meta.snapshots:
                out.add(snap.manifest_list)
                for manifest in snap.manifests(io):
                    out.add(manifest.manifest_path)
                    for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                        out.add(entry.data_file.file_path)
        return out

    def topic_positions(self, topic: str, time_column: str = "publish_time") -> pa.Table:
        """``ledger_id``, ``entry_id`` and ``time_column`` of ``topic``'s rows (the table's
        ``topic`` column), as the current snapshot holds them."""
        from pyiceberg.expressions import EqualTo, Reference
        from pyiceberg.expressions.literals import literal

        with _translated(f"scan {self.target.url}"):
            scan = self._table.scan(
                row_filter=EqualTo(term=Reference("topic"), value=literal(topic)),
                selected_fields=("ledger_id", "entry_id", time_column),
            )
            return scan.to_arrow()

    def reset_topic(self, topic: str, mark: TableWatermark) -> None:
        """One transaction: ``topic``'s rows after ``mark.position`` deleted (files that
        straddle it rewritten without them) and the watermark properties of ``mark.topic``
        set to ``mark``. :class:`IcebergConflict` when another commit came first."""
        from pyiceberg.expressions import And, EqualTo, GreaterThan, Or, Reference
        from pyiceberg.expressions.literals import literal

        ledger, entry = mark.position
        lid, eid = Reference("ledger_id"), Reference("entry_id")
        after = And(
            EqualTo(term=Reference("topic"), value=literal(topic)),
            Or(
                GreaterThan(term=lid, value=literal(ledger)),
                And(
                    EqualTo(term=lid, value=literal(ledger)),
                    GreaterThan(term=eid, value=literal(entry)),
                ),
            ),
        )
        props = watermark_properties({mark.topic: mark})
        tx = _Transaction(self._table)
        with _translated(f"reset {mark.topic} in {self.target.url}"):
            tx.set_properties(props)
            if (
                mark.publish_time_ms is None
                and PUBLISH_PREFIX + mark.topic in tx.table_metadata.properties
            ):
                tx.remove_properties(PUBLISH_PREFIX + mark.topic)
            tx.delete(after, snapshot_properties={RESET_KEY: mark.topic, **props})
            self._table = tx.commit_transaction()

    def data_file_paths(self) -> list[str]:
        """The data files of the current snapshot."""
        with _translated(f"plan a scan of {self.target.url}"):
            return [t.file.file_path for t in self._table.scan().plan_files()]


def _covers(table: pa.Schema, schema: pa.Schema) -> bool:
    """Does the table's schema already hold every field of ``schema`` with the same type?"""
    for field in schema:
        index = table.get_field_index(field.name)
        if index < 0:
            return False
        if not _same(table.field(index).type, field.type):
            return False
    return True


def _same(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return _covers(pa.schema(list(a)), pa.schema(list(b)))
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    # Iceberg reads strings and binaries back as their large Arrow types
    return str(a).replace("large_", "") == str(b).replace("large_", "")


def _first_changed(table: pa.Schema, schema: pa.Schema, prefix: str = "") -> str | None:
    for field in schema:
        index = table.get_field_index(field.name)
        if index < 0:
            continue
        old = table.field(index).type
        if pa.types.is_struct(old) and pa.types.is_struct(field.type):
            inner = _first_changed(pa.schema(list(old)), pa.schema(list(field.type)), field.name)
            if inner:
                return f"{prefix}.{inner}" if prefix else inner
        elif not _same(old, field.type):
            return f"{prefix}.{field.name}" if prefix else field.name
    return None
