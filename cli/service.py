"""``offloader service run``: the background loop, in the foreground of a terminal or a unit.

Each pass rolls ledgers over by age, applies the namespaces' offload thresholds, deletes local
copies whose deletion lag has passed, trims by retention, retries failed offloads and sweeps
orphans (:meth:`~offloader.api.Offloader.service_tick`). SIGTERM and SIGINT set a flag the loop
checks (``should_stop``), so the pass in progress finishes and the command exits 0; the previous
signal handlers are restored afterwards.

Output: one line per pass that did something (every pass with ``--once`` or ``--json``); in
``--json`` mode ``{rolled_over, offloaded, offload_failures: [{ledger_id, error}],
local_deleted, trimmed, orphans_removed, verification_failures: [{ledger_id, error}], errors}``.
Problems inside a pass (a failed offload, a step's error) are reported and the loop carries on:
the exit code stays 0. With ``--once`` a pass in which any step failed exits 1 (after its
report), with one ``error:`` line, so that cron and scripts notice.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import click

from cli.context import CliContext, pass_cli
from cli.params import DURATION, KAFKA_METADATA, METRICS_ADDR, topics_option
from cli.render import echo_json
from cli.settings import broker_options, file_config_of, open_offloader
from offloader.api import (
    IcebergTopicReport,
    MetricsAddress,
    TickReport,
    TopicExportReport,
    TopicSelection,
    start_metrics_server,
)
from offloader.errors import ConfigError, OffloadError
from offloader.logs import get_logger

log = get_logger(__name__)


@click.group()
def service() -> None:
    """Run the background service (rollover, thresholds, deletion lag, retention, orphans).

    \b
    Examples:
      offloader service run --interval 30s
      offloader service run --once
    """


class StopFlag:
    """Set by SIGTERM/SIGINT; passed to the loop as ``should_stop``."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal_name: str | None = None

    def set(self, signal_name: str | None = None) -> None:
        self.signal_name = signal_name
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()


@contextmanager
def stop_on_signals(flag: StopFlag) -> Iterator[StopFlag]:
    """Install SIGTERM/SIGINT handlers that set ``flag`` (main thread only); restore after."""
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        # only set the flag: logging here could deadlock on the log stream's lock, which the
        # interrupted main thread may be holding
        flag.set(signal.Signals(signum).name)

    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def tick_record(report: TickReport) -> dict[str, Any]:
    return {
        "rolled_over": list(report.rolled_over),
        "offloaded": list(report.offloaded),
        "offload_failures": [
            {"ledger_id": lid, "error": error} for lid, error in report.offload_failures
        ],
        "local_deleted": list(report.local_deleted),
        "trimmed": list(report.trimmed),
        "orphans_removed": report.orphans_removed,
        "verification_failures": [
            {"ledger_id": lid, "error": error} for lid, error in report.verification_failures
        ],
        "errors": list(report.errors),
        "kafka_uploaded": list(report.kafka_uploaded),
        "kafka_deleted": list(report.kafka_deleted),
    }


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(map(str, ids)) if ids else "none"


def tick_text(report: TickReport) -> str:
    """One line per pass, then one line per problem (failed offloads, kept local copies)."""
    lines = [
        f"rolled over: {_ids(report.rolled_over)}; offloaded: {_ids(report.offloaded)}; "
        f"local copies deleted: {_ids(report.local_deleted)}; "
        f"trimmed: {_ids(report.trimmed)}; orphans removed: {report.orphans_removed}"
    ]
    lines += [f"  offload of ledger {lid} failed: {e}" for lid, e in report.offload_failures]
    lines += [
        f"  ledger {lid} kept locally, its objects failed verification: {e}"
        for lid, e in report.verification_failures
    ]
    if report.kafka_uploaded or report.kafka_deleted:
        lines.append(
            f"kafka segments uploaded: {', '.join(report.kafka_uploaded) or 'none'}; "
            f"remote segments deleted by retention: {len(report.kafka_deleted)}"
        )
    lines += [f"  error: {error}" for error in report.errors]
    return "\n".join(lines)


def _is_idle(report: TickReport) -> bool:
    return not any(tick_record(report)[key] for key in tick_record(report))


