"""``offloader export run|status|reset``: topics to Hive-partitioned Parquet, exactly once.

Thin: parses options into an :class:`~offloader.api.ExportSpec` and calls the facade
(:meth:`~offloader.api.Offloader.export_run`, ``export_status``, ``export_reset``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import click

from cli.cluster import cluster_url, open_cluster
from cli.context import CliContext, pass_cli
from cli.params import SIZE, iceberg_options
from cli.settings import open_offloader
from offloader.api import (
    TOPICS_HELP,
    TOPICS_METAVAR,
    ExportSpec,
    ExportStatus,
    ResetReport,
    TopicExportReport,
    parse_time_ms,
)
from offloader.errors import ExportError
from offloader.units import format_size

_TARGET = click.option(
    "--to",
    "target",
    required=True,
    metavar="URL",
    help="Where the files are: a local directory, s3://bucket/prefix, gs://bucket/prefix, "
    "az://container/prefix, or an Iceberg table iceberg://NAMESPACE.TABLE.",
)
_GENERATION = click.option(
    "--generation",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="File generation: a new one writes beside the old files, with its own watermark.",
)
_ENDPOINT = click.option(
    "--target-endpoint",
    metavar="URL",
    default=None,
    help="S3 endpoint of an s3:// target (default: --endpoint-url / $AWS_ENDPOINT_URL).",
)


def _time(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat()


@click.command(epilog=f"TOPICS (each argument): {TOPICS_HELP}")
@click.argument("topics", nargs=-1, required=True, metavar=f"{TOPICS_METAVAR}...")
@_TARGET
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--partition-by",
    type=click.Choice(["dt", "dt,hr"]),
    default=None,
    help="Time partitions: days, or days and hours (UTC). Default: dt,hr; for an "
    "iceberg:// table dt (day(time)), and dt,hr is hour(time).",
)
@click.option(
    "--time-field",
    default="publish_time",
    show_default=True,
    help="publish_time, event_time, or a field path of the decoded value (e.g. ts).",
)
@click.option(
    "--until",
    default=None,
    metavar="TIME",
    help="Export only up to the first message published at or after TIME.",
)
@click.option(
    "--max-file-size",
    type=SIZE,
    default="128M",
    show_default=True,
    help="Start a new file past this much data (cut between entries).",
)
@click.option(
    "--value-format",
    type=click.Choice(["binary", "string", "json", "avro"]),
    default="binary",
    show_default=True,
    help="How to decode message values.",
)
@click.option("--schema", default=None, help="DDL of JSON values (e.g. 'ts BIGINT, v STRING').")
@click.option("--avro-schema", default=None, help="The Avro writer schema (JSON).")
@click.option("--flatten", is_flag=True, help="Decoded fields as value_<field> columns.")
@click.option(
    "--engine",
    type=click.Choice(["spark", "local"]),
    default="spark",
    show_default=True,
    help="spark: a local[2] session's tasks; local: the same tasks in this process (no JVM).",
)
@click.option("--kafka", is_flag=True, help="TOPICS are Kafka topics (their remote segments).")
@_GENERATION
@_ENDPOINT
@iceberg_options
@pass_cli
def run(
    cli: CliContext,
    topics: tuple[str, ...],
    target: str,
    fmt: str,
    partition_by: str | None,
    time_field: str,
    until: str | None,
    max_file_size: int,
    value_format: str,
    schema: str | None,
    avro_schema: str | None,
    flatten: bool,
    engine: str,
    kafka: bool,
    generation: int,
    target_endpoint: str | None,
    catalog: str | None,
    warehouse: str | None,
) -> None:
    """Export TOPICS' messages after their watermark, up to the last closed ledger. Files
    gone from the target below the watermark are written again first (same names and bytes).

    With --to iceberg://NAMESPACE.TABLE the files of a run are committed to the Iceberg table
    in one transaction that also carries the watermark (the table is created on first use).

    With --pulsar-metadata: TOPICS are the real cluster's (a partitioned topic's name exports
    each partition), exported up to the last ledger whose offload is complete (a ledger still
    only in BookKeeper stops it), the watermark keyed by the cluster and the topic and kept in
    this home (or, for an iceberg:// table, in the table).

    \b
    Examples:
      offloader export run orders --to /data/lake
      offloader export run 'public/default/(orders|clicks)' --to /data/lake
      offloader export run orders --to s3://lake/pulsar --partition-by dt --until 2025-06-16
      offloader export run orders --to iceberg://pulsar.orders --warehouse s3://lake/iceberg
      offloader --pulsar-metadata zk:zk1:2181 export run public/default/orders --to /data/lake
    """
    iceberg = target.strip().lower().startswith("iceberg://")
    spec = ExportSpec(
        target,
        partition_by=partition_by or ("dt" if iceberg else "dt,hr"),
        time_field=time_field,
        generation=generation,
        until_ms=parse_time_ms(until) if until else None,
        max_file_size=max_file_size,
        flatten=flatten,
        value_format=value_format,
        schema=schema,
        avro_schema=avro_schema,
        endpoint_url=target_endpoint or cli.endpoint_url,
        catalog=catalog,
        warehouse=warehouse,
    )
    if cluster_url(cli) is not None:
        if kafka:
            raise click.UsageError("export run with --pulsar-metadata exports Pulsar topics")
        if spec.is_iceberg:
            from cli.export.iceberg import run_iceberg

            run_iceberg(cli, topics, spec, engine, cluster=True)
            return
        with open_offloader(cli) as offloader, open_cluster(cli) as cluster:
            for report in offloader.export_run(topics, spec, engine=engine, cluster=cluster):
                cli.emit(_report(report), _report_text(report))
        return
    if spec.is_iceberg:
        from cli.export.iceberg import run_iceberg

        run_iceberg(cli, topics, spec, engine, kafka)
        return
    with open_offloader(cli) as offloader:
        for report in offloader.export_run(topics, spec, engine=engine, kafka=kafka):
            cli.emit(_report(report), _report_text(report))


def _report(r: TopicExportReport) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "target": r.target,
        "generation": r.generation,
        "previous": list(r.previous),
        "watermark": list(r.watermark),
        "files": r.files,
        "rows": r.rows,
        "invalid_rows": r.invalid_rows,
        "bytes": r.bytes,
        "removed_leftovers": r.removed_leftovers,
        "markers_written": r.markers_written,
        "repaired_files": r.repaired,
        "missing_files": r.missing,
        "publish_time": _time(r.publish_time_ms),
    }


def _report_text(r: TopicExportReport) -> str:
    return (
        f"{r.topic}: {r.rows} messages in {r.files} files ({format_size(r.bytes)}), "
        f"watermark {r.previous[0]}:{r.previous[1]} -> {r.watermark[0]}:{r.watermark[1]}"
        + (f", {r.invalid_rows} in __invalid__" if r.invalid_rows else "")
        + (f"; {r.repaired} missing files written again" if r.repaired else "")
        + (
            f"; {r.missing} files below the watermark still missing (their source is gone)"
            if r.missing
            else ""
        )
    )


@click.command()
@click.argument("topic")
@_TARGET
@_GENERATION
@_ENDPOINT
@iceberg_options
@click.option("--json", "json_output", is_flag=True, help="One JSON object.")
@pass_cli
def status(
    cli: CliContext,
    topic: str,
    target: str,
    generation: int,
    target_endpoint: str | None,
    catalog: str | None,
    warehouse: str | None,
    json_output: bool,
) -> None:
    """Show TOPIC's export watermark, its files and the lag (entries and time). Files gone
    from the target below the watermark are reported (how many, and the ranges no file
    covers) and the command exits 1: `export run` writes them again. For an iceberg:// table:
    its current snapshot, its metadata_location (what other engines open) and the watermark
    the table carries. With --pulsar-metadata: TOPIC is the real cluster's (one managed
    ledger), its lag counted from its ManagedLedgerInfo up to the last offloaded ledger."""
    if target.strip().lower().startswith("iceberg://"):
        from cli.export.iceberg import status_iceberg

        status_iceberg(
            cli,
            topic,
            target,
            catalog,
            warehouse,
            json_output,
            cluster=cluster_url(cli) is not None,
        )
        return
    with contextlib.ExitStack() as stack:
        offloader = stack.enter_context(open_offloader(cli, read_only=True))
        cluster = stack.enter_context(open_cluster(cli)) if cluster_url(cli) is not None else None
        st = offloader.export_status(
            topic,
            target,
            generation=generation,
            endpoint_url=target_endpoint or cli.endpoint_url,
            cluster=cluster,
        )
    cli.emit(_status(st), _status_text(st), json_output=json_output)
    if st.missing_files:
        raise ExportError(
            f"{st.missing_files} files below the watermark of {st.topic} are missing from "
            f"{st.target} ({_ranges_text(st)}): `offloader export run` writes them again"
        )


def _ranges_text(s: ExportStatus, most: int = 5) -> str:
    shown = [f"{a[0]}:{a[1]}-{b[0]}:{b[1]}" for a, b in s.missing_ranges[:most]]
    if len(s.missing_ranges) > most:
        shown.append(f"{len(s.missing_ranges) - most} more ranges")
    return "no file covers " + ", ".join(shown) if shown else "their ranges are covered"


def _status(s: ExportStatus) -> dict[str, Any]:
    return {
        "topic": s.topic,
        "target": s.target,
        "generation": s.generation,
        "watermark": list(s.watermark),
        "publish_time": _time(s.publish_time_ms),
        "rows": s.rows,
        "invalid_rows": s.invalid_rows,
        "bytes": s.bytes,
        "files": [
            {
                "path": f.path,
                "size": f.size,
                "ledger_id": f.ledger_id,
                "first_entry": f.first_entry,
                "last_entry": f.last_entry,
            }
            for f in s.files
        ],
        "uncommitted_files": s.uncommitted_files,
        "missing_files": s.missing_files,
        "missing_ranges": [[list(a), list(b)] for a, b in s.missing_ranges],
        "success_markers": s.markers,
        "last_closed": list(s.last_closed),
        "lag_entries": s.lag_entries,
        "lag_ms": s.lag_ms,
        "updated_ms": s.updated_ms,
    }


def _status_text(s: ExportStatus) -> str:
    lines = [
        f"{s.topic} -> {s.target} (generation {s.generation})",
        f"  watermark     {s.watermark[0]}:{s.watermark[1]} (last closed "
        f"{s.last_closed[0]}:{s.last_closed[1]}), published up to {_time(s.publish_time_ms)}",
        f"  exported      {s.rows} messages in {len(s.files)} files ({format_size(s.bytes)}), "
        f"{s.invalid_rows} in __invalid__, {s.markers} partitions final",
        f"  lag           {s.lag_entries} entries"
        + (f", {s.lag_ms / 1000:.0f} s" if s.lag_ms is not None else ""),
    ]
    if s.uncommitted_files:
        lines.append(f"  uncommitted   {s.uncommitted_files} files (removed by the next run)")
    if s.missing_files:
        lines.append(
            f"  MISSING       {s.missing_files} files below the watermark ({_ranges_text(s)}); "
            "the next run writes them again"
        )
    return "\n".join(lines)


@click.command()
@click.argument("topic")
@click.option(
    "--target",
    "target",
    required=True,
    metavar="URL",
    help="Where the files are: a local directory, s3://bucket/prefix, gs://bucket/prefix or "
    "az://container/prefix.",
)
@click.option(
    "--to",
    "point",
    required=True,
    metavar="TIME|MESSAGE_ID",
    help="A time (ISO-8601 or epoch ms) or a message id ledger:entry[:batch] (a chunked "
    "message counts at its first chunk's entry: spec/export.md §5).",
)
@_GENERATION
@_ENDPOINT
@iceberg_options
@pass_cli
def reset(
    cli: CliContext,
    topic: str,
    target: str,
    point: str,
    generation: int,
    target_endpoint: str | None,
    catalog: str | None,
    warehouse: str | None,
) -> None:
    """Move TOPIC's export watermark back and remove the files after it (re-exported by the
    next run). Files before the point are not touched. For an iceberg:// table: one commit
    that deletes TOPIC's rows after the point (files holding rows on both sides rewritten)
    and moves the watermark the table carries; older snapshots keep the rows until expired.

    With --pulsar-metadata: TOPIC is the real cluster's (the watermark keyed by the cluster
    and the topic, as export run keeps it).

    \b
    Example:
      offloader export reset orders --target /data/lake --to 2025-06-15T10:00:00Z
    """
    if target.strip().lower().startswith("iceberg://"):
        from cli.export.iceberg import reset_iceberg

        reset_iceberg(cli, topic, target, point, catalog, warehouse)
        return
    with open_offloader(cli) as offloader:
        r = offloader.export_reset(
            topic,
            target,
            point,
            generation=generation,
            endpoint_url=target_endpoint or cli.endpoint_url,
            cluster=cluster_url(cli),
        )
    cli.emit(
        _reset(r),
        f"{r.topic}: watermark {r.previous[0]}:{r.previous[1]} -> "
        f"{r.watermark[0]}:{r.watermark[1]}, {len(r.removed)} files removed",
    )


def _reset(r: ResetReport) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "previous": list(r.previous),
        "watermark": list(r.watermark),
        "removed": list(r.removed),
    }
