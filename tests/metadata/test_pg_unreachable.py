"""Issue 34 item 8: PostgreSQL down is said as it is. A command that changes nothing (a read, a
connection that cannot be made, a ``BEGIN`` never sent) says the metadata server is unreachable,
naming it as ``postgresql://host:port/db`` without the URL's user or password, and claims no
change; only a change cut off inside its transaction says it was not committed.

A dedicated throwaway server (the session's one stays up for the other tests) is stopped with
``pg_ctl stop -m immediate``, as the restart tests do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.postgres import PgServer, start_postgres
from offloader.errors import MetadataUnavailable
from offloader.metadata.postgres.db import PgDatabase
from offloader.metadata.postgres.store import PgMetadataStore
from tests.cli.helpers import one_line_error, run

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    with start_postgres() as server:
        yield server


@pytest.fixture()
def server(own_server: PgServer) -> Iterator[PgServer]:
    """The module's server, running at the start of the test and again after it."""
    yield own_server
    if own_server.pg_ctl("status", check=False).returncode != 0:
        own_server.start()


def _with_password(server: PgServer, url: str) -> str:
    """The URL with a password in it (trust authentication ignores it), to check that no
    message shows it."""
    return url.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t@")


def _where(server: PgServer) -> str:
    return f"postgresql://127.0.0.1:{server.port}/postgres"


def _assert_unreachable(message: str, server: PgServer) -> None:
    assert f"metadata server {_where(server)} is unreachable (" in message, message
    assert message.endswith("retry when the server is back"), message
    assert "s3cr3t" not in message and "postgres@" not in message
    assert "committed" not in message and "change" not in message


def test_opening_a_store_on_a_stopped_server(server: PgServer) -> None:
    url = _with_password(server, server.new_url())
    server.stop("immediate")
    with pytest.raises(MetadataUnavailable) as info:
        PgMetadataStore(url)
    _assert_unreachable(str(info.value), server)


def test_a_read_after_the_server_stopped(server: PgServer) -> None:
    store = PgMetadataStore(_with_password(server, server.new_url()))
    try:
        store.create_namespace("tenant/ns", 1)
        server.stop("immediate")
        with pytest.raises(MetadataUnavailable) as info:
            store.list_namespaces()
        _assert_unreachable(str(info.value), server)
        server.start()
        assert [n.name for n in store.list_namespaces()] == ["tenant/ns"]  # reconnected
    finally:
        store.close()


def test_a_read_cut_off_inside_its_transaction(server: PgServer) -> None:
    db = PgDatabase(server.new_url(), migrations=())
    try:
        with pytest.raises(MetadataUnavailable) as info, db.read() as cur:
            cur.execute("SELECT 1")
            server.stop("immediate")
            cur.execute("SELECT 1")
        _assert_unreachable(str(info.value), server)
    finally:
        db.close()


def test_a_change_cut_off_inside_its_transaction_was_not_committed(server: PgServer) -> None:
    db = PgDatabase(server.new_url(), migrations=())
    try:
        with pytest.raises(MetadataUnavailable) as info, db.write() as cur:
            cur.execute("SELECT 1")
            server.stop("immediate")
            cur.execute("SELECT 1")
        message = str(info.value)
        assert f"metadata server {_where(server)} is unavailable (" in message
        assert "the change in progress was not committed" in message
    finally:
        db.close()


@pytest.mark.parametrize(
    "command",
    [
        ("topics", "list"),
        ("namespaces", "list"),
        ("kafka", "status"),
        ("kafka", "get-retention", "clicks"),
        ("namespaces", "create", "tenant/ns"),  # a change that never began
    ],
)
def test_the_cli_says_unreachable_in_one_line(
    server: PgServer, tmp_path: Path, command: tuple[str, ...]
) -> None:
    url = _with_password(server, server.new_url())
    server.stop("immediate")
    result = run(tmp_path, "--metadata", url, *command)
    line = one_line_error(result)
    _assert_unreachable(line, server)
