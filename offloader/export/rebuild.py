"""Export watermarks rebuilt from the export targets (``metadata rebuild --export-target``).

The :class:`~offloader.rebuild.base.Rebuilder` of kind ``export-watermarks``, handed to
:func:`offloader.rebuild.run.rebuild` by the facade with the targets the user names
(spec/export.md §5a):

* **A Parquet target** (a directory, ``s3://``, ``gs://``, ``az://``) is listed once. Each
  watermark record (:mod:`offloader.export.record`, one small GET each) is the watermark as
  the run that wrote it committed it, exact: a rebuilt watermark continues exactly once (the
  files a crashed run left past it are removed by the next run, files gone below it written
  again). A stream with files but no record (a target written before records existed) gets
  the watermark its names and ``_SUCCESS`` markers allow: the last position of a file in a
  directory that has ``_SUCCESS`` (a partition no run writes into again), moved back before
  any file that straddles it, its file count from the names, rows unknown (0), settings
  unknown (the next run's are kept).
* **An Iceberg table** (``iceberg://NS.TABLE``, through its catalog) carries its watermarks
  itself (snapshot summary and properties, §10): they are read and reported, nothing is
  written to the home's store (an Iceberg run never reads it). A catalog that lost the table
  (the home's SQLite catalog went with the home) while the warehouse kept it gets it back:
  the newest ``metadata/*.metadata.json`` under ``<warehouse>/<namespace>/<table>`` (by its
  version number; two of that version refused, §5a) is registered in the catalog
  (``register``), its watermarks reported.

Writing never lowers a watermark the store has (``--merge``): one behind is raised
(compare-and-set on the position read), one at or ahead is left as it is (``present``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote

from offloader.errors import ExportError, IcebergConflict, OffloadConflict, OffloaderError
from offloader.export.iceberg_target import IcebergTarget, newest_metadata, resolve_target
from offloader.export.manage import straddle_free
from offloader.export.naming import SUCCESS, ExportFile, is_shortened, parse_file_name
from offloader.export.record import decode_record, is_record_path
from offloader.export.settings import normalize_target
from offloader.export.target import ExportTarget, TargetSpec
from offloader.logs import get_logger
from offloader.metadata.export_base import ExportMetadataStore, ExportWatermark
from offloader.rebuild.base import Action, RebuildItem, StoreListing, TopicSelector
from offloader.runtime import Runtime

__all__ = ["KIND", "ExportWatermarks", "Found", "watermark_from_files"]

log = get_logger(__name__)

KIND = "export-watermarks"


@dataclass(frozen=True)
class Found:
    """A watermark a target says, where it came from (``record``, ``files`` or ``table``)."""

    mark: ExportWatermark
    source: str
    detail: str = ""


@dataclass(frozen=True)
class Registration:
    """A table the catalog lost, to register at the newest metadata file in the warehouse."""

    table: IcebergTarget
    metadata_location: str


@dataclass
class Plan:
    found: list[Found]
    problems: list[RebuildItem]
    registrations: list[Registration] = field(default_factory=list)


def _item(action: Action, f: Found, detail: str = "") -> RebuildItem:
    m = f.mark
    return RebuildItem(
        KIND,
        action,
        m.topic,
        m.ledger_id,
        None,
        detail or f.detail,
        {
            "target": m.target,
            "generation": m.generation,
            "entry_id": m.entry_id,
            "files": m.files,
            "rows": m.rows,
            "source": f.source,
        },
    )


def _problem(target: str, detail: str) -> RebuildItem:
    fields = {"target": target}
    return RebuildItem(KIND, "problem", None, detail=f"{target}: {detail}", fields=fields)


def watermark_from_files(
    target: str,
    key: str,
    generation: int,
    files: Sequence[ExportFile],
    markers: set[str],
    now_ms: int,
) -> ExportWatermark | None:
    """A stream's watermark from its files' names and the ``_SUCCESS`` markers alone: the
    last position of a file in a marked directory, moved back before any file that straddles
    it (None when no file is in a marked directory)."""
    final = [f.last for f in files if f.directory in markers]
    if not final:
        return None
    # back before any file holding entries on both sides of it (files of other partition
    # values interleave): the next run removes the files past it and writes them again whole
    end = straddle_free(list(files), max(final))
    if end[1] < -1 or end < (0, -1):
        return None
    count = sum(1 for f in files if f.last <= end)
    return ExportWatermark(target, key, generation, end[0], end[1], files=count, updated_ms=now_ms)


class ExportWatermarks:
    """The :class:`~offloader.rebuild.base.Rebuilder` of export watermarks (see the module)."""

    kind = KIND

    def __init__(
        self,
        exports: ExportMetadataStore,
        parquet: Sequence[TargetSpec] = (),
        iceberg: Sequence[IcebergTarget] = (),
    ) -> None:
        self._exports = exports
        self._parquet = list(parquet)
        self._iceberg = list(iceberg)

    @classmethod
    def of_urls(
        cls,
        exports: ExportMetadataStore,
        urls: Sequence[str],
        home: Path,
        *,
        catalog: str | None = None,
        warehouse: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> ExportWatermarks:
        """The rebuilder of the targets the user named (``--export-target``, the spellings of
        ``export run --to``): ``iceberg://NS.TABLE`` with ``catalog``/``warehouse`` (else
        the home's defaults), any other a Parquet target (``endpoint_url``/``region``)."""
        parquet: list[TargetSpec] = []
        iceberg: list[IcebergTarget] = []
        for url in dict.fromkeys(urls):
            if url.strip().lower().startswith("iceberg://"):
                table = resolve_target(url, home, catalog=catalog, warehouse=warehouse)
                iceberg.append(replace(table, endpoint_url=endpoint_url, region=region))
            else:
                parquet.append(TargetSpec(normalize_target(url), endpoint_url, region))
        return cls(exports, parquet, iceberg)

    def existing_records(self, rt: Runtime) -> int:
        return sum(len(self._exports.list_watermarks(target=t.url)) for t in self._parquet)

    # --- planning -------------------------------------------------------------------------
    def plan(self, rt: Runtime, listing: StoreListing, select: TopicSelector) -> Plan:
        plan = Plan([], [])
        for spec in self._parquet:
            try:
                plan.found.extend(f for f in self._parquet_target(rt, spec) if select(f.mark.topic))
            except OffloaderError as exc:
                plan.problems.append(_problem(spec.url, str(exc)))
        for table in self._iceberg:
            try:
                found, registration = self._iceberg_table(table)
                plan.found.extend(f for f in found if select(f.mark.topic))
                if registration is not None:
                    plan.registrations.append(registration)
            except OffloaderError as exc:
                plan.problems.append(_problem(table.url, str(exc)))
        return plan

    def _parquet_target(self, rt: Runtime, spec: TargetSpec) -> list[Found]:
        target = ExportTarget(spec)
        out: dict[tuple[str, int], Found] = {}
        files: dict[tuple[str, int], list[ExportFile]] = defaultdict(list)
        markers: set[str] = set()
        for rel, size in target.list_all():
            if is_record_path(rel):
                mark = decode_record(target.read_whole(rel), rel)
                out[(mark.topic, mark.generation)] = Found(
                    replace(mark, target=spec.url), "record", "the target's watermark record"
                )
                continue
            directory, _, name = rel.rpartition("/")
            if name == SUCCESS:
                markers.add(directory)
                continue
            topic_part = rel.partition("/")[0]
            parsed = parse_file_name(rel, size)
            if parsed is None or not topic_part.startswith("topic=") or is_shortened(topic_part):
                continue
            topic = unquote(topic_part[len("topic=") :])
            # a Pulsar topic's full name has a scheme; a Kafka topic's name never has ':'
            key = topic if "://" in topic else f"kafka:{topic}:{parsed.ledger_id}"
            files[(key, parsed.generation)].append(parsed)
        for (key, generation), found in sorted(files.items()):
            if (key, generation) in out:
                continue
            guess = watermark_from_files(spec.url, key, generation, found, markers, rt.now_ms())
            if guess is not None:
                out[(key, generation)] = Found(
                    guess,
                    "files",
                    "no watermark record: from file names and _SUCCESS markers (rows unknown)",
                )
        log.info("rebuild.export_target_listed", target=spec.url, watermarks=len(out))
        return [out[k] for k in sorted(out)]

    @staticmethod
    def _iceberg_table(table: IcebergTarget) -> tuple[list[Found], Registration | None]:
        from offloader.export.iceberg_catalog import open_catalog
        from offloader.export.iceberg_manage import metadata_files

        registration = None
        catalog = open_catalog(table)
        try:
            loaded = catalog.load()
            if loaded is None:
                newest = newest_metadata(table.url, metadata_files(table))
                if newest is None:
                    raise ExportError(
                        f"no table {table.identifier} in the catalog {table.catalog_display}, "
                        f"and no metadata file under {table.default_location}/metadata"
                    )
                loaded = catalog.load_metadata(newest)
                registration = Registration(table, newest)
            marks = loaded.watermarks()
        finally:
            catalog.close()
        detail = "kept in the table (snapshot summary and properties): nothing to write"
        found = [
            Found(
                ExportWatermark(
                    table.url, topic, 1, m.position[0], m.position[1], m.publish_time_ms
                ),
                "table",
                detail,
            )
            for topic, m in sorted(marks.items())
        ]
        return found, registration

    @staticmethod
    def _register(r: Registration, *, write: bool) -> RebuildItem:
        fields = {
            "target": r.table.url,
            "metadata_location": r.metadata_location,
            "catalog": r.table.catalog_display,
        }
        where = f"in the catalog {r.table.catalog_display}"
        if not write:
            detail = f"{r.table.url}: would register {r.metadata_location} {where}"
            return RebuildItem(KIND, "register", None, detail=detail, fields=fields)
        from offloader.export.iceberg_catalog import open_catalog

        catalog = open_catalog(r.table)
        try:
            catalog.register(r.metadata_location)
        except IcebergConflict as exc:  # registered or created meanwhile: left as it is
            return RebuildItem(KIND, "conflict", None, detail=str(exc), fields=fields)
        except OffloaderError as exc:
            return RebuildItem(KIND, "problem", None, detail=f"{r.table.url}: {exc}", fields=fields)
        finally:
            catalog.close()
        detail = f"{r.table.url}: registered {r.metadata_location} {where}"
        return RebuildItem(KIND, "register", None, detail=detail, fields=fields)

    # --- reporting and writing ------------------------------------------------------------
    def items(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        return [
            *plan.problems,
            *(self._register(r, write=False) for r in plan.registrations),
            *(self._one(f, write=False) for f in plan.found),
        ]

    def apply(self, rt: Runtime, plan: object, *, merge: bool) -> list[RebuildItem]:
        assert isinstance(plan, Plan)
        return [
            *plan.problems,
            *(self._register(r, write=True) for r in plan.registrations),
            *(self._one(f, write=True) for f in plan.found),
        ]

    def _one(self, f: Found, *, write: bool) -> RebuildItem:
        if f.source == "table":
            return _item("present", f)
        m = f.mark
        existing = self._exports.get_watermark(m.target, m.topic, m.generation)
        if existing is not None and existing.position >= m.position:
            same = existing.position == m.position
            return _item(
                "present",
                f,
                "already recorded" if same else f"the store's {existing.position} is ahead: kept",
            )
        if write:
            try:
                self._exports.advance(m, None if existing is None else existing.position)
            except OffloadConflict as exc:  # another run moved it meanwhile
                return _item("conflict", f, str(exc))
        if existing is None:
            return _item("watermark", f)
        return _item("watermark", f, f"raised from {existing.position} ({f.detail})")
