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

from collections import Counter

import click

from cli.context import CliContext, pass_cli
from cli.params import topics_option
from cli.render import Progress, echo_json, echo_table, progress_enabled
from cli.settings import open_offloader
from offloader.api import RebuildItem, RebuildReport
from offloader.errors import VerificationError

#: the kind of the Kafka segments' items (offloader.rebuild.kafka_segments)
KAFKA_KIND = "kafka-segments"


def _where(item: RebuildItem) -> str | int:
    """The LEDGER column: a ledger id, or a Kafka item's ``p<partition> <start>..<end>``."""
    if item.ledger_id is not None:
        return item.ledger_id
    f = item.fields
    if item.kind != KAFKA_KIND or "partition" not in f:
        return ""
    if "end_offset" in f:
        return f"p{f['partition']} {f['start_offset']}..{f['end_offset']}"
    if "position" in f:
        return f"p{f['partition']} {'' if f['position'] is None else f['position']}"
    return f"p{f['partition']} {f.get('base_offset', '')}.."


def _position(item: RebuildItem) -> str | int:
    """The ledger id, or an export watermark's ``ledger:entry``."""
    if item.ledger_id is None:
        return ""
    entry = item.fields.get("entry_id") if item.kind == "export-watermarks" else None
    return item.ledger_id if entry is None else f"{item.ledger_id}:{entry}"


def _echo(report: RebuildReport) -> None:
    rows = [
        (
            item.action,
            item.topic or "",
            _where(item) if item.kind == KAFKA_KIND else _position(item),
            item.uuid or "",
            item.detail,
        )
        for item in report.items
    ]
    if rows:
        echo_table(("ACTION", "TOPIC", "LEDGER", "UUID", "DETAIL"), rows)
    s = report.summary()
    pulsar = Counter(
        i.action for i in report.items if i.kind not in (KAFKA_KIND, "export-watermarks")
    )
    verb = "would record" if report.dry_run else "recorded"
    click.echo(
        f"{s['objects_listed']} object(s) listed, {s['gets']} GET(s), {s['heads']} HEAD(s); {verb} "
        f"{pulsar['offload']} offloaded ledger(s) in {pulsar['topic']} topic(s), "
        f"{pulsar['superseded']} superseded and {pulsar['unfinished']} unfinished attempt(s); "
        f"{pulsar['orphan']} orphan attempt(s), {pulsar['present']} already present, "
        f"{s['conflict']} conflict(s), {s['problem']} problem(s)"
    )
    exports = [i for i in report.items if i.kind == "export-watermarks" and i.action == "watermark"]
    if exports:
        click.echo(f"{verb} {len(exports)} export watermark(s)")
    tables = [i for i in report.items if i.kind == "export-watermarks" and i.action == "register"]
    if tables:
        registered = "would register" if report.dry_run else "registered"
        click.echo(f"{registered} {len(tables)} Iceberg table(s) the catalog had lost")
    kafka = Counter(i.action for i in report.items if i.kind == KAFKA_KIND)
    if kafka:
        click.echo(
            f"Kafka: {verb} {kafka['offload']} finished segment(s) in {kafka['watermark']} "
            f"partition(s), {kafka['superseded']} superseded copy(ies), {kafka['orphan']} "
            f"unfinished attempt(s) left as orphans, {kafka['present']} already present"
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
@click.option(
    "--export-target",
    "export_targets",
    metavar="URL",
    multiple=True,
    help="Also rebuild the export watermarks of this target (repeatable): a Parquet target "
    "(directory, s3://, gs://, az://) from its watermark records, or iceberg://NS.TABLE "
    "(read from the table; a table the catalog lost is registered again from the newest "
    "metadata file under --warehouse).",
)
@click.option("--catalog", metavar="URI", help="The catalog of iceberg:// targets.")
@click.option("--warehouse", metavar="URL", help="The warehouse of iceberg:// targets.")
@click.option(
    "--target-endpoint",
    metavar="URL",
    help="S3 endpoint of s3:// export targets (default: --endpoint-url).",
)
@pass_cli
def rebuild(
    cli: CliContext,
    topics: str | None,
    dry_run: bool,
    merge: bool,
    export_targets: tuple[str, ...],
    catalog: str | None,
    warehouse: str | None,
    target_endpoint: str | None,
) -> None:
    """Recreate the metadata store's records from the object store's listing.

    Reads only the listing (completion markers and watermark objects; spec/bucket-manifests.md),
    never the data. Finished copies become offloaded ledgers; attempts without a completion
    marker become orphans for `objects orphans` and `objects gc`; of two finished copies of a
    ledger the one the topic's watermark names (else the lowest UUID) is kept, the other
    recorded as superseded. Kafka segments likewise (spec/kafka-manifests.md): finished copies
    become COPY_SEGMENT_FINISHED records and the partitions' watermarks are rebuilt; of two
    copies of the same offsets one is kept, the other reported. Refuses a metadata store that
    already has topics or Kafka partitions unless --merge. Exits 1 if a marker's objects are
    missing.

    With --export-target, the export watermarks of those targets too (spec/export.md §5a):
    a Parquet target's from the watermark record each run leaves in its _offloader/
    directory (exact: `export run` then continues exactly once), or, for files written
    before records existed, from the file names and _SUCCESS markers. --merge never
    lowers a watermark the store has. An iceberg:// table keeps its watermarks itself;
    when its catalog lost it (the home's SQLite catalog went with the home) the newest
    metadata/*.metadata.json of <warehouse>/<namespace>/<table> is registered in the
    catalog (two files of that version are refused); --dry-run names the file.

    \b
    Examples:
      offloader --home new-home --store s3://bucket metadata rebuild --dry-run
      offloader --home new-home --store s3://bucket metadata rebuild --topics 'persistent://public/default/.*'
      offloader --json metadata rebuild --merge
      offloader --home new-home --store s3://bucket metadata rebuild --export-target s3://lake/pulsar
      offloader --home new-home metadata rebuild --export-target iceberg://ns.t --warehouse s3://w
    """
    with (
        open_offloader(cli) as offloader,
        Progress("listing", enabled=progress_enabled(cli), unit="objects") as progress,
    ):
        report = offloader.metadata_rebuild(
            topics=topics,
            dry_run=dry_run,
            merge=merge,
            progress=progress,
            export_targets=export_targets,
            catalog=catalog,
            warehouse=warehouse,
            endpoint_url=target_endpoint or cli.endpoint_url,
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
