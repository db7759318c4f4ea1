"""``offloader kafka``: Kafka log segments to the object store, read back by offset or time.

* ``upload --log-dir DIR [--topics TOPICS] [--once]``: copy closed segments (one pass with
  ``--once``, else every ``--interval`` until SIGINT/SIGTERM). JSON: one object per segment
  ``{topic, partition, base_offset, end_offset, outcome, segment_id, size_bytes, from_deleted,
  detail}`` then ``{partitions, uploaded, gaps, corrupt, failed, cleaned, busy}``. A corrupt or
  failed segment makes the exit code 1 (after everything is printed); a ``busy`` partition
  (another uploader holds it) does not. ``--prefix``, ``--hash-prefix``, ``--cluster`` and
  ``--entropy-bits`` choose the tier's key scheme on its first upload only (persisted; a value
  that differs later is an error).
* ``status [TOPIC] [--log-dir DIR]``: per partition ``{topic, partition, topic_id, local_start,
  local_end, remote_start, remote_end, watermark, upload_lag, remote_segments, remote_bytes,
  remote_original_bytes, remote_stored_bytes, in_progress, gaps: [{start, end, reason}],
  last_error}``. ``remote_bytes`` keeps its old meaning, the original size of the finished
  segments' ``.log`` files (= ``remote_original_bytes``); ``remote_stored_bytes`` is what they
  take in the store (smaller or larger for transformed segments; null if one is missing).
* ``read TOPIC PARTITION (--from-offset N | --from-timestamp MS) [--count M] [--payload]
  [--log-dir DIR --mode kafka-only|kafka-preferred|remote-preferred|remote-only]``: JSON rows
  ``{topic, partition, offset, timestamp, timestamp_type, key, value, headers, tier}``; key,
  value and header values as UTF-8 text when they are, base64 with ``--payload``.
* ``set-retention TOPIC --time T --size S``, ``get-retention TOPIC``, ``apply-retention [TOPIC]``.

A TOPIC must be a legal Kafka topic name (1 to 249 of ``a-z A-Z 0-9 . _ -``, not ``.`` or
``..``) and a PARTITION 0..2147483647: anything else is one ``error:`` line, checked before any
lookup (names given as bytes that are not UTF-8 included).
* ``set-offload-transform|get-offload-transform|remove-offload-transform TOPIC``: in
  :mod:`cli.kafka.transforms`.
"""

from __future__ import annotations

import base64
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.params import (
    DURATION,
    DURATION_OR_MINUS_ONE,
    KAFKA_METADATA,
    SIZE,
    SIZE_OR_MINUS_ONE,
    topics_option,
)
from cli.render import echo_table, plural, safe_bytes, safe_text, time_text
from cli.service import StopFlag, stop_on_signals
from cli.settings import open_offloader
from offloader.api import KafkaRecordRow, KafkaSettings, PartitionStatus, UploadReport
from offloader.errors import OffloadError
from offloader.units import format_size

LOG_DIR = click.option(
    "--log-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The broker's log directory (read-only: never modified).",
)


def _settings(
    prefix: str | None,
    hash_prefix: int | None,
    cluster: str | None,
    entropy_bits: int | None,
    part_size: int,
    concurrency: int,
) -> KafkaSettings:
    return KafkaSettings(
        prefix=prefix,
        hash_prefix_len=hash_prefix,
        cluster=cluster,
        entropy_bits=entropy_bits,
        part_size=part_size,
        concurrency=concurrency,
    )


def _print_report(cli: CliContext, report: UploadReport) -> None:
    for s in report.segments:
        record = {
            "topic": s.topic,
            "partition": s.partition,
            "base_offset": s.base_offset,
            "end_offset": s.end_offset,
            "outcome": s.kind,
            "segment_id": s.segment_id,
            "size_bytes": s.size_bytes,
            "from_deleted": s.from_deleted,
            "detail": s.detail,
        }
        text = f"{s.kind:8} {s.topic}-{s.partition} {s.base_offset}..{s.end_offset}"
        if s.detail:
            text += f": {s.detail}"
        cli.emit(record, text)
    summary = {
        "partitions": report.partitions,
        "uploaded": len(report.of("uploaded")),
        "gaps": len(report.of("gap")),
        "corrupt": len(report.of("corrupt")),
        "failed": len(report.of("failed")),
        "cleaned": len(report.cleaned),
        "busy": len(report.of("busy")),
        "skipped": len(report.of("skipped")),
    }
    cli.emit(
        summary,
        f"{plural(summary['uploaded'], 'segment')} uploaded from "
        f"{plural(report.partitions, 'partition')}; {summary['gaps']} gaps, "
        f"{summary['corrupt']} corrupt, {summary['failed']} failed"
        + (f", {summary['busy']} busy (another uploader)" if summary["busy"] else "")
        + (f", {summary['skipped']} skipped (cluster metadata)" if summary["skipped"] else ""),
    )


