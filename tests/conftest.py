"""Session fixtures shared by every test tier.

``s3_endpoint`` is parametrized over the S3 servers that can run here: moto's
ThreadedMotoServer always, and a throwaway Ceph RADOS Gateway (``devservers/ceph_rgw.py``)
when its daemons are installed. When RGW cannot run, its parameter is deselected and the
terminal summary says so in one line, with the command that enables it (never silently).

``pg_server`` is a throwaway PostgreSQL (``devservers/postgres.py``), started once per
session when a test needs it; tests parametrized with ``"postgresql"`` or marked ``postgres``
are deselected when it cannot run, with a one-line notice in the summary, as for RGW.
``zk_server`` is a throwaway ZooKeeper (``devservers/zookeeper.py``, tests marked
``zookeeper``), deselected the same way when it cannot run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.cloud import (
    AzuriteEmulator,
    GcsEmulator,
    azurite_unavailable_reason,
    gcs_unavailable_reason,
    start_azurite,
    start_gcs,
)
from devservers.endpoint import S3Endpoint
from devservers.moto_server import start_moto
from devservers.postgres import PgServer, start_postgres
from devservers.postgres import unavailable_reason as _pg_unavailable_reason
from devservers.zookeeper import ZkServer, start_zookeeper
from devservers.zookeeper import unavailable_reason as _zk_unavailable_reason

GOLDEN_DIR = Path(__file__).parent / "golden"

S3_SERVERS = ["moto", "rgw"]


def _rgw_unavailable_reason() -> str | None:
    try:
        from devservers import ceph_rgw
    except ImportError as exc:  # pragma: no cover - the helper module is part of the repo
        return f"devservers/ceph_rgw.py not importable: {exc}"
    return ceph_rgw.unavailable_reason()


def _needs_postgres(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    on_pg = callspec is not None and "postgresql" in callspec.params.values()
    return on_pg or item.get_closest_marker("postgres") is not None


#: the markers of tests that use a server or a JVM, from the fixtures they use and their
#: parameters, so that ``make check`` (``-m "not s3 and not rgw and not postgres and not spark
#: and not slow"``) selects the fast tier without relying on each file's ``pytestmark``
FIXTURE_MARKS = {
    "moto_endpoint": ("s3",),
    "rgw_endpoint": ("s3", "rgw"),
    "s3_endpoint": ("s3",),
    "s3_bucket": ("s3",),
    "pg_server": ("postgres",),
    "pg_url": ("postgres",),
    "spark": ("spark",),
}
PARAM_MARKS = {"moto": ("s3",), "rgw": ("s3", "rgw"), "postgresql": ("postgres",)}


def implied_marks(item: pytest.Item) -> set[str]:
    """The tier markers ``item`` needs by its fixtures and parameters (see FIXTURE_MARKS)."""
    names: set[str] = set()
    for fixture in getattr(item, "fixturenames", ()):
        names.update(FIXTURE_MARKS.get(fixture, ()))
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        if isinstance(value, str):
            names.update(PARAM_MARKS.get(value, ()))
    return names


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(implied_marks(item)):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)
    pg_reason = _pg_unavailable_reason()
    config._pg_skip_reason = pg_reason  # type: ignore[attr-defined]
    if pg_reason is not None:
        dropped_pg = [item for item in items if _needs_postgres(item)]
        if dropped_pg:
            config.hook.pytest_deselected(items=dropped_pg)
            items[:] = [item for item in items if not _needs_postgres(item)]
    zk_reason = _zk_unavailable_reason()
    config._zk_skip_reason = zk_reason  # type: ignore[attr-defined]
    if zk_reason is not None:
        dropped_zk = [item for item in items if item.get_closest_marker("zookeeper")]
        if dropped_zk:
            config.hook.pytest_deselected(items=dropped_zk)
            items[:] = [item for item in items if not item.get_closest_marker("zookeeper")]
    _deselect_cloud(config, items)
    reason = _rgw_unavailable_reason()
    config._rgw_skip_reason = reason  # type: ignore[attr-defined]
    if reason is None:
        return
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_rgw = callspec is not None and callspec.params.get("s3_endpoint") == "rgw"
        if on_rgw or item.get_closest_marker("rgw") is not None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _on_cloud(item: pytest.Item, name: str) -> bool:
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return item.get_closest_marker(name) is not None or name in params


def _deselect_cloud(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The GCS and Azure tiers are deselected, with a notice, when their emulator is missing."""
    reasons = {"gcs": gcs_unavailable_reason(), "azure": azurite_unavailable_reason()}
    config._cloud_skip_reasons = reasons  # type: ignore[attr-defined]
    for name, reason in reasons.items():
        if reason is None:
            continue
        dropped = [item for item in items if _on_cloud(item, name)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if not _on_cloud(item, name)]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for name, reason in getattr(terminalreporter.config, "_cloud_skip_reasons", {}).items():
        if reason:
            terminalreporter.write_line(
                f"{name} tier did not run: {reason}. Enable it with: make cloud-deps && make test",
                yellow=True,
            )
    pg_reason = getattr(terminalreporter.config, "_pg_skip_reason", None)
    if pg_reason:
        from devservers.postgres import DISABLE_ENV

        enable = f"unset {DISABLE_ENV}" if DISABLE_ENV in pg_reason else "sudo make pg-deps"
        terminalreporter.write_line(
            f"PostgreSQL tests did not run: {pg_reason}. Enable them with: {enable} && make test",
            yellow=True,
        )
    zk_reason = getattr(terminalreporter.config, "_zk_skip_reason", None)
    if zk_reason:
        from devservers.zookeeper import DISABLE_ENV as ZK_DISABLE_ENV

        enable = f"unset {ZK_DISABLE_ENV}" if ZK_DISABLE_ENV in zk_reason else "sudo make zk-deps"
        terminalreporter.write_line(
            f"ZooKeeper tests did not run: {zk_reason}. Enable them with: {enable} && make test",
            yellow=True,
        )
    reason = getattr(terminalreporter.config, "_rgw_skip_reason", None)
    if reason:
        disable_env = "LEDGER_OFFLOADER_NO_RGW"  # devservers/ceph_rgw.py's escape hatch
        enable = (
            f"unset {disable_env}" if disable_env in reason else "sudo make rgw-deps && make test"
        )
        terminalreporter.write_line(
            f"RGW tier did not run: {reason}. Enable it with: {enable}", yellow=True
        )


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[S3Endpoint]:
    with start_moto() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    """fake-gcs-server on a free loopback port, for the whole session."""
    with start_gcs() as emulator:
        yield emulator


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteEmulator]:
    """Azurite's blob service on a free loopback port, for the whole session."""
    with start_azurite(tmp_path_factory.mktemp("azurite")) as emulator:
        yield emulator


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    """A throwaway PostgreSQL server for the whole session (each test takes a schema of its
    own with ``pg_server.new_url()``)."""
    with start_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZkServer]:
    """A throwaway standalone ZooKeeper for the whole session (each test writes under a
    chroot of its own)."""
    with start_zookeeper() as server:
        yield server


@pytest.fixture()
def pg_url(pg_server: PgServer) -> str:
    """A metadata URL on a fresh, empty schema of the session's PostgreSQL server."""
    return pg_server.new_url()


@pytest.fixture(scope="session")
def rgw_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    from devservers import ceph_rgw

    with ceph_rgw.start_rgw(tmp_path_factory.mktemp("rgw")) as endpoint:
        yield endpoint


@pytest.fixture(scope="session", params=S3_SERVERS)
def s3_endpoint(request: pytest.FixtureRequest) -> S3Endpoint:
    """An S3 server over HTTP: moto, then RGW (each started once per session)."""
    endpoint: S3Endpoint = request.getfixturevalue(f"{request.param}_endpoint")
    return endpoint


@pytest.fixture()
def s3_bucket(s3_endpoint: S3Endpoint) -> str:
    """A fresh, empty bucket on the current S3 server."""
    return s3_endpoint.new_bucket()


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read the developer's AWS config or credentials."""
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
