"""The kill -9 harness: run :mod:`tests.crash.worker`, SIGKILL it, restart, check everything.

A *scenario* is a fresh home plus a list of kills. Each kill is either a crash point
(``LEDGER_OFFLOADER_CRASH_AT=name:N``: the worker SIGKILLs itself the N-th time it reaches that
point, see :mod:`offloader.crashpoints`) or a random delay after the worker printed ``READY``.
The kills of a scenario run one after another on the same home (so the later ones land in
recovery, retries and cleanups). After every kill a fresh :class:`~offloader.api.Offloader`
(a restarted process's view) checks:

* every acknowledged entry is readable through ``Offloader.read`` (local or offloaded: the topic
  is read with both read priorities) at the position it was acknowledged at, with the
  acknowledged sha256; and every entry read, acked or not, is the workload's payload for its
  sequence number (nothing duplicated, lost or torn);
* the metadata is consistent: every complete offload's objects exist with the recorded sizes;
  every ledger with ``local_deleted`` has a complete offload; every other ledger has its local
  file (except an empty current ledger, whose file a crash may have kept from being created:
  the next produce creates it) with at least the entries the metadata records.

After the last kill the workload runs to completion in process (recovery, retries, sweeps),
then ``gc(min_age_seconds=0)``, and the final checks are strict: exactly
:data:`~tests.crash.worker.TOTAL_ENTRIES` entries, every complete offload verifies with its
checksums, no local file is left for a deleted local copy, and ``orphans(min_age_seconds=0)``
is clean with no multipart upload left at all.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from offloader import crashpoints
from offloader.api import Offloader, Position
from offloader.errors import NotFound, ObjectNotFound
from offloader.metadata.base import LedgerRecord
from offloader.policies import READ_PRIORITY_LOCAL_FIRST, READ_PRIORITY_TIERED_FIRST
from tests.crash.launcher import spawn
from tests.crash.worker import NS, TOPIC, TOTAL_ENTRIES, open_offloader, payload, run, sha256_hex

REPO = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT = 60.0
#: one line per finished sweep, shown in pytest's terminal summary (``tests/crash/conftest.py``)
SUMMARIES: list[str] = []


@dataclass(frozen=True)
class Kill:
    """Where to kill the worker: at a crash point (``point``, its ``occurrence``-th time), or
    ``delay`` seconds after it printed READY."""

    point: str | None = None
    occurrence: int = 1
    delay: float = 0.0

    def __str__(self) -> str:
        return f"{self.point}:{self.occurrence}" if self.point else f"random@{self.delay:.3f}s"


@dataclass(frozen=True)
class Ack:
    seq: int
    position: Position
    sha256: str


@dataclass
class ScenarioResult:
    name: str
    #: kills that happened (the worker died of SIGKILL)
    kills: list[str] = field(default_factory=list)
    #: kills that did not happen (the worker finished first): not counted as survived
    missed: list[str] = field(default_factory=list)
    acked: int = 0
    #: acknowledged entries verified, summed over every check of the scenario
    entries_checked: int = 0
    #: ``.tmp-*`` files/directories a kill left in a local store (invisible to the audit)
    store_tmp_leftovers: list[str] = field(default_factory=list)


class CrashCheckFailed(AssertionError):
    """A kill left the system in a state the crash-safety contract forbids."""


def _fail(scenario: str, message: str) -> CrashCheckFailed:
    return CrashCheckFailed(f"[{scenario}] {message}")


# --- the worker process ---------------------------------------------------------------------
def run_worker(
    home: Path, store_url: str, seed: int, kill: Kill, env: dict[str, str] | None = None
) -> tuple[bool, list[Ack], str]:
    """Run the worker until it is killed or finishes: ``(killed, acks, stderr)``."""
    child_env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    child_env.update(env or {})
    if kill.point is not None:
        child_env[crashpoints.ENV_VAR] = f"{kill.point}:{kill.occurrence}"
    child = spawn("tests.crash.worker", [str(home), store_url, str(seed)], child_env)
    try:
        if kill.point is None:
            assert child.stdout is not None
            first = child.stdout.readline()  # READY (or "" if it died at start-up)
            if first.strip() == "READY":
                time.sleep(kill.delay)
                child.kill()
            out, err = child.communicate(timeout=WORKER_TIMEOUT)
            out = first + out
        else:
            out, err = child.communicate(timeout=WORKER_TIMEOUT)
    except BaseException:
        child.kill()
        child.wait()
        raise
    acks = [_parse_ack(line) for line in out.splitlines() if line.startswith("ACK ")]
    if child.returncode == -signal.SIGKILL:
        return True, acks, err
    if child.returncode != 0 or not out.rstrip().endswith("DONE"):
        raise AssertionError(f"worker failed (exit {child.returncode}) on {kill}:\n{err}")
    return False, acks, err


def _parse_ack(line: str) -> Ack:
    _, seq, position, digest = line.split()
    return Ack(int(seq), Position.parse(position), digest)


# --- the checks -----------------------------------------------------------------------------
def check_entries(off: Offloader, seed: int, acked: dict[int, Ack], scenario: str) -> int:
    """Read the whole topic twice, with each read priority (tiered-storage-first reads every
    complete offload from the store, local-first every local copy still there); every entry
    must be the workload's payload for its sequence number, every acked one at its acked
    position. Returns the number of entries."""
    try:
        count = _check_read(off, seed, acked, scenario)
        off.set_read_priority(NS, READ_PRIORITY_LOCAL_FIRST)
        try:
            if _check_read(off, seed, acked, scenario + ", local-first") != count:
                raise _fail(scenario, "the read priorities disagree on the entry count")
        finally:
            off.set_read_priority(NS, READ_PRIORITY_TIERED_FIRST)
    except NotFound:
        if acked:
            raise _fail(scenario, f"topic gone, {len(acked)} entries were acknowledged") from None
        return 0
    return count


def _check_read(off: Offloader, seed: int, acked: dict[int, Ack], scenario: str) -> int:
    entries = list(off.read(TOPIC))
    for seq, entry in enumerate(entries):
        if entry.payload != payload(seed, seq):
            raise _fail(
                scenario,
                f"entry {seq} at {entry.ledger_id}:{entry.entry_id} "
                f"({entry.tier}) has the wrong bytes",
            )
    if len(entries) < len(acked) or (acked and max(acked) >= len(entries)):
        raise _fail(scenario, f"{len(entries)} entries readable, {len(acked)} acknowledged")
    for seq, ack in acked.items():
        entry = entries[seq]
        where = Position(entry.ledger_id, entry.entry_id)
        if where != ack.position or sha256_hex(entry.payload) != ack.sha256:
            raise _fail(scenario, f"acked entry {seq} was at {ack.position}, read at {where}")
    return len(entries)


def check_metadata(off: Offloader, scenario: str, *, strict: bool) -> list[LedgerRecord]:
    """The metadata/storage invariants (module docstring); ``strict`` after the completion run:
    no allowance for an interrupted tail, no leftover local file, every offload verifies."""
    try:
        ledgers = list(off.topic_info(TOPIC).ledgers)
    except NotFound:
        return []
    rt = off.runtime
    files = set(rt.ledgers.list_ledgers(TOPIC))
    open_ids = [r.ledger_id for r in ledgers if r.state == "OPEN"]
    if len(open_ids) > 1 or (open_ids and open_ids[0] != ledgers[-1].ledger_id):
        raise _fail(scenario, f"open ledgers {open_ids}: only the last may be open")
    for record in ledgers:
        ledger_id, context = record.ledger_id, record.offload
        if record.offload_complete:
            assert context is not None
            for key, size in (
                (context.data_key, context.data_size),
                (context.index_key, context.index_size),
            ):
                try:
                    found = rt.store.head(key).size
                except ObjectNotFound:
                    raise _fail(
                        scenario, f"ledger {ledger_id}: complete offload, {key} missing"
                    ) from None
                if found != size:
                    raise _fail(
                        scenario, f"ledger {ledger_id}: {key} is {found} bytes, recorded {size}"
                    )
        if record.local_deleted:
            if not record.offload_complete:
                raise _fail(scenario, f"ledger {ledger_id}: local copy deleted, offload incomplete")
            continue
        if ledger_id not in files:
            tail_window = (
                record.state == "OPEN"
                and record.entries == 0
                and ledger_id == ledgers[-1].ledger_id
            )
            if strict or not tail_window:
                raise _fail(
                    scenario,
                    f"ledger {ledger_id} ({record.state}, {record.entries} "
                    "entries) has no local file and no offload",
                )
            continue
        info = rt.ledgers.info(TOPIC, ledger_id)
        if info.entry_count < record.entries or (
            record.state == "CLOSED" and info.entry_count != record.entries
        ):
            raise _fail(
                scenario,
                f"ledger {ledger_id}: file holds {info.entry_count} entries, "
                f"metadata {record.entries} ({record.state})",
            )
    if strict:
        live = {r.ledger_id for r in ledgers if not r.local_deleted}
        if files - live:
            raise _fail(scenario, f"local files left for ledgers {sorted(files - live)}")
        bad = [r for r in off.verify(TOPIC, checksums=True) if not r.ok]
        if bad:
            raise _fail(scenario, f"offloads failing verification: {bad}")
    return ledgers


def local_store_tmp_leftovers(store_url: str) -> list[str]:
    """Temporary files and directories (``.tmp-*``) in a ``file://`` store: what a kill in the
    middle of a local-store write leaves. No listing shows them; the orphan audit reports them
    (``stale-temporary``) and gc removes them, so none may be left after gc."""
    if not store_url.startswith("file://"):
        return []
    root = Path(store_url.removeprefix("file://"))
    found = []
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            if name.startswith(".tmp-"):
                found.append(str(Path(directory, name).relative_to(root)))
    return sorted(found)


#: what the workload plants that this installation did not write (tests.crash.worker
#: ``_plant_orphans``): gc must report it and leave it alone (issue 21, item 7)
FOREIGN_REASONS = frozenset({"unclaimed-uuid", "not-an-offload-key", "foreign-upload"})


def _planted(key: str) -> bool:
    return key.endswith(("-ledger-9999", "-ledger-9998")) or key.startswith("junk/seed-")


def check_clean_store(off: Offloader, scenario: str) -> None:
    """After gc: no orphan of this installation, no missing object, no multipart upload but
    the foreign one planted; what the workload planted as another writer's is still there."""
    report = off.orphans(min_age_seconds=0)
    left = [(o.key, o.reason, o.deletable) for o in (*report.objects, *report.uploads)]
    ours = [o for o in left if o[2] or o[1] not in FOREIGN_REASONS or not _planted(o[0])]
    if ours or report.missing:
        raise _fail(scenario, f"orphans after gc: {report}")
    if {reason for _, reason, _ in left} != FOREIGN_REASONS:
        raise _fail(scenario, f"gc deleted objects it did not write: {report}")
    uploads = [u.key for u in off.runtime.store.list_multipart_uploads()]
    if not uploads or not all(_planted(key) for key in uploads):
        raise _fail(scenario, f"multipart uploads after the run: {uploads}")


