"""``offloader brokers list`` (and ``topics unload``, :mod:`cli.topics.unload`): several
brokers on one store.

With a shared metadata store (``--metadata postgresql://...``) every home is a broker with an
id (kept in ``<home>/broker-id``) and a heartbeat; a topic is owned by the broker whose home
holds its ledgers. ``topics unload TOPIC`` (on the owner) releases that ownership once every
ledger is offloaded, so another broker may own the topic; ``brokers list`` shows the brokers,
their last heartbeat and how many topics each owns.

JSON (``--json``): one line per broker ``{broker_id, host, home, started_ms, heartbeat_ms,
topics, me}``.
"""

from __future__ import annotations

from collections import Counter

import click

from cli.context import CliContext, pass_cli
from cli.render import echo_json, echo_table, time_text
from cli.settings import open_offloader


@click.command("list")
@pass_cli
def list_brokers(cli: CliContext) -> None:
    """List the brokers: id, host, home, start and last heartbeat (UTC), topics owned.

    \b
    Example:
      offloader --metadata postgresql://db/offloader brokers list
    """
    with open_offloader(cli) as offloader:
        found = offloader.brokers()
        owned = Counter(offloader.topic_owners().values())
        me = offloader.broker_id
    if cli.json:
        for b in found:
            echo_json(
                {
                    "broker_id": b.broker_id,
                    "host": b.host,
                    "home": b.home,
                    "started_ms": b.started_ms,
                    "heartbeat_ms": b.heartbeat_ms,
                    "topics": owned.get(b.broker_id, 0),
                    "me": b.broker_id == me,
                }
            )
        return
    echo_table(
        ("BROKER", "HOST", "HOME", "STARTED", "HEARTBEAT", "TOPICS", "ME"),
        [
            (
                b.broker_id,
                b.host,
                b.home,
                time_text(b.started_ms),
                time_text(b.heartbeat_ms),
                owned.get(b.broker_id, 0),
                "*" if b.broker_id == me else "",
            )
            for b in found
        ],
    )
