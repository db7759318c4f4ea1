"""The Iceberg side of ``offloader export``: ``run``/``status`` with an ``iceberg://`` target
(called from :mod:`cli.export.runs`); ``expire-snapshots`` and ``clean-orphans`` are in
:mod:`cli.export.upkeep`.

Thin: builds the :class:`~offloader.api.IcebergTarget` and calls the facade.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

from cli.cluster import cluster_url, open_cluster
from cli.context import CliContext
from cli.settings import open_offloader
from offloader.api import (
    ExportSpec,
    IcebergStatus,
    IcebergTarget,
    IcebergTopicReport,
    Offloader,
)
from offloader.errors import ExportError
from offloader.units import format_size

__all__ = ["iceberg_target", "reset_iceberg", "run_iceberg", "status_iceberg"]


def _time(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat()


def iceberg_target(
    off: Offloader, cli: CliContext, table: str, catalog: str | None, warehouse: str | None
) -> IcebergTarget:
    return off.iceberg_target(
        table, catalog=catalog, warehouse=warehouse, endpoint_url=cli.endpoint_url
    )


def run_iceberg(
    cli: CliContext,
    topics: tuple[str, ...],
    spec: ExportSpec,
    engine: str,
    kafka: bool = False,
    *,
    cluster: bool = False,
) -> None:
    """``cluster``: the topics are the real Pulsar cluster's of ``--pulsar-metadata``."""
    with contextlib.ExitStack() as stack:
        offloader = stack.enter_context(open_offloader(cli))
        of = stack.enter_context(open_cluster(cli)) if cluster else None
        for r in offloader.export_iceberg_run(topics, spec, engine=engine, kafka=kafka, cluster=of):
            cli.emit(_report(r), _report_text(r))


def _report(r: IcebergTopicReport) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "table": r.table,
        "previous": list(r.previous),
        "watermark": list(r.watermark),
        "files": r.files,
        "rows": r.rows,
        "invalid_rows": r.invalid_rows,
        "bytes": r.bytes,
        "snapshot_id": r.snapshot_id,
        "metadata_location": r.metadata_location,
        "commit_attempts": r.attempts,
        "conflict": r.conflict,
        "publish_time": _time(r.publish_time_ms),
    }


def _report_text(r: IcebergTopicReport) -> str:
    if r.conflict:
        return f"{r.topic}: {r.conflict}"
    return (
        f"{r.topic}: {r.rows} messages in {r.files} files ({format_size(r.bytes)}) -> "
        f"{r.table} snapshot {r.snapshot_id}, watermark {r.previous[0]}:{r.previous[1]} -> "
        f"{r.watermark[0]}:{r.watermark[1]}"
    )


def status_iceberg(
    cli: CliContext,
    topic: str,
    table: str,
    catalog: str | None,
    warehouse: str | None,
    json_output: bool,
    *,
    cluster: bool = False,
) -> None:
    """``cluster``: TOPIC is the real Pulsar cluster's of ``--pulsar-metadata``."""
    with contextlib.ExitStack() as stack:
        offloader = stack.enter_context(open_offloader(cli, read_only=True))
        of = stack.enter_context(open_cluster(cli)) if cluster else None
        st = offloader.export_iceberg_status(
            topic, iceberg_target(offloader, cli, table, catalog, warehouse), cluster=of
        )
    cli.emit(_status(st), _status_text(st), json_output=json_output)
    if st.missing_data_files:
        raise ExportError(
            f"{len(st.missing_data_files)} data files of {st.table}'s current snapshot are "
            f"missing from the warehouse (first: {st.missing_data_files[0]}): readers of the "
            "table fail; put them back from a copy"
        )


def reset_iceberg(
    cli: CliContext,
    topic: str,
    table: str,
    point: str,
    catalog: str | None,
    warehouse: str | None,
) -> None:
    """``export reset`` of an Iceberg table (with ``--pulsar-metadata``: of the cluster's
    topic, not connected to: the watermark is keyed by the cluster's location)."""
    with open_offloader(cli) as offloader:
        r = offloader.export_iceberg_reset(
            topic,
            iceberg_target(offloader, cli, table, catalog, warehouse),
            point,
            cluster=cluster_url(cli),
        )
    cli.emit(
        {
            "topic": r.topic,
            "table": r.table,
            "previous": list(r.previous),
            "watermark": list(r.watermark),
            "removed_rows": r.removed_rows,
            "snapshot_id": r.snapshot_id,
            "metadata_location": r.metadata_location,
        },
        f"{r.topic}: watermark {r.previous[0]}:{r.previous[1]} -> "
        f"{r.watermark[0]}:{r.watermark[1]} in {r.table}, {r.removed_rows} rows removed "
        f"(snapshot {r.snapshot_id})",
    )


def _status(s: IcebergStatus) -> dict[str, Any]:
    return {
        "topic": s.topic,
        "table": s.table,
        "catalog": s.catalog,
        "snapshot_id": s.snapshot_id,
        "metadata_location": s.metadata_location,
        "watermark": list(s.watermark),
        "publish_time": _time(s.publish_time_ms),
        "total_records": s.total_records,
        "total_data_files": s.total_data_files,
        "snapshots": s.snapshots,
        "last_closed": list(s.last_closed),
        "lag_entries": s.lag_entries,
        "lag_ms": s.lag_ms,
        "missing_data_files": list(s.missing_data_files),
    }


def _status_text(s: IcebergStatus) -> str:
    return "\n".join(
        [
            f"{s.topic} -> {s.table} ({s.catalog})",
            f"  snapshot      {s.snapshot_id} ({s.snapshots} kept), {s.total_records} rows in "
            f"{s.total_data_files} files",
            f"  metadata      {s.metadata_location}",
            f"  watermark     {s.watermark[0]}:{s.watermark[1]} (last closed "
            f"{s.last_closed[0]}:{s.last_closed[1]}), published up to {_time(s.publish_time_ms)}",
            f"  lag           {s.lag_entries} entries"
            + (f", {s.lag_ms / 1000:.0f} s" if s.lag_ms is not None else ""),
        ]
        + [f"  MISSING       {u}" for u in s.missing_data_files]
    )
