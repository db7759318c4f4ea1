"""The two-broker part of ``make tour``: two homes on one PostgreSQL metadata store.

:func:`cluster_part` starts a throwaway PostgreSQL (``devservers/postgres.py``, Debian's
``postgresql`` package; ``make tour`` installs it as root, as ``make test`` does), gives two
homes (broker a and broker b) the same ``metadata = "postgresql://..."`` and object store in
their ``offloader.toml``, and drives the real ``offloader`` command: a produces a topic and owns
it, b sees it (``topics info`` names the owner) but is refused producing to it, a offloads and
b reads the offloaded entries (a cluster-wide read), a unloads the topic and b takes it over,
and ``brokers list`` shows both. When PostgreSQL cannot run here, it says why and skips.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from examples.harness import CLI, Demo, S3Target, StepFailed

TOPIC = "persistent://demo/cluster/orders"


def _fails(demo: Demo, args: list[str], expect: str) -> str:
    """Run ``offloader ARGS`` in ``demo``'s home, expecting exit 1 with ``expect`` in stderr."""
    print(f"$ offloader {shlex.join(args)}", flush=True)
    proc: subprocess.CompletedProcess[str] = demo.run([*CLI, *args])
    print(f"  {proc.stderr.strip()}")
    if proc.returncode != 1 or expect not in proc.stderr:
        raise StepFailed(f"`offloader {shlex.join(args)}` should fail saying {expect!r}")
    return proc.stderr


def cluster_part(demo: Demo, work: Path, check: Callable[[bool, str], None]) -> None:
    """Two brokers sharing a PostgreSQL metadata store (see the module docstring)."""
    from devservers import postgres

    demo.step("Two brokers on one PostgreSQL metadata store: ownership, a cluster-wide read")
    reason = postgres.unavailable_reason()
    if reason is not None:
        print(f"  skipped: PostgreSQL cannot run here ({reason}; as root: make pg-deps)")
        return
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(postgres.start_postgres())
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            print(f"  skipped: the PostgreSQL server did not start ({exc})")
            return
        url = server.admin_url()
        print(f"  throwaway PostgreSQL at {url}")
        scheme, _, rest = demo.target.store_url.partition("://")
        bucket = rest.split("/")[0]
        target = S3Target(f"{scheme}://{bucket}/cluster", demo.target.env, demo.target.description)
        brokers = {}
        for name in ("a", "b"):
            home = work / f"broker-{name}"
            home.mkdir()
            (home / "offloader.toml").write_text(
                f'store = "{target.store_url}"\nmetadata = "{url}"\n\n[broker]\n'
                'max_entries_per_ledger = 1000\nmin_rollover_time = "0"\nmax_block_size = "5M"\n'
            )
            brokers[name] = Demo(home, target)
        a, b = brokers["a"], brokers["b"]
        print(f"  broker a: OFFLOADER_HOME={a.home}; broker b: OFFLOADER_HOME={b.home}")
        a.offloader("namespaces", "create", "demo/cluster")
        a.offloader("topics", "produce", TOPIC, "--synthetic", "2500", "--size", "1K")
        id_a = (a.home / "broker-id").read_text().strip()
        info = b.json("topics", "info", TOPIC, quiet=True)[0]
        b.offloader("topics", "info", TOPIC, show=4)
        check(info["owner"] == id_a, f"broker b sees the topic, owned by broker a ({id_a})")
        _fails(b, ["topics", "produce", TOPIC, "--synthetic", "1"], f"owned by broker {id_a}")
        check(True, "broker b is refused producing to broker a's topic")
        a.offloader("topics", "offload-prefix", TOPIC, "--size-threshold", "0")
        entries = b.json("topics", "read", TOPIC, quiet=True)
        check(len(entries) == 2000, "broker b reads a's 2000 offloaded entries (from S3)")
        _fails(a, ["topics", "unload", TOPIC], "offload them first")
        a.offloader("topics", "offload-prefix", TOPIC, "--size-threshold", "0")
        a.offloader("topics", "unload", TOPIC, expect="Unloaded")
        b.offloader("topics", "produce", TOPIC, "--synthetic", "100", "--size", "1K")
        owner = b.json("topics", "info", TOPIC, quiet=True)[0]["owner"]
        check(owner != id_a and owner is not None, "after the unload broker b owns the topic")
        check(len(b.json("topics", "read", TOPIC, quiet=True)) == 2600, "2600 entries, one log")
        listed = b.offloader("--json", "brokers", "list", quiet=True)
        rows = [json.loads(line) for line in listed.splitlines() if line.strip()]
        b.offloader("brokers", "list")
        check(len(rows) == 2, "brokers list shows both brokers and their heartbeats")
