"""click parameter types for sizes (``10M``), times (``4h``), positions (``12:0``) and the
metrics endpoint's address (``127.0.0.1:9108``), and the ``--catalog``/``--warehouse`` options
of the Iceberg export commands, and the one option that selects topics (``topics_option``).

A bad value is a usage error (exit code 2) naming the option. Sizes and times use Pulsar's
units (:mod:`offloader.units`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from offloader.api import (
    TOPICS_HELP,
    TOPICS_METAVAR,
    MetricsAddress,
    Position,
    TransformPolicy,
    parse_kafka_metadata_url,
    parse_metrics_addr,
)
from offloader.errors import ConfigError
from offloader.units import parse_duration_seconds, parse_size

__all__ = [
    "DURATION",
    "DURATION_OR_MINUS_ONE",
    "METRICS_ADDR",
    "POSITION",
    "SIZE",
    "SIZE_OR_MINUS_ONE",
    "DurationParam",
    "MetricsAddrParam",
    "PositionParam",
    "SizeParam",
    "iceberg_options",
    "topics_option",
    "transform_options",
    "transform_record",
]

F = TypeVar("F", bound=Callable[..., Any])


class SizeParam(click.ParamType):  # type: ignore[type-arg]
    """``10M``, ``5G``, ``4096`` (bytes); ``-1`` only where ``allow_negative``."""

    name = "size"

    def __init__(self, *, allow_negative: bool = False, minimum: int = 0) -> None:
        self.allow_negative = allow_negative
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            size = parse_size(value, allow_negative=self.allow_negative)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if 0 <= size < self.minimum:
            self.fail(f"{value!r} is below the minimum of {self.minimum} bytes", param, ctx)
        return size


class DurationParam(click.ParamType):  # type: ignore[type-arg]
    """``30s``, ``10m``, ``4h``, ``2d``, ``1w`` or plain seconds; ``-1`` where allowed."""

    name = "time"

    def __init__(self, *, allow_negative: bool = False, minimum: int = 0) -> None:
        self.allow_negative = allow_negative
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            seconds = parse_duration_seconds(value, allow_negative=self.allow_negative)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if 0 <= seconds < self.minimum:
            self.fail(f"{value!r} is below the minimum of {self.minimum}s", param, ctx)
        return seconds


class PositionParam(click.ParamType):  # type: ignore[type-arg]
    """``LEDGER:ENTRY``, e.g. ``12:0``."""

    name = "ledger:entry"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Position:
        if isinstance(value, Position):
            return value
        try:
            return Position.parse(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeParam()
SIZE_OR_MINUS_ONE = SizeParam(allow_negative=True)
DURATION = DurationParam()
DURATION_OR_MINUS_ONE = DurationParam(allow_negative=True)
POSITION = PositionParam()


class MetricsAddrParam(click.ParamType):  # type: ignore[type-arg]
    """``HOST:PORT`` for the metrics endpoint, e.g. ``127.0.0.1:9108`` (port 0: any free one)."""

    name = "host:port"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> MetricsAddress:
        if isinstance(value, MetricsAddress):
            return value
        try:
            return parse_metrics_addr(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


METRICS_ADDR = MetricsAddrParam()


def iceberg_options(func: F) -> F:
    """``--catalog`` and ``--warehouse``."""
    func = click.option(
        "--warehouse",
        metavar="URL",
        default=None,
        help="Iceberg warehouse: a local directory, s3://bucket/prefix, gs://bucket/prefix or "
        "az://container/prefix (default: <home>/iceberg/warehouse).",
    )(func)
    return click.option(
        "--catalog",
        metavar="URI",
        default=None,
        help="Iceberg catalog: sqlite:///PATH (default: <home>/iceberg/catalog.db), "
        "postgresql://..., or a REST catalog's http(s):// URL.",
    )(func)


def transform_options(scope: str, unit: str, skipped: str) -> Callable[[F], F]:
    """``--compression``, ``--level``, ``--encryption`` and ``--key-id`` of a
    ``set-offload-transform`` command: ``scope`` names what the policy is for (``namespace``,
    ``topic``), ``unit`` what gets a fresh data key (``object``, ``segment``), ``skipped``
    what is never compressed again."""

    def apply(func: F) -> F:
        func = click.option(
            "--key-id",
            metavar="ID",
            help=f"Key-encryption key for this {scope} (default: the key ring's active key).",
        )(func)
        func = click.option(
            "--encryption",
            type=click.Choice(["aes-256-gcm", "none"]),
            default="none",
            show_default=True,
            help=f"Encrypt chunks with AES-256-GCM under a fresh data key per {unit}.",
        )(func)
        func = click.option("--level", type=click.IntRange(-7, 22), help="zstd level (default 3).")(
            func
        )
        return click.option(
            "--compression",
            type=click.Choice(["zstd", "none"]),
            default="none",
            show_default=True,
            help="Compress chunks with zstd (kept only when it saves >= 10%; never for "
            f"{skipped}).",
        )(func)

    return apply


def transform_record(policy: TransformPolicy) -> dict[str, Any]:
    """A transform policy as JSON (never key bytes: the key id only)."""
    return {
        "compression": policy.compression,
        "level": policy.level,
        "encryption": policy.encryption,
        "key_id": policy.key_id,
    }


def _metadata_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return parse_kafka_metadata_url(value).canonical
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


#: ``--kafka-metadata``: the Kafka cluster whose metadata gates uploads (``service run`` too)
KAFKA_METADATA = click.option(
    "--kafka-metadata",
    metavar="URL",
    callback=_metadata_url,
    help="The Kafka cluster's metadata, read-only: zk://HOST:PORT[,HOST:PORT][/CHROOT] (or "
    "zk:HOST:PORT...) or kraft:METADATA_LOG_DIR (also kafka_metadata in offloader.toml). "
    "With it only partitions this broker leads (meta.properties in the log dir), of topics "
    "with remote.storage.enable=true, are uploaded.",
)


def topics_option(
    name: str = "--topics", lead: str = "Only these topics (default: all)."
) -> Callable[[F], F]:
    """An option that selects topics: the one form (:mod:`offloader.selection`), the one
    metavar and the one help sentence, after a short ``lead`` saying what the command does
    with them. Its value reaches the engine as text, which parses it (a bad regex is a one-line
    ``error:``, exit code 1)."""
    return click.option(name, metavar=TOPICS_METAVAR, help=f"{lead} {TOPICS_HELP}")