@click.command()
@click.option(
    "--log-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The broker's log directory (read-only: never modified).",
)
@topics_option()
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option(
    "--interval",
    type=DURATION,
    default="30s",
    show_default=True,
    help="Time between passes without --once.",
)
@click.option(
    "--prefix",
    help="Key prefix in the store (default kafka). Like the three options below, it is part of "
    "the tier's key scheme, which the first upload persists and every uploader (service run "
    "too) then uses: leave them out, or repeat the persisted values.",
)
@click.option(
    "--hash-prefix",
    type=click.IntRange(0, 32),
    help="Hex digits of a hash in front of every key (S3 key-space spreading; default 0).",
)
@click.option(
    "--cluster",
    metavar="NAME",
    help="Pinterest's key form: PREFIX/[ENTROPY/]NAME/<topic>-<id>/... (no --hash-prefix).",
)
@click.option(
    "--entropy-bits",
    type=click.IntRange(0, 32),
    help="Pinterest's key form: N bits of MD5(cluster/topic-partition) after the prefix, as "
    "0/1 digits (needs --cluster; default 0).",
)
@click.option(
    "--part-size",
    type=SIZE,
    default="64M",
    show_default=True,
    help="Multipart part size of .log uploads (at least 5M).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Parts uploaded at once.",
)
@KAFKA_METADATA
@pass_cli
def upload(
    cli: CliContext,
    log_dir: Path,
    topics: str | None,
    once: bool,
    interval: int,
    prefix: str | None,
    hash_prefix: int | None,
    cluster: str | None,
    entropy_bits: int | None,
    part_size: int,
    concurrency: int,
    kafka_metadata: str | None,
) -> None:
    """Copy the closed segments of a broker's log directory to the object store.

    Two uploaders never copy one partition at once: the one that finds the partition's lock
    taken reports it busy and leaves it alone. With --kafka-metadata a partition is uploaded
    only while this broker leads it; the others are reported skipped, with the reason."""
    settings = _settings(prefix, hash_prefix, cluster, entropy_bits, part_size, concurrency)
    if kafka_metadata is not None:
        settings = replace(settings, cluster_metadata=kafka_metadata)
    failures = 0
    with open_offloader(cli) as off, stop_on_signals(StopFlag()) as stop:
        tier = off.kafka(settings)
        while True:
            report = tier.upload(log_dir, topics)
            _print_report(cli, report)
            failures += len(report.of("corrupt")) + len(report.of("failed"))
            if once or stop():
                break
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and not stop():
                time.sleep(0.2)
            if stop():
                break
    if failures:
        raise OffloadError(
            f"{plural(failures, 'segment')} could not be uploaded (corrupt or failed); see above"
        )


def _status_record(s: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": s.topic,
        "partition": s.partition,
        "topic_id": s.topic_id,
        "local_start": s.local_start,
        "local_end": s.local_end,
        "remote_start": s.remote_start,
        "remote_end": s.remote_end,
        "watermark": s.watermark,
        "upload_lag": s.upload_lag,
        "remote_segments": s.remote_segments,
        "remote_bytes": s.remote_bytes,
        "remote_original_bytes": s.remote_bytes,
        "remote_stored_bytes": s.remote_stored_bytes,
        "in_progress": s.in_progress,
        "gaps": [{"start": a, "end": b, "reason": r} for a, b, r in s.gaps],
        "last_error": s.last_error,
        "role": s.role,
        "leader": s.leader,
        "leader_epoch": s.leader_epoch,
        "not_uploading": s.not_uploading,
    }


