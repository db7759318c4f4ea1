"""The Iceberg side of ``offloader export``: ``run``/``status`` with an ``iceberg://`` target
(called from :mod:`cli.export`), ``expire-snapshots`` and ``clean-orphans``.

Thin: builds the :class:`~offloader.api.IcebergTarget` and calls the facade.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.export import export
from cli.params import DURATION, iceberg_options
from cli.settings import open_offloader
from offloader.api import (
    ExportSpec,
    IcebergOrphanReport,
    IcebergStatus,
    IcebergTarget,
    IcebergTopicReport,
    Offloader,
)
from offloader.units import format_size

__all__ = ["export", "run_iceberg", "status_iceberg"]


def _time(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat()


def _target(
    off: Offloader, cli: CliContext, table: str, catalog: str | None, warehouse: str | None
) -> IcebergTarget:
    return off.iceberg_target(
        table, catalog=catalog, warehouse=warehouse, endpoint_url=cli.endpoint_url
    )


def run_iceberg(
    cli: CliContext, topics: tuple[str, ...], spec: ExportSpec, engine: str, kafka: bool = False
) -> None:
    with open_offloader(cli) as offloader:
        for r in offloader.export_iceberg_run(topics, spec, engine=engine, kafka=kafka):
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
) -> None:
    with open_offloader(cli, read_only=True) as offloader:
        st = offloader.export_iceberg_status(
            topic, _target(offloader, cli, table, catalog, warehouse)
        )
    cli.emit(_status(st), _status_text(st), json_output=json_output)


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
    )


@export.command("expire-snapshots")
@click.argument("table")
@click.option(
    "--older-than",
    type=DURATION,
    required=True,
    metavar="DURATION",
    help="Expire snapshots committed longer ago than this (e.g. 7d, 12h).",
)
@click.option(
    "--retain-last",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Always keep this many of the newest snapshots (the current one is always kept).",
)
@iceberg_options
@pass_cli
def expire_snapshots(
    cli: CliContext,
    table: str,
    older_than: int,
    retain_last: int,
    catalog: str | None,
    warehouse: str | None,
) -> None:
    """Expire old snapshots of the Iceberg TABLE (iceberg://NAMESPACE.TABLE). The current
    snapshot, which carries every topic's watermark, is kept.

    \b
    Example:
      offloader export expire-snapshots iceberg://pulsar.orders --older-than 7d --retain-last 10
    """
    with open_offloader(cli, read_only=True) as offloader:
        target = _target(offloader, cli, table, catalog, warehouse)
        r = offloader.export_expire_snapshots(target, older_than, retain_last=retain_last)
    cli.emit(
        {
            "table": r.table,
            "expired": list(r.expired),
            "kept": r.kept,
            "snapshot_id": r.snapshot_id,
            "metadata_location": r.metadata_location,
        },
        f"{r.table}: {len(r.expired)} snapshots expired, {r.kept} kept "
        "(run clean-orphans to remove their files)",
    )


@export.command("clean-orphans")
@click.argument("table")
@click.option(
    "--older-than",
    type=DURATION,
    default="1d",
    show_default=True,
    metavar="DURATION",
    help="Only files older than this (keep it above the longest export run).",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@iceberg_options
@pass_cli
def clean_orphans(
    cli: CliContext,
    table: str,
    older_than: int,
    dry_run: bool,
    catalog: str | None,
    warehouse: str | None,
) -> None:
    """Remove the files under the Iceberg TABLE's location that no kept snapshot or metadata
    version refers to (a crashed run's files, expired snapshots' manifests).

    \b
    Example:
      offloader export clean-orphans iceberg://pulsar.orders --older-than 3d --dry-run
    """
    with open_offloader(cli, read_only=True) as offloader:
        target = _target(offloader, cli, table, catalog, warehouse)
        r = offloader.export_clean_orphans(target, older_than, dry_run=dry_run)
    cli.emit(_orphans(r), _orphans_text(r))


def _orphans(r: IcebergOrphanReport) -> dict[str, Any]:
    return {
        "table": r.table,
        "removed": list(r.removed),
        "kept_young": r.kept_young,
        "referenced": r.referenced,
        "dry_run": r.dry_run,
    }


def _orphans_text(r: IcebergOrphanReport) -> str:
    verb = "would remove" if r.dry_run else "removed"
    lines = [f"{r.table}: {verb} {len(r.removed)} files, {r.kept_young} younger ones kept"]
    lines += [f"  {u}" for u in r.removed]
    return "\n".join(lines)
