"""The shipped schema steps of both backends never change (only new steps are appended).

The SQLite and PostgreSQL migrations are built from tables written once
(:mod:`offloader.metadata.ledger_schema`, ``kafka_schema``, ``export_schema``) and, for
PostgreSQL, ported by :func:`offloader.metadata.postgres.schema.ported`; an existing database
only keeps working if every step it already ran is still the same text at the same position.
"""

from __future__ import annotations

import hashlib

from offloader.metadata.postgres.schema import PG_MIGRATIONS, ported
from offloader.metadata.sqlite.db import MIGRATIONS

#: sha256 of each shipped step (its statements joined by NUL), in order
SQLITE_SHIPPED = (
    "3a9aeda189eec9f2f4757b1ba22788e80b8fa960fd92b3cb55c45b22537a3f34",
    "e8c1748632ebda45d85958e943a45f9d86f2de223b5f83e1ac4eb4922735a8b0",
    "212a503035235c989c5e39b56006090251de240e0f62032f8ef17fce205213eb",
    "c7dff57f0b10ee8ba9552c1d53a4da3934f4e294f3ebfc2ff972aceb01d16df4",
    "883fb1353bc8fb760ec54e419f55239f9f5a31641dbb7dbcee2ca66d58b997cd",
    "eb5f38bb89a8442edc4a8447263784cb6022920e1a5156acaee3f09e12694a40",
    "b101806a0b8f141e2d73f9b4579c5da6ff1ca93c097f4da01ce258551ff5db74",
    "8da0dc25e98685fd3b992c0d4bae4b86ec567fb5ee3894f133764a8a2464e124",
    "3a04581c1ce8e1978f5fe54e1337d0e0436482e50c55cd83a993daed394462d8",
)
PG_SHIPPED = (
    "dee8786a9f5cfcb4f1a3d24af7e51cf220625bb2811035d8a529e7487b3abeee",
    "00d7b8848e55597fee81a53e50bbf421b58a6a2b4e6f15e3ce455a16b0171931",
    "75fbd6e8324b71a7e6198bd9cb30cbbaa9522c813cb339aa4ed2c4a4f622ce59",
    "b101806a0b8f141e2d73f9b4579c5da6ff1ca93c097f4da01ce258551ff5db74",
    "8da0dc25e98685fd3b992c0d4bae4b86ec567fb5ee3894f133764a8a2464e124",
    "3a04581c1ce8e1978f5fe54e1337d0e0436482e50c55cd83a993daed394462d8",
)


def _digests(migrations: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    return tuple(hashlib.sha256("\0".join(step).encode()).hexdigest() for step in migrations)


def test_sqlite_shipped_steps_are_unchanged() -> None:
    assert _digests(MIGRATIONS)[: len(SQLITE_SHIPPED)] == SQLITE_SHIPPED


def test_postgres_shipped_steps_are_unchanged() -> None:
    assert _digests(PG_MIGRATIONS)[: len(PG_SHIPPED)] == PG_SHIPPED


def test_ported_ddl_uses_postgres_types() -> None:
    (statement,) = ported(
        (
            "CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL, "
            "done INTEGER NOT NULL DEFAULT 0, other INTEGER NOT NULL DEFAULT 0, name TEXT)",
        ),
        flags=("done",),
    )
    assert statement == (
        "CREATE TABLE t (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, "
        "done BOOLEAN NOT NULL DEFAULT FALSE, other BIGINT NOT NULL DEFAULT 0, name TEXT)"
    )