# --- scenarios ------------------------------------------------------------------------------
def run_scenario(
    workdir: Path,
    store_url: str | None,
    seed: int,
    kills: Sequence[Kill],
    name: str,
    *,
    env: dict[str, str] | None = None,
) -> ScenarioResult:
    """Kill the worker at every ``kills`` in turn on one home, checking after each; then run to
    completion, gc, and check strictly. ``store_url`` None: ``file://<workdir>/objects``."""
    home = workdir / "home"
    url = store_url or f"file://{workdir / 'objects'}"
    result = ScenarioResult(name)
    acked: dict[int, Ack] = {}
    for kill in kills:
        killed, acks, _ = run_worker(home, url, seed, kill, env)
        for ack in acks:
            if ack.seq in acked and acked[ack.seq] != ack:
                raise _fail(name, f"entry {ack.seq} acknowledged twice differently")
            acked[ack.seq] = ack
        (result.kills if killed else result.missed).append(str(kill))
        with open_offloader(str(home), url) as off:
            check_entries(off, seed, acked, name)
            check_metadata(off, name, strict=False)
        result.entries_checked += len(acked)
    with open_offloader(str(home), url) as off:  # the restart: recovery, then the rest

        def record(line: str) -> None:
            if line.startswith("ACK "):
                ack = _parse_ack(line)
                acked[ack.seq] = ack

        run(off, seed, record)
        off.gc(min_age_seconds=0)
        total = check_entries(off, seed, acked, name)
        if total != TOTAL_ENTRIES:  # a crash may have kept some from being acknowledged
            raise _fail(name, f"{total} entries in the topic, expected {TOTAL_ENTRIES}")
        check_metadata(off, name, strict=True)
        check_clean_store(off, name)
    result.store_tmp_leftovers = local_store_tmp_leftovers(url)
    if result.store_tmp_leftovers:
        raise _fail(name, f"gc left local-store temporaries: {result.store_tmp_leftovers}")
    result.acked = len(acked)
    result.entries_checked += len(acked)
    return result


def count_crash_points(workdir: Path, seed: int) -> tuple[dict[str, int], float]:
    """How many times a full, uninterrupted run of the workload reaches each crash point, and
    how long the run took (in this process: the worker's time after READY)."""
    hits: dict[str, int] = {}
    crashpoints.count_hits(hits)
    try:
        with open_offloader(str(workdir / "home"), f"file://{workdir / 'objects'}") as off:
            started = time.monotonic()
            run(off, seed, lambda line: None)
            seconds = time.monotonic() - started
    finally:
        crashpoints.count_hits(None)
    return hits, seconds


def crash_point_kills(hits: dict[str, int], per_point: int) -> list[Kill]:
    """For every point a run reaches: up to ``per_point`` occurrences, evenly spread from the
    first to the last."""
    kills: list[Kill] = []
    for point, count in sorted(hits.items()):
        steps = max(min(per_point, count), 1)
        picks = {1 + round(i * (count - 1) / max(steps - 1, 1)) for i in range(steps)}
        kills += [Kill(point, occurrence) for occurrence in sorted(picks)]
    return kills


def random_kills(rng: random.Random, count: int, max_delay: float) -> list[Kill]:
    return [Kill(delay=rng.uniform(0.0, max_delay)) for _ in range(count)]