@click.command()
@click.argument("topic", required=False)
@LOG_DIR
@KAFKA_METADATA
@pass_cli
def status(
    cli: CliContext, topic: str | None, log_dir: Path | None, kafka_metadata: str | None
) -> None:
    """Per partition: local and remote offset ranges, watermark, upload lag, gaps, errors.

    BYTES is the original size of the remote segments' .log files, followed by what they take
    in the store when that differs (segments stored compressed and/or encrypted). With the
    cluster's metadata (--kafka-metadata, or kafka_metadata in offloader.toml), each partition's
    ROLE for this broker (leader, follower, offline, no metadata; needs --log-dir for its
    meta.properties), its leader EPOCH, and a line saying why it is not uploading.
    """
    with open_offloader(cli, read_only=True, kafka_metadata=kafka_metadata) as off:
        rows = off.kafka().status(topic, log_dir)
    if cli.json:
        for s in rows:
            cli.emit(_status_record(s), "")
        return
    if any(s.leader_epoch is not None or s.not_uploading for s in rows):
        _cluster_table(rows)
        return
    echo_table(
        ["PARTITION", "LOCAL", "REMOTE", "WATERMARK", "LAG", "SEGMENTS", "BYTES", "GAPS", "ERROR"],
        [
            (
                f"{s.topic}-{s.partition}",
                *_offset_cells(s),
                ", ".join(f"{a}..{b}" for a, b, _ in s.gaps) or None,
                s.last_error,
            )
            for s in rows
        ],
    )


def _offset_cells(s: PartitionStatus) -> tuple[object, ...]:
    """The LOCAL, REMOTE, WATERMARK, LAG, SEGMENTS and BYTES cells of a partition's row."""
    local = None
    if s.local_start is not None:
        local = f"{s.local_start}..{'' if s.local_end is None else s.local_end}"
    remote = None if s.remote_start is None else f"{s.remote_start}..{s.remote_end}"
    return (local, remote, s.watermark, s.upload_lag, s.remote_segments, _bytes_text(s))


def _cluster_table(rows: list[PartitionStatus]) -> None:
    """The status with the cluster's view: role and epoch columns, then a line per partition
    that is not uploading."""
    echo_table(
        ["PARTITION", "ROLE", "EPOCH", "LOCAL", "REMOTE", "WATERMARK", "LAG", "SEGMENTS", "BYTES"],
        [
            (
                f"{s.topic}-{s.partition}",
                s.role or (None if s.leader is None else f"broker {s.leader} leads"),
                s.leader_epoch,
                *_offset_cells(s),
            )
            for s in rows
        ],
    )
    for s in rows:
        if s.not_uploading:
            click.echo(f"{s.topic}-{s.partition}: not uploading: {s.not_uploading}")
        elif s.last_error:
            click.echo(f"{s.topic}-{s.partition}: error: {s.last_error}")


def _bytes_text(s: PartitionStatus) -> str | None:
    """The remote ``.log`` bytes: original, and stored when that differs (transformed)."""
    if not s.remote_segments:
        return None
    original = format_size(s.remote_bytes)
    if s.remote_stored_bytes == s.remote_bytes:
        return original
    stored = "?" if s.remote_stored_bytes is None else format_size(s.remote_stored_bytes)
    return f"{original} ({stored} stored)"


def _text(data: bytes | None, payload: bool) -> str | None:
    if data is None:
        return None
    if payload:
        return base64.b64encode(data).decode()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return safe_bytes(data)


def _row_record(row: KafkaRecordRow, payload: bool) -> dict[str, Any]:
    return {
        "topic": row.topic,
        "partition": row.partition,
        "offset": row.offset,
        "timestamp": row.timestamp,
        "timestamp_type": row.timestamp_type,
        "key": _text(row.key, payload),
        "value": _text(row.value, payload),
        "headers": [{"key": k, "value": _text(v, payload)} for k, v in row.headers],
        "tier": row.tier,
    }


