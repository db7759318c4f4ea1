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
from offloader.api import ClusterTopic, PulsarCluster
from offloader.units import format_size

__all__ = ["cluster_url", "echo_cluster_info", "open_cluster"]


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
