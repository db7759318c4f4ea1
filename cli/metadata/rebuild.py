"""``offloader metadata rebuild``: recreate the home's metadata store from the object store.

The store's listing is read once (with a progress bar on a terminal); the completion markers
and watermark objects (spec/bucket-manifests.md) say what was offloaded, and the records are
written through the facade into the home's metadata store (SQLite, or ``--metadata
postgresql://...``). No data object is read.

Text output is one table of the records (action, topic, ledger, UUID, detail) and a summary
line; ``--json`` prints one object per record (``{kind, action, topic, ledger_id, uuid, ...}``)
and then one ``{"summary": {...}}`` object. Exit code 1 when the store already has records
and ``--merge`` was not given (nothing is written), and when the bucket contradicts itself
(``problem`` records: a marker whose data or index object is missing).
"""

from __future__ import annotations

import click

from cli.context import CliContext, pass_cli
from cli.params import topics_option
from cli.render import Progress, echo_json, echo_table, progress_enabled
from cli.settings import open_offloader
from offloader.api import RebuildReport
from offloader.errors import VerificationError


def _echo(report: RebuildReport) -> None:
    rows = [
        (
            item.action,
            item.topic or "",
            "" if item.ledger_id is None else item.ledger_id,
            item.uuid or "",
            item.detail,
        )
        for item in report.items
    ]
    if rows:
        echo_table(("ACTION", "TOPIC", "LEDGER", "UUID", "DETAIL"), rows)
    s = report.summary()
    verb = "would record" if report.dry_run else "recorded"
    click.echo(
        f"{s['objects_listed']} object(s) listed, {s['gets']} GET(s), {s['heads']} HEAD(s); {verb} "
        f"{s['offload']} offloaded ledger(s) in {s['topic']} topic(s), {s['superseded']} "
        f"superseded and {s['unfinished']} unfinished attempt(s); {s['orphan']} orphan "
        f"attempt(s), {s['present']} already present, {s['conflict']} conflict(s), "
        f"{s['problem']} problem(s)"
    )


@click.command()
@topics_option()
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be recorded (with --merge: compared with what is); write nothing.",
)
@click.option(
    "--merge",
    is_flag=True,
    help="Add only what is missing to a store that has records; never change one.",
)
@pass_cli
def rebuild(cli: CliContext, topics: str | None, dry_run: bool, merge: bool) -> None:
    """Recreate the metadata store's records from the object store's listing.

    Reads only the listing (completion markers and watermark objects; spec/bucket-manifests.md),
    never the data. Finished copies become offloaded ledgers; attempts without a completion
    marker become orphans for `objects orphans` and `objects gc`; of two finished copies of a
    ledger the one the topic's watermark names (else the lowest UUID) is kept, the other
    recorded as superseded. Refuses a metadata store that already has topics unless --merge.
    Exits 1 if a marker's objects are missing.

    \b
    Examples:
      offloader --home new-home --store s3://bucket metadata rebuild --dry-run
      offloader --home new-home --store s3://bucket metadata rebuild --topics 'persistent://public/default/.*'
      offloader --json metadata rebuild --merge
    """
    with (
        open_offloader(cli) as offloader,
        Progress("listing", enabled=progress_enabled(cli), unit="objects") as progress,
    ):
        report = offloader.metadata_rebuild(
            topics=topics, dry_run=dry_run, merge=merge, progress=progress
        )
    if report.objects_listed == 0:
        click.echo(
            "warning: the store holds no object: check --store (and --endpoint-url)", err=True
        )
    if cli.json:
        for item in report.items:
            echo_json(item.as_json())
        echo_json({"summary": report.summary()})
    else:
        _echo(report)
    problems = [item for item in report.items if item.action == "problem"]
    if problems:
        raise VerificationError(
            f"{len(problems)} problem(s) in the bucket's manifests (first: {problems[0].detail})"
        )