@click.command()
@click.argument("topic")
@click.argument("partition", type=click.IntRange(0))
@click.option("--from-offset", type=click.IntRange(0), help="First offset to return.")
@click.option(
    "--from-timestamp",
    type=int,
    metavar="MS",
    help="Start at the first record with a timestamp at or after MS (epoch ms).",
)
@click.option("--count", type=click.IntRange(0), help="At most this many records.")
@click.option("--payload", is_flag=True, help="Keys, values and header values as base64.")
@click.option("--json", "json_output", is_flag=True, help="JSON lines (as the global --json).")
@LOG_DIR
@click.option(
    "--mode",
    type=click.Choice(["kafka-only", "kafka-preferred", "remote-preferred", "remote-only"]),
    default=None,
    help="Tiers to read: default remote-only, kafka-preferred with --log-dir.",
)
@pass_cli
def read(
    cli: CliContext,
    topic: str,
    partition: int,
    from_offset: int | None,
    from_timestamp: int | None,
    count: int | None,
    payload: bool,
    json_output: bool,
    log_dir: Path | None,
    mode: str | None,
) -> None:
    """Records of one partition from an offset or a time, across the tiers.

    Text: a header, then offset, timestamp (UTC), tier (local or remote), key and value per
    record (non-printable characters escaped). --json: one object per record with topic,
    partition, offset, timestamp, timestamp_type, key, value, headers and tier.
    """
    if (from_offset is None) == (from_timestamp is None):
        raise click.UsageError("give exactly one of --from-offset or --from-timestamp")
    chosen = mode or ("kafka-preferred" if log_dir is not None else "remote-only")
    with open_offloader(cli, read_only=True) as off:
        rows = off.kafka().read(
            topic,
            partition,
            from_offset=from_offset,
            from_timestamp=from_timestamp,
            count=count,
            log_dir=log_dir,
            mode=chosen,
        )
        as_json = cli.json or json_output
        for n, row in enumerate(rows):
            record = _row_record(row, payload)
            if not as_json and n == 0:
                click.echo(_READ_HEADER)
            cli.emit(record, _row_text(row, record), json_output=json_output)


#: ``kafka read``'s text columns, like ``topics read``'s (key and value last: they vary most)
_READ_HEADER = f"{'OFFSET':>12}  {'TIMESTAMP':<24}  {'TIER':<6}  KEY  VALUE"


def _row_text(row: KafkaRecordRow, record: dict[str, Any]) -> str:
    key = "-" if record["key"] is None else safe_text(record["key"])
    value = "-" if record["value"] is None else safe_text(record["value"])
    return f"{row.offset:>12}  {time_text(row.timestamp):<24}  {row.tier:<6}  {key}  {value}"


@click.command("set-retention")
@click.argument("topic")
@click.option(
    "--time",
    "retention_time",
    type=DURATION_OR_MINUS_ONE,
    required=True,
    help="retention.ms of the remote tier, as a time (7d) or -1 (forever).",
)
@click.option(
    "--size",
    "retention_size",
    type=SIZE_OR_MINUS_ONE,
    required=True,
    help="retention.bytes per partition of the remote tier (10G) or -1 (no limit).",
)
@pass_cli
def set_retention(cli: CliContext, topic: str, retention_time: int, retention_size: int) -> None:
    """Set a topic's remote retention (applied by apply-retention and service run)."""
    ms = retention_time * 1000 if retention_time >= 0 else -1
    with open_offloader(cli) as off:
        r = off.kafka().set_retention(topic, ms, retention_size)
    cli.emit(
        {"topic": r.topic, "retention_ms": r.retention_ms, "retention_bytes": r.retention_bytes},
        f"{r.topic}: retention.ms={r.retention_ms} retention.bytes={r.retention_bytes}",
    )


@click.command("get-retention")
@click.argument("topic")
@pass_cli
def get_retention(cli: CliContext, topic: str) -> None:
    """Show a topic's remote retention."""
    with open_offloader(cli, read_only=True) as off:
        r = off.kafka().get_retention(topic)
    cli.emit(
        {"topic": r.topic, "retention_ms": r.retention_ms, "retention_bytes": r.retention_bytes},
        f"{r.topic}: retention.ms={r.retention_ms} retention.bytes={r.retention_bytes}",
    )


@click.command("apply-retention")
@click.argument("topic", required=False)
@pass_cli
def apply_retention(cli: CliContext, topic: str | None) -> None:
    """Delete remote segments past their topic's retention now."""
    with open_offloader(cli) as off:
        deleted = off.kafka().apply_retention(topic)
    cli.emit({"deleted": deleted}, f"{plural(len(deleted), 'remote segment')} deleted")
