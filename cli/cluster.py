"""``--pulsar-metadata``: the commands' cluster mode, on a real Pulsar cluster's topics.

:func:`cluster_url` says whether the invocation names a cluster (the option, then
``$OFFLOADER_PULSAR_METADATA``, then ``pulsar_metadata`` in ``offloader.toml``);
:func:`open_cluster` opens it as a :class:`~offloader.api.PulsarCluster` (the object store:
``--store`` when given, else the bucket each ledger's offload context names). The renderers of
``topics info`` for a cluster topic live here too.

JSON of ``topics info`` (one object per managed ledger; a partitioned topic gives one per
partition): ``{topic, cluster, path, terminated_position, entries, size_bytes,
offloaded_size_bytes, ledgers: [{ledger_id, entries, size_bytes, created_ms, offloaded,
offload_started, bookkeeper_deleted, uuid, offloaded_ms, driver, bucket, region, endpoint}],
properties}``.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext
from cli.render import echo_json, echo_table, plural
from cli.settings import file_config_of, resolve_settings
from offloader.api import (
    ClusterAudit,
    ClusterGcReport,
    ClusterTopic,
    PulsarCluster,
    is_deletable,
    monthly_cost,
)
from offloader.units import format_size

__all__ = [
    "cluster_audit_record",
    "cluster_url",
    "echo_cluster_audit",
    "echo_cluster_info",
    "open_cluster",
]


def cluster_url(cli: CliContext) -> str | None:
    """The Pulsar metadata URL this invocation names, or None (the project's own topics)."""
    return cli.pulsar_metadata or file_config_of(cli).pulsar_metadata


def open_cluster(cli: CliContext) -> PulsarCluster:
    url = cluster_url(cli)
    if url is None:
        raise click.UsageError("this command needs --pulsar-metadata URL (zk:host:port/chroot)")
    file_config = file_config_of(cli)
    settings = resolve_settings(cli, {})
    return PulsarCluster(
        url,
        store_url=cli.store_url or file_config.store,
        endpoint_url=cli.endpoint_url or file_config.endpoint_url,
        region=file_config.region,
        settings=settings.broker.offload,
    )


def cluster_info_record(ct: ClusterTopic, cluster: str) -> dict[str, Any]:
    ledgers = []
    for li in ct.info.ledgers:
        context = li.offload_context
        driver = context.driver_metadata if context is not None else None
        ledgers.append(
            {
                "ledger_id": li.ledger_id,
                "entries": li.entries,
                "size_bytes": li.size,
                "created_ms": li.timestamp,
                "offloaded": li.offloaded,
                "offload_started": context is not None,
                "bookkeeper_deleted": li.bookkeeper_deleted,
                "uuid": li.uuid,
                "offloaded_ms": context.timestamp if context is not None else None,
                "driver": driver.name if driver is not None else None,
                "bucket": driver.bucket if driver is not None else None,
                "region": driver.region if driver is not None else None,
                "endpoint": driver.endpoint if driver is not None else None,
            }
        )
    terminated = ct.info.terminated_position
    return {
        "topic": ct.topic,
        "cluster": cluster,
        "path": ct.path,
        "terminated_position": None if terminated is None else f"{terminated[0]}:{terminated[1]}",
        "entries": sum(li.entries or 0 for li in ct.info.ledgers),
        "size_bytes": sum(li.size or 0 for li in ct.info.ledgers),
        "offloaded_size_bytes": sum(li.size or 0 for li in ct.offloaded),
        "ledgers": ledgers,
        "properties": dict(ct.info.properties),
    }


def echo_cluster_info(cli: CliContext, topics: list[ClusterTopic], cluster: str) -> None:
    """``topics info`` of cluster topics: Pulsar's ``stats-internal`` for offload."""
    for n, ct in enumerate(topics):
        record = cluster_info_record(ct, cluster)
        if cli.json:
            echo_json(record)
            continue
        if n:
            click.echo("")
        offloaded = ct.offloaded
        click.echo(f"topic:          {ct.topic}")
        click.echo(f"cluster:        {cluster}")
        click.echo(f"path:           {ct.path}")
        click.echo(
            f"entries:        {record['entries']}, {format_size(record['size_bytes'])} "
            f"(offloaded: {plural(len(offloaded), 'ledger')}, "
            f"{format_size(record['offloaded_size_bytes'])})"
        )
        if record["terminated_position"] is not None:
            click.echo(f"terminated at:  {record['terminated_position']}")
        click.echo("")
        echo_table(
            ("LEDGER", "ENTRIES", "SIZE", "OFFLOADED", "BK_DELETED", "UUID", "BUCKET"),
            [
                (
                    row["ledger_id"],
                    row["entries"],
                    row["size_bytes"],
                    "yes" if row["offloaded"] else ("started" if row["offload_started"] else "no"),
                    row["bookkeeper_deleted"],
                    row["uuid"],
                    row["bucket"],
                )
                for row in record["ledgers"]
            ],
        )


# --- objects orphans | gc against the cluster --------------------------------------------------
def _age_text(seconds: int) -> str:
    """``40s``, ``12m``, ``5h``, ``3d``: the largest whole unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _age_seconds(now_ms: int, when_ms: int | None) -> int | None:
    return None if when_ms is None else max(0, (now_ms - when_ms) // 1000)


def cluster_audit_record(
    audit: ClusterAudit, price: float, include_unknown: bool = False
) -> dict[str, Any]:
    objects = [
        {
            "key": o.key,
            "size": o.size,
            "reason": o.reason,
            "age_seconds": _age_seconds(audit.now_ms, o.modified_ms),
            "last_modified_ms": o.modified_ms,
            "uuid": o.uuid,
            "ledger_id": o.ledger_id,
            "managed_ledger": o.managed_ledger,
            "monthly_cost": round(monthly_cost(o.size, price), 6),
            "deletable": is_deletable(o.reason, include_unknown),
        }
        for o in audit.objects
    ]
    uploads = [
        {
            "key": u.key,
            "upload_id": u.upload_id,
            "reason": u.reason,
            "age_seconds": _age_seconds(audit.now_ms, u.initiated_ms),
            "initiated_ms": u.initiated_ms,
            "uuid": u.uuid,
            "ledger_id": u.ledger_id,
            "deletable": is_deletable(u.reason),
        }
        for u in audit.uploads
    ]
    return {
        "cluster": audit.cluster,
        "store": audit.store,
        "topics": audit.topics,
        "listed_objects": audit.listed_objects,
        "listed_bytes": audit.listed_bytes,
        "orphan_bytes": audit.orphan_bytes,
        "price_per_gb_month": price,
        "monthly_cost": round(monthly_cost(audit.orphan_bytes, price), 6),
        "clean": not (audit.objects or audit.uploads),
        "objects": objects,
        "uploads": uploads,
    }


def echo_cluster_audit(
    cli: CliContext,
    audit: ClusterAudit,
    price: float,
    *,
    include_unknown: bool = False,
    gc: ClusterGcReport | None = None,
) -> None:
    record = cluster_audit_record(audit, price, include_unknown)
    if gc is not None:
        record["dry_run"] = gc.dry_run
        record["deleted"] = list(gc.deleted)
        record["aborted"] = list(gc.aborted)
    if cli.json:
        echo_json(record)
        return
    if record["objects"]:
        echo_table(
            ("ORPHANED OBJECT", "SIZE", "REASON", "AGE", "$/MONTH", "GC", "MANAGED LEDGER"),
            [
                (
                    o["key"],
                    o["size"],
                    o["reason"],
                    "-" if o["age_seconds"] is None else _age_text(o["age_seconds"]),
                    f"{o['monthly_cost']:.6f}",
                    "remove" if o["deletable"] else "keep",
                    o["managed_ledger"] or "-",
                )
                for o in record["objects"]
            ],
        )
        click.echo("")
    if record["uploads"]:
        echo_table(
            ("UNFINISHED UPLOAD", "UPLOAD_ID", "REASON", "AGE", "GC"),
            [
                (
                    u["key"],
                    u["upload_id"],
                    u["reason"],
                    "-" if u["age_seconds"] is None else _age_text(u["age_seconds"]),
                    "abort" if u["deletable"] else "keep",
                )
                for u in record["uploads"]
            ],
        )
        click.echo("")
    click.echo(
        f"{audit.cluster}: {plural(audit.topics, 'topic')}, {audit.store}: "
        f"{plural(audit.listed_objects, 'object')} ({format_size(audit.listed_bytes)}) listed; "
        f"{plural(len(audit.objects), 'orphaned object')} ({format_size(audit.orphan_bytes)}, "
        f"${record['monthly_cost']:.2f}/month at ${price}/GB-month), "
        f"{plural(len(audit.uploads), 'unfinished upload')}"
    )
    if gc is not None:
        verb = "Would remove" if gc.dry_run else "Removed"
        click.echo(
            f"{verb} {plural(len(gc.deleted), 'object')} and "
            f"{'abort' if gc.dry_run else 'aborted'} {plural(len(gc.aborted), 'upload')}"
        )