@service.command()
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@click.option(
    "--interval",
    type=DURATION,
    default="30s",
    show_default=True,
    help="Time between passes (e.g. 30s, 5m; at least 1s).",
)
@click.option(
    "--kafka-log-dir",
    "kafka_log_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A Kafka broker log directory whose closed segments each pass uploads (repeatable; "
    "also [kafka] log_dirs in offloader.toml), named in the tier's persisted key scheme (see "
    "kafka upload --hash-prefix).",
)
@topics_option("--kafka-topics", "Only these Kafka topics (default: all; also [kafka] topics).")
@KAFKA_METADATA
@click.option(
    "--metrics-addr",
    type=METRICS_ADDR,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics, e.g. 127.0.0.1:9108 (port 0: "
    "a free port, printed at start; also metrics_addr in offloader.toml).",
)
@broker_options
@pass_cli
def run(
    cli: CliContext,
    once: bool,
    interval: int,
    kafka_log_dirs: tuple[Path, ...],
    kafka_topics: str | None,
    kafka_metadata: str | None,
    metrics_addr: MetricsAddress | None,
) -> None:
    """Run the background service until SIGTERM or Ctrl-C (or one pass with --once).

    Prints a line for every pass that did something; logs go to stderr. With --metrics-addr
    it serves Prometheus metrics (Pulsar's brk_ledgeroffloader_* family, offload lag, deletion
    backlog, Kafka copy lag, object store requests, passes) and prints "metrics: URL" on
    stderr.

    \b
    Examples:
      offloader service run --interval 30s
      offloader --json service run --once
      offloader -v --log-format json service run
      offloader service run --metrics-addr 127.0.0.1:9108
    """

    if interval < 1:
        raise click.BadParameter(
            f"{interval}s is below the minimum of 1s", param_hint="'--interval'"
        )

    if kafka_topics is not None:  # checked now, not at the first pass's upload
        TopicSelection.parse(kafka_topics).require_flat()

    reports: list[TickReport] = []

    def on_tick(report: TickReport) -> None:
        reports[:] = [report]
        if cli.json:
            echo_json(tick_record(report))
        elif once or not _is_idle(report):
            click.echo(tick_text(report))

    def on_export(done: Sequence[TopicExportReport | IcebergTopicReport]) -> None:
        for r in done:
            record = {
                "export": r.topic,
                "target": r.target,
                "watermark": list(r.watermark),
                "files": r.files,
                "rows": r.rows,
            }
            if cli.json:
                echo_json(record)
            elif r.files or once:
                click.echo(
                    f"export {r.topic} -> {r.target}: {r.rows} messages in {r.files} files, "
                    f"watermark {r.watermark[0]}:{r.watermark[1]}"
                )

    address = metrics_addr or file_config_of(cli).metrics_addr
    with ExitStack() as stack:
        metrics = None
        if address is not None:
            try:
                server = start_metrics_server(address)
            except ConfigError as exc:
                if metrics_addr is None:  # from offloader.toml: an operational error
                    raise
                raise click.BadParameter(str(exc), param_hint="'--metrics-addr'") from None
            stack.callback(server.close)
            metrics = server.metrics
            click.echo(f"metrics: {server.url}", err=True)
            log.info("service.metrics", url=server.url)
        flag = stack.enter_context(stop_on_signals(StopFlag()))
        offloader = stack.enter_context(
            open_offloader(
                cli,
                kafka_log_dirs=tuple(str(d) for d in kafka_log_dirs),
                kafka_topics=kafka_topics,
                kafka_metadata=kafka_metadata,
                metrics=metrics,
            )
        )
        log.info("service.start", interval_seconds=interval, once=once)
        offloader.run_service(
            interval_seconds=float(interval),
            once=once,
            should_stop=flag,
            on_tick=on_tick,
            exports=file_config_of(cli).exports,
            on_export=on_export,
        )
    log.info("service.stopped", signal=flag.signal_name)
    if once and reports:
        raise_if_failed(reports[0])


def raise_if_failed(report: TickReport) -> None:
    """``--once``: exit 1 (after the pass's report) when any step of the pass failed, so that
    cron and scripts notice; the running service carries on instead."""
    problems = [
        *(f"offload of ledger {lid} failed: {e}" for lid, e in report.offload_failures),
        *(f"ledger {lid} failed verification: {e}" for lid, e in report.verification_failures),
        *report.errors,
    ]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise OffloadError(
            f"{len(problems)} step(s) of the service pass failed; first: {problems[0]}{more}"
        )
