"""``topics produce --format pulsar`` options and ``topics read --decode pulsar`` output.

JSON objects of ``read --decode pulsar`` (one per message): ``{topic, message_id, ledger_id,
entry_id, batch_index, key, ordering_key_b64, properties, publish_time, event_time,
producer_name, sequence_id, is_null, encrypted, value_b64}`` (times in ms since the epoch).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext
from cli.render import echo_json, safe_bytes, time_text
from cli.settings import open_offloader
from offloader.api import MessageOptions, MessageRecord, Position


def message_options(
    fmt: str,
    batch_size: int | None,
    compression: str | None,
    key: str | None,
    properties: tuple[str, ...],
) -> MessageOptions | None:
    if fmt != "pulsar":
        given = [
            name
            for name, value in (
                ("--batch-size", batch_size),
                ("--compression", compression),
                ("--key", key),
                ("--property", properties or None),
            )
            if value is not None
        ]
        if given:
            raise click.UsageError(f"{', '.join(given)}: only with --format pulsar")
        return None
    pairs = []
    for item in properties:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--property {item!r}: expected KEY=VALUE")
        pairs.append((name, value))
    return MessageOptions(
        batch_size=batch_size or 1,
        compression=compression or "none",
        key=key,
        properties=tuple(pairs),
    )


def message_record(record: MessageRecord) -> dict[str, Any]:
    m = record.message
    return {
        "topic": record.topic,
        "message_id": m.message_id,
        "ledger_id": m.ledger_id,
        "entry_id": m.entry_id,
        "batch_index": m.batch_index,
        "key": m.key,
        "ordering_key_b64": None
        if m.ordering_key is None
        else base64.b64encode(m.ordering_key).decode("ascii"),
        "properties": dict(m.properties),
        "publish_time": m.publish_time,
        "event_time": m.event_time,
        "producer_name": m.producer_name,
        "sequence_id": m.sequence_id,
        "is_null": m.is_null,
        "encrypted": m.encrypted,
        "value_b64": base64.b64encode(m.value).decode("ascii"),
    }


def message_text(record: MessageRecord) -> str:
    m = record.message
    props = ",".join(f"{k}={v}" for k, v in m.properties) or "-"
    if m.is_null:
        value = "<null>"
    elif m.encrypted:
        value = f"<encrypted, {len(m.value)} B>"
    else:
        value = safe_bytes(m.value)
    key = "-" if m.key is None else safe_bytes(m.key.encode())
    return (
        f"{m.message_id:<18}  {key:<12}  {time_text(m.publish_time):<24}  "
        f"{time_text(m.event_time):<24}  {safe_bytes(props.encode()):<16}  {value}"
    ).rstrip()


def read_cluster_messages(
    cli: CliContext,
    topic: str,
    start: Position | None,
    count: int | None,
    decrypt_key: Path | None,
) -> None:
    """``topics read --decode pulsar`` of a real cluster's topic (``--pulsar-metadata``)."""
    from cli.cluster import open_cluster

    pem = decrypt_key.read_bytes() if decrypt_key is not None else None
    at = None if start is None else (start.ledger_id, start.entry_id)
    with open_cluster(cli) as cluster:
        records = cluster.read_messages(topic, start=at, count=count, decrypt_key_pem=pem)
        _echo_messages(cli, records)


def read_messages(
    cli: CliContext,
    topic: str,
    start: Position | None,
    count: int | None,
    decrypt_key: Path | None,
) -> None:
    pem = decrypt_key.read_bytes() if decrypt_key is not None else None
    with open_offloader(cli, read_only=True) as offloader:
        records = offloader.read_messages(topic, start=start, count=count, decrypt_key_pem=pem)
        _echo_messages(cli, records)


def _echo_messages(cli: CliContext, records: Iterable[MessageRecord]) -> None:
    if not cli.json:
        click.echo(
            f"{'MESSAGE_ID':<18}  {'KEY':<12}  {'PUBLISH_TIME':<24}  {'EVENT_TIME':<24}  "
            f"{'PROPERTIES':<16}  VALUE"
        )
    for record in records:
        if cli.json:
            echo_json(message_record(record))
        else:
            click.echo(message_text(record))
