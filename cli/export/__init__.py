"""``offloader export``: the group, and its commands from the modules beside it.

:mod:`cli.export.runs` (``run``, ``status``, ``reset``; the Iceberg side in
:mod:`cli.export.iceberg`) and :mod:`cli.export.upkeep` (``expire-snapshots``,
``clean-orphans``).
"""

from __future__ import annotations

import click

from cli.export import runs, upkeep

__all__ = ["export"]


@click.group()
def export() -> None:
    """Export topics to Parquet files (Hive-partitioned by time) or Apache Iceberg tables,
    exactly once."""


export.add_command(runs.run)
export.add_command(runs.status)
export.add_command(runs.reset)
export.add_command(upkeep.expire_snapshots)
export.add_command(upkeep.clean_orphans)
