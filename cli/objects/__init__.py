"""``offloader objects``: the group, and its commands from the modules beside it.

:mod:`cli.objects.inspection` (``inspect``, with :mod:`cli.objects.transform` for transformed
objects and ``--chunks``), :mod:`cli.objects.encode`, :mod:`cli.objects.admin` (``verify``,
``orphans``, ``gc``) and :mod:`cli.objects.rekey`.
"""

from __future__ import annotations

import click

from cli.objects import admin, encode, inspection, rekey

__all__ = ["objects"]


@click.group()
def objects() -> None:
    """Check, encode and audit offloaded-ledger objects (inspect, encode, verify, orphans, gc).

    \b
    Examples:
      offloader objects inspect --data L.data --index L.index
      offloader objects encode --entries e.jsonl --ledger-id 7 --data L.data --index L.index
      offloader objects verify my-topic --verify-checksums
      offloader objects orphans
    """


objects.add_command(inspection.inspect)
objects.add_command(encode.encode)
objects.add_command(admin.verify)
objects.add_command(admin.orphans)
objects.add_command(admin.gc)
objects.add_command(rekey.rekey)
