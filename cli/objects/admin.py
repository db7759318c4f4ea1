"""``offloader objects verify | orphans | gc``: audit the object store against the metadata.

These commands join the ``objects`` group of :mod:`cli.objects` (``inspect``/``encode`` work on
local files; these talk to the store). ``verify`` reads a ledger's stored objects back and checks
them against what the metadata recorded (sizes, index, and with ``--verify-checksums`` every
block's CRC32C); ``orphans`` lists objects no ledger claims, unfinished multipart uploads and
claimed objects that are missing; ``gc`` deletes the orphans this installation provably
wrote (``deletable``: a UUID of its attempt history and its marker in the object's metadata)
and leaves everything else sharing the store alone, reported (not the missing either: that
needs a person).

JSON objects (``--json``): verify prints one ``{topic, ledger_id, uuid, ok, data_size,
index_size, checked_checksums, problem}`` per ledger; orphans and gc print one
``{clean, removed, dry_run, objects: [{key, size, reason, last_modified_ms, deletable}],
uploads: [{key, upload_id, initiated_ms, reason, deletable}], missing: [{topic, ledger_id,
uuid, key}]}``.

Exit codes: 1 when ``verify`` finds a bad ledger (or ``--ledger`` names one that does not exist
or is not offloaded), and when ``orphans``/``gc`` find claimed objects missing (data loss, for a
person to look at); orphans and unfinished uploads alone are not an error. All three refuse a
local store directory that does not exist rather than create an empty one.

With ``--pulsar-metadata`` orphans and gc audit the bucket a real Pulsar cluster offloads to
against its metadata store (:mod:`cli.cluster` renders them; JSON: ``{cluster, store, topics,
listed_objects, listed_bytes, orphan_bytes, price_per_gb_month, monthly_cost, clean, objects:
[{key, size, reason, age_seconds, last_modified_ms, uuid, ledger_id, managed_ledger,
monthly_cost, deletable}], uploads: [{key, upload_id, reason, age_seconds, initiated_ms, uuid,
ledger_id, deletable}]}``, gc adding ``dry_run``, ``deleted`` and ``aborted``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from cli.cluster import cluster_url, echo_cluster_audit, open_cluster
from cli.context import CliContext, pass_cli
from cli.params import DURATION
from cli.render import Progress, echo_json, echo_table, plural, progress_enabled, time_text
from cli.settings import open_offloader, read_options, resolve_settings
from offloader.api import S3_STANDARD_PRICE, Offloader, OrphanReport, VerifyResult
from offloader.errors import InvalidLedgerState, NotFound, VerificationError
from offloader.units import format_size


def _verify_with_progress(
    offloader: Offloader, topic: str | None, checksums: bool, progress: Progress
) -> list[VerifyResult]:
    """Verify ledger by ledger so that the bar can move (only when a person is watching)."""
    names = [topic] if topic is not None else offloader.list_topics()
    targets = [
        (name, ledger.ledger_id, ledger.size_bytes)
        for name in names
        for ledger in offloader.topic_info(name).ledgers
        if ledger.offload_complete
    ]
    progress.total = sum(size for _, _, size in targets)
    results: list[VerifyResult] = []
    for name, ledger_id, size in targets:
        results.extend(offloader.verify(name, ledger_id=ledger_id, checksums=checksums))
        progress.advance(size)
    return results


def check_ledger(offloader: Offloader, topic: str | None, ledger_id: int) -> None:
    """``--ledger``: refuse a ledger that is not in TOPIC (or any topic) or is not offloaded."""
    names = [topic] if topic is not None else offloader.list_topics()
    for name in names:
        info = offloader.topic_info(name)
        for ledger in info.ledgers:
            if ledger.ledger_id != ledger_id:
                continue
            if not ledger.offload_complete:
                raise InvalidLedgerState(
                    f"ledger {ledger_id} of {info.topic} is not offloaded "
                    f"(state {ledger.state}): nothing to verify"
                )
            return
    where = "any topic" if topic is None else offloader.topic_info(topic).topic
    raise NotFound(f"ledger {ledger_id} not found in {where}")


@click.command()
@click.argument("topic", required=False)
@click.option(
    "--ledger",
    "ledger_id",
    type=click.IntRange(min=0),
    help="Only this ledger; it must exist and be offloaded.",
)
@click.option(
    "--verify-checksums",
    is_flag=True,
    help="Read every block back and check its CRC32C (slower; reads all the data).",
)
@read_options
@pass_cli
def verify(
    cli: CliContext, topic: str | None, ledger_id: int | None, verify_checksums: bool
) -> None:
    """Check offloaded ledgers' objects against the metadata (all topics, or TOPIC).

    Exits 1 when any ledger fails, naming the first problem, and when --ledger names a
    ledger that does not exist or is not offloaded.

    \b
    Examples:
      offloader objects verify
      offloader objects verify persistent://public/default/t1 --ledger 12 --verify-checksums
    """
    enabled = progress_enabled(cli)
    with (
        open_offloader(cli, read_only=True) as offloader,
        Progress("verify", enabled=enabled) as progress,
    ):
        if ledger_id is not None:
            check_ledger(offloader, topic, ledger_id)
        if enabled and ledger_id is None:
            results = _verify_with_progress(offloader, topic, verify_checksums, progress)
        else:
            results = offloader.verify(topic, ledger_id=ledger_id, checksums=verify_checksums)
    if cli.json:
        for result in results:
            echo_json(dataclasses.asdict(result))
    else:
        echo_table(
            ("TOPIC", "LEDGER", "UUID", "DATA", "INDEX", "CHECKSUMS", "RESULT"),
            [
                (
                    r.topic,
                    r.ledger_id,
                    r.uuid,
                    r.data_size,
                    r.index_size,
                    r.checked_checksums,
                    "ok" if r.ok else r.problem or "failed",
                )
                for r in results
            ],
        )
    failed = [r for r in results if not r.ok]
    if failed:
        first = failed[0]
        raise VerificationError(
            f"{len(failed)} of {len(results)} offloaded ledgers failed verification; "
            f"ledger {first.ledger_id} of {first.topic}: {first.problem}"
        )
    if not cli.json:
        click.echo(f"{len(results)} offloaded ledger(s) verified, all ok")


def report_record(report: OrphanReport, *, dry_run: bool = False) -> dict[str, Any]:
    return {
        "clean": report.clean,
        "removed": report.removed,
        "dry_run": dry_run,
        "objects": [dataclasses.asdict(o) for o in report.objects],
        "uploads": [dataclasses.asdict(u) for u in report.uploads],
        "missing": [dataclasses.asdict(m) for m in report.missing],
    }


def raise_if_missing(report: OrphanReport) -> None:
    """Exit 1 (VerificationError) when claimed objects are missing: offloaded data is lost."""
    if report.missing:
        first = report.missing[0]
        raise VerificationError(
            f"{plural(len(report.missing), 'claimed object')} missing from the store "
            f"(first: {first.key} of ledger {first.ledger_id} of {first.topic}): offloaded "
            "data is lost; gc does not repair this"
        )


def _gc_action(deletable: bool) -> str:
    return "remove" if deletable else "keep"


def _echo_report(report: OrphanReport) -> None:
    """One table per kind of finding, each followed by a blank line."""
    if report.objects:
        echo_table(
            ("ORPHANED OBJECT", "SIZE", "REASON", "GC", "LAST_MODIFIED"),
            [
                (o.key, o.size, o.reason, _gc_action(o.deletable), time_text(o.last_modified_ms))
                for o in report.objects
            ],
        )
        click.echo("")
    if report.uploads:
        echo_table(
            ("UNFINISHED UPLOAD", "UPLOAD_ID", "REASON", "GC", "INITIATED"),
            [
                (u.key, u.upload_id, u.reason, _gc_action(u.deletable), time_text(u.initiated_ms))
                for u in report.uploads
            ],
        )
        click.echo("")
    if report.missing:
        echo_table(
            ("MISSING OBJECT", "TOPIC", "LEDGER", "UUID"),
            [(m.key, m.topic, m.ledger_id, m.uuid) for m in report.missing],
        )
        click.echo("")


_MIN_AGE_HELP = (
    "Only objects older than this (e.g. 1h; default: the broker's orphan_min_age, 1h): "
    "younger ones may belong to a running offload."
)


_PRICE_HELP = (
    "With --pulsar-metadata: the storage price, USD per GB-month (GB = 2^30 bytes), the "
    f"orphans' monthly cost is computed at (default: S3 Standard's published {S3_STANDARD_PRICE})."
)


@click.command()
@click.option("--min-age", type=DURATION, help=_MIN_AGE_HELP)
@click.option(
    "--price-per-gb-month",
    type=click.FloatRange(min=0),
    default=S3_STANDARD_PRICE,
    show_default=True,
    help=_PRICE_HELP,
)
@pass_cli
def orphans(cli: CliContext, min_age: int | None, price_per_gb_month: float) -> None:
    """List stored objects no ledger claims, unfinished uploads and missing objects.

    Exits 1 when objects that offloaded ledgers claim are missing (data loss); orphans and
    unfinished uploads alone exit 0.

    With --pulsar-metadata: the bucket the cluster offloads to (--store, or the one its
    offload contexts name) against every ManagedLedgerInfo of the cluster: objects of ledgers
    no managed ledger lists (a trimmed ledger, a deleted topic), superseded attempts (a UUID
    other than the one the ledger's offload context holds), objects of managed ledgers this
    cluster does not have, unfinished uploads; with size, age and monthly cost.

    \b
    Examples:
      offloader objects orphans
      offloader --json objects orphans --min-age 0
      offloader --pulsar-metadata zk:zk1:2181 objects orphans --min-age 1d
    """
    if cluster_url(cli) is not None:
        with open_cluster(cli) as cluster:
            if min_age is None:  # the broker's orphan_min_age ([broker] in offloader.toml)
                min_age = resolve_settings(cli, {}).broker.orphan_min_age_seconds
            audit = cluster.orphans(min_age_seconds=min_age)
        echo_cluster_audit(cli, audit, price_per_gb_month)
        return
    with open_offloader(cli, read_only=True) as offloader:
        report = offloader.orphans(min_age_seconds=min_age)
    if cli.json:
        echo_json(report_record(report))
    elif report.clean:
        click.echo("No orphaned objects, unfinished uploads or missing objects")
    else:
        _echo_report(report)
        orphan_bytes = sum(o.size for o in report.objects)
        click.echo(
            f"{len(report.objects)} orphaned object(s) ({format_size(orphan_bytes)}), "
            f"{len(report.uploads)} unfinished upload(s), {len(report.missing)} missing object(s)"
        )
    raise_if_missing(report)


@click.command()
@click.option("--dry-run", is_flag=True, help="Only show what would be removed.")
@click.option("--min-age", type=DURATION, help=_MIN_AGE_HELP)
@click.option(
    "--include-unknown",
    is_flag=True,
    help="With --pulsar-metadata: also delete objects of managed ledgers the cluster does not "
    "have (or that name none); by default they are reported and kept.",
)
@click.option(
    "--price-per-gb-month",
    type=click.FloatRange(min=0),
    default=S3_STANDARD_PRICE,
    show_default=True,
    help=_PRICE_HELP,
)
@pass_cli
def gc(
    cli: CliContext,
    dry_run: bool,
    min_age: int | None,
    include_unknown: bool,
    price_per_gb_month: float,
) -> None:
    """Delete orphaned objects and abort unfinished uploads (missing objects are reported).

    Exits 1 when objects that offloaded ledgers claim are missing (data loss, which gc does
    not repair), after removing the orphans.

    Kafka copies no record claims whose offsets this home's finished copies hold
    (kafka-superseded-copy: a second copy, an upload killed midway) are deleted only when
    --min-age is given, marker first; other unknown Kafka copies are never deleted.

    With --pulsar-metadata (--min-age required): deletes only what `objects orphans` reports
    as no ManagedLedgerInfo's (read again just before deleting), never an object any ledger
    references, never objects of a managed ledger the cluster does not have unless
    --include-unknown. A metadata store that cannot be read stops it: nothing is deleted.

    \b
    Examples:
      offloader objects gc --dry-run
      offloader objects gc --min-age 2h
      offloader --pulsar-metadata zk:zk1:2181 objects gc --dry-run --min-age 7d
    """
    if include_unknown and cluster_url(cli) is None:
        raise click.UsageError("--include-unknown applies with --pulsar-metadata only")
    if cluster_url(cli) is not None:
        if min_age is None:
            raise click.UsageError("objects gc with --pulsar-metadata needs --min-age DURATION")
        with open_cluster(cli) as cluster:
            done = cluster.gc(
                min_age_seconds=min_age, dry_run=dry_run, include_unknown=include_unknown
            )
        echo_cluster_audit(
            cli, done.audit, price_per_gb_month, include_unknown=include_unknown, gc=done
        )
        return
    with open_offloader(cli, read_only=True) as offloader:
        report = offloader.gc(dry_run=dry_run, min_age_seconds=min_age)
    if cli.json:
        echo_json(report_record(report, dry_run=dry_run))
    else:
        _echo_report(report)
        verb = "Would remove" if dry_run else "Removed"
        gone = [o for o in report.objects if o.deletable]
        aborted = [u for u in report.uploads if u.deletable]
        kept = len(report.objects) - len(gone) + len(report.uploads) - len(aborted)
        click.echo(
            f"{verb} {len(gone)} object(s) ({format_size(sum(o.size for o in gone))}) and "
            f"{'abort' if dry_run else 'aborted'} {len(aborted)} upload(s)"
            + (f"; left {kept} not written by this installation alone" if kept else "")
        )
        if report.missing:
            click.echo(f"{len(report.missing)} claimed object(s) are missing: not repaired by gc")
    raise_if_missing(report)
