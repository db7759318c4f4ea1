"""The object every command receives: the global options, resolved once.

``offloader [--home DIR] [--store URL] [--metadata URL] [--pulsar-metadata URL]
[--endpoint-url URL] [--json]
[--log-format text|json] [-v|-q]`` are stored here by the top-level group (``cli/main.py``)
and reach every command as ``click.get_current_context().obj`` (use :func:`pass_cli` or
:func:`current`).
"""

from __future__ import annotations

import json as _json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

DEFAULT_HOME = Path(".offloader")


@dataclass(frozen=True)
class CliContext:
    """Global options of one ``offloader`` invocation."""

    home: Path = DEFAULT_HOME
    store_url: str | None = None
    metadata_url: str | None = None
    #: ``--pulsar-metadata``: a real Pulsar cluster's metadata store (``zk:host:port/chroot``)
    pulsar_metadata: str | None = None
    endpoint_url: str | None = None
    json: bool = False
    log_format: str = "text"
    verbosity: int = 0  # -v adds 1, -q subtracts 1

    @property
    def store(self) -> str:
        """``--store``, defaulting to ``file://<home>/objects``."""
        if self.store_url:
            return self.store_url
        return f"file://{(self.home / 'objects').resolve()}"

    @property
    def log_level(self) -> int:
        """WARNING by default; each -v one level more verbose, each -q one level quieter."""
        level = logging.WARNING - 10 * self.verbosity
        return max(logging.DEBUG, min(logging.CRITICAL, level))

    @property
    def verbose(self) -> bool:
        return self.verbosity > 0

    def emit(self, record: dict[str, Any], text: str, *, json_output: bool = False) -> None:
        """Print one result: a JSON line with ``--json`` (global or per command), else text."""
        if self.json or json_output:
            click.echo(_json.dumps(record, sort_keys=False))
        else:
            click.echo(text)


def current() -> CliContext:
    """The :class:`CliContext` of the running command (a default one outside the group)."""
    ctx = click.get_current_context()
    obj = ctx.find_object(CliContext)
    return obj if obj is not None else CliContext()


pass_cli = click.make_pass_decorator(CliContext, ensure=True)
