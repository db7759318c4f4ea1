"""``offloader namespaces set-offload-transform|get-offload-transform`` (spec/transforms.md):
how a namespace's new data objects are stored (chunked, compressed and/or encrypted).

JSON (``--json``): ``{namespace, transform: {compression, level, encryption, key_id}}``.
"""

from __future__ import annotations

import click

from cli.context import CliContext, pass_cli
from cli.params import transform_options, transform_record
from cli.render import echo_json
from cli.settings import open_offloader
from offloader.api import TransformPolicy


def _echo_transform(cli: CliContext, namespace: str, policy: TransformPolicy) -> None:
    if cli.json:
        echo_json({"namespace": namespace, "transform": transform_record(policy)})
    else:
        click.echo(f"offloadTransform: {policy.describe()}")


@click.command("set-offload-transform")
@click.argument("namespace")
@transform_options("namespace", "object", "entries that are already compressed")
@pass_cli
def set_offload_transform(
    cli: CliContext,
    namespace: str,
    compression: str,
    level: int | None,
    encryption: str,
    key_id: str | None,
) -> None:
    """Set how NAMESPACE's new data objects are stored: chunked, compressed and/or encrypted.

    Objects written before keep their format; `none`/`none` writes Pulsar's format, byte for
    byte. Transformed objects are refused by Pulsar's reader ("Invalid object version").

    \b
    Examples:
      offloader namespaces set-offload-transform public/default --compression zstd \\
          --encryption aes-256-gcm --key-id k1
      offloader namespaces set-offload-transform public/default --compression none
    """
    policy = TransformPolicy(compression, level, encryption, key_id)
    with open_offloader(cli) as offloader:
        policies = offloader.set_offload_transform(namespace, policy)
    _echo_transform(cli, namespace, policies.transform)


@click.command("get-offload-transform")
@click.argument("namespace")
@pass_cli
def get_offload_transform(cli: CliContext, namespace: str) -> None:
    """Show NAMESPACE's offload transform (`none` when objects are plain)."""
    with open_offloader(cli, read_only=True) as offloader:
        policies = offloader.get_policies(namespace)
    _echo_transform(cli, namespace, policies.transform)
