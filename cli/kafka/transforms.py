"""``offloader kafka set-offload-transform|get-offload-transform|remove-offload-transform``:
a Kafka topic's transform policy (spec/transforms.md §8), added to the ``kafka`` group.

JSON (``--json``): ``{topic, transform: {compression, level, encryption, key_id}, source}``
(``source``: ``metadata``, ``offloader.toml`` or ``default``); remove: ``{topic, removed}``.
"""

from __future__ import annotations

from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.params import transform_options, transform_record
from cli.settings import open_offloader
from offloader.api import TransformPolicy

__all__ = ["get_offload_transform", "remove_offload_transform", "set_offload_transform"]


def _record(topic: str, policy: TransformPolicy, source: str) -> dict[str, Any]:
    return {
        "topic": topic,
        "transform": transform_record(policy),
        "source": source,
    }


@click.command("set-offload-transform")
@click.argument("topic")
@transform_options("topic", "segment", "chunks mostly made of batches that carry a codec")
@pass_cli
def set_offload_transform(
    cli: CliContext,
    topic: str,
    compression: str,
    level: int | None,
    encryption: str,
    key_id: str | None,
) -> None:
    """Set how TOPIC's new remote segments are stored: chunked, compressed and/or encrypted.

    The .log is stored chunked with a small .chunks object beside it (the chunk table and the
    wrapped data key); the index files stay plain. Segments uploaded before keep their format;
    `none`/`none` uploads them exactly as Kafka wrote them (and overrides offloader.toml).

    \b
    Examples:
      offloader kafka set-offload-transform orders --compression zstd \\
          --encryption aes-256-gcm --key-id k1
      offloader kafka set-offload-transform orders --compression none
    """
    policy = TransformPolicy(compression, level, encryption, key_id)
    with open_offloader(cli) as off:
        stored = off.kafka().set_transform(topic, policy)
    cli.emit(_record(topic, stored, "metadata"), f"{topic}: offloadTransform: {stored.describe()}")


@click.command("get-offload-transform")
@click.argument("topic")
@pass_cli
def get_offload_transform(cli: CliContext, topic: str) -> None:
    """Show the transform TOPIC's new segments get, and where it is set (`none`: plain)."""
    with open_offloader(cli, read_only=True) as off:
        policy, source = off.kafka().get_transform(topic)
    cli.emit(
        _record(topic, policy, source),
        f"{topic}: offloadTransform: {policy.describe()} ({source})",
    )


@click.command("remove-offload-transform")
@click.argument("topic")
@pass_cli
def remove_offload_transform(cli: CliContext, topic: str) -> None:
    """Forget TOPIC's transform (offloader.toml's [transform.kafka_topics] applies again)."""
    with open_offloader(cli) as off:
        removed = off.kafka().remove_transform(topic)
    text = f"{topic}: offload transform removed" if removed else f"{topic}: no transform was set"
    cli.emit({"topic": topic, "removed": removed}, text)
