"""``offloader export expire-snapshots`` and ``export clean-orphans``: the upkeep of an Iceberg
table an export writes (added to the ``export`` group of :mod:`cli.export`).

Thin: builds the :class:`~offloader.api.IcebergTarget` and calls the facade.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.export.iceberg import iceberg_target
from cli.params import DURATION, iceberg_options
from cli.settings import open_offloader
from offloader.api import IcebergOrphanReport

__all__ = ["clean_orphans", "expire_snapshots"]


@click.command("expire-snapshots")
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
        target = iceberg_target(offloader, cli, table, catalog, warehouse)
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


@click.command("clean-orphans")
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
        target = iceberg_target(offloader, cli, table, catalog, warehouse)
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
