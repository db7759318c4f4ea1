"""The decisions both metadata backends share (``offloader/metadata/rules.py``).

The dialect and the attempt filter are checked as pure functions (the SQL text each backend
gets); then one script of misuses runs on both backends, which must refuse every step with the
same error type and the same message, word for word.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from offloader.errors import MetadataError, OffloadConflict
from offloader.metadata import rules
from offloader.metadata.base import DriverMetadata, LedgerRecord, MetadataStore, OffloadAttempt
from offloader.policies import NamespacePolicies
from tests.metadata.backends import BACKENDS

NS = "public/default"
TOPIC = "persistent://public/default/orders"
DRIVER = DriverMetadata("aws-s3", {"store_url": "s3://b/p", "bucket": "b"})
KEYS = {"data_key": "d", "index_key": "d-index"}


def test_dialects_write_their_placeholders() -> None:
    assert rules.SQLITE.marks(3) == "?, ?, ?"
    assert rules.POSTGRES.marks(2) == "%s, %s"
    assert rules.SQLITE.assignments(["a", "b"]) == "a = ?, b = ?"
    assert rules.POSTGRES.assignments(["a"]) == "a = %s"
    assert rules.SQLITE.one_of("state", ["A", "B"]) == ("state IN (?, ?)", ["A", "B"])
    assert rules.POSTGRES.one_of("state", ["A", "B"]) == ("state = ANY(%s)", [["A", "B"]])
    assert rules.SQLITE.one_of("state", []) == ("state IN ()", [])


def test_attempt_filter() -> None:
    assert rules.attempt_filter(rules.SQLITE, ledger_id=None, topic=None, states=None) == ("", [])
    where, args = rules.attempt_filter(
        rules.SQLITE, ledger_id=7, topic="t", states=["FAILED", "CLEANED"]
    )
    assert where == " WHERE ledger_id = ? AND topic = ? AND state IN (?, ?)"
    assert args == [7, "t", "FAILED", "CLEANED"]
    where, args = rules.attempt_filter(rules.POSTGRES, ledger_id=None, topic="t", states=["FAILED"])
    assert (where, args) == (" WHERE topic = %s AND state = ANY(%s)", ["t", ["FAILED"]])
    with pytest.raises(MetadataError, match=r"unknown attempt state\(s\): \['NOPE'\]"):
        rules.attempt_filter(rules.SQLITE, ledger_id=None, topic=None, states=["NOPE"])  # type: ignore[list-item]


def _ledger(state: str, closed: tuple[int, int, int] | None = None) -> LedgerRecord:
    closed_ms, entries, size = closed or (None, 0, 0)
    return LedgerRecord(3, TOPIC, entries, size, 1, closed_ms, state)  # type: ignore[arg-type]


def test_close_and_completion_decisions() -> None:
    assert rules.is_repeated_close(_ledger("CLOSED", (5, 2, 20)), (5, 2, 20))
    assert not rules.is_repeated_close(_ledger("OPEN"), (5, 2, 20))
    with pytest.raises(MetadataError, match="ledger 3 is CLOSED, not OPEN"):
        rules.is_repeated_close(_ledger("CLOSED", (5, 2, 20)), (6, 2, 20))
    attempt = OffloadAttempt("u", 3, TOPIC, "STARTED", 1, None, None, DRIVER, "d", "i")
    gone = rules.decide_completion(None, attempt, "u", 3)
    assert gone.lost == "ledger 3 no longer exists; offload u is not claimed" and not gone.now
    with pytest.raises(OffloadConflict, match="belongs to ledger 3, not 4"):
        rules.check_attempt_of(attempt, 4)


def _refusal(step: Callable[[], object]) -> tuple[str, str] | None:
    try:
        step()
    except MetadataError as exc:
        return type(exc).__name__, str(exc)
    return None


#: the hint every "namespace does not exist" carries
CREATE_XY = "create it with: offloader namespaces create x/y"

#: what each step of the script below must raise, on every backend (None: it succeeds)
EXPECTED: list[tuple[str, str] | None] = [
    None,
    ("AlreadyExists", "namespace public/default already exists"),
    ("NotFound", f"namespace x/y does not exist ({CREATE_XY})"),
    ("NotFound", f"namespace x/y does not exist ({CREATE_XY})"),
    None,
    ("AlreadyExists", f"topic {TOPIC} already exists"),
    ("NotFound", "topic persistent://public/default/nope does not exist"),
    ("NotFound", "topic persistent://public/default/nope does not exist"),
    ("NotFound", "topic persistent://public/default/nope does not exist"),
    ("NamespaceNotEmpty", "namespace public/default still has 1 topic(s)"),
    ("InvalidLedgerState", "ledger id -1 is negative"),
    None,
    ("AlreadyExists", "ledger 10 already exists"),
    ("InvalidLedgerState", f"ledger 5 is not newer than ledger 10 of {TOPIC}"),
    ("NotFound", "ledger 99 does not exist"),
    ("InvalidLedgerState", "ledger 10 is OPEN; only a closed ledger can be offloaded"),
    None,
    None,
    ("InvalidLedgerState", "ledger 10 is CLOSED, not OPEN"),
    ("InvalidLedgerState", "ledger 10 is CLOSED, not OPEN"),
    None,
    ("AlreadyExists", "offload attempt u1 already exists"),
    ("InvalidLedgerState", "offload u1 of ledger 10 is not complete; the local copy stays"),
    ("OffloadConflict", "Existing UUID u1 of ledger 10 does not match u0"),
    ("OffloadConflict", "offload attempt u1 belongs to ledger 10, not 11"),
    ("OffloadConflict", "offload attempt u1 belongs to ledger 10, not 11"),
    ("NotFound", "offload attempt nope does not exist"),
    ("MetadataError", "unknown attempt state(s): ['BOGUS']"),
    ("MetadataError", "unknown offload status 'BOGUS'"),
    ("NotFound", "no completed offload attempt u1"),
    ("OffloadConflict", "offload u1 is still claimed by its ledger; its objects must stay"),
    None,
    ("OffloadConflict", "Existing UUID u2 of ledger 10 does not match u1"),
    None,
    None,
    ("OffloadAlreadyComplete", "ledger 10 is already offloaded (uuid u2)"),
    ("OffloadConflict", "offload attempt u2 already completed; its objects must stay"),
    None,
    None,
    None,
    ("OffloadConflict", "offload attempt v1 is FAILED"),
    None,
    ("NotFound", "ledger 10 was deleted"),
    ("OffloadConflict", "ledger 10 was deleted; offload u2 is not claimed"),
    ("NotFound", "ledger 10 does not exist"),
]


def _script(store: MetadataStore) -> list[Callable[[], object]]:
    nope = "persistent://public/default/nope"
    return [
        lambda: store.create_namespace(NS, 1),
        lambda: store.create_namespace(NS, 2),
        lambda: store.get_namespace("x/y"),
        lambda: store.set_policies("x/y", NamespacePolicies()),
        lambda: store.create_topic(TOPIC, 3),
        lambda: store.create_topic(TOPIC, 4),
        lambda: store.get_topic(nope),
        lambda: store.get_topic_policies(nope),
        lambda: store.get_offload_status(nope),
        lambda: store.delete_namespace(NS),
        lambda: store.add_ledger(TOPIC, -1, 5),
        lambda: store.add_ledger(TOPIC, 10, 5),
        lambda: store.add_ledger(TOPIC, 10, 6),
        lambda: store.add_ledger(TOPIC, 5, 6),
        lambda: store.get_ledger(99),
        lambda: store.begin_offload(10, "u1", DRIVER, 7, **KEYS),
        lambda: store.close_ledger(10, 8, 3, 30),
        lambda: store.close_ledger(10, 8, 3, 30),  # the same close again: a no-op
        lambda: store.close_ledger(10, 9, 3, 30),
        lambda: store.update_ledger_stats(10, 4, 40),
        lambda: store.begin_offload(10, "u1", DRIVER, 10, **KEYS),
        lambda: store.begin_offload(10, "u1", DRIVER, 11, **KEYS),
        lambda: store.mark_local_deleted(10, "u1"),
        lambda: store.mark_local_deleted(10, "u0"),
        lambda: store.complete_offload(11, "u1", 12, data_size=1, index_size=1),
        lambda: store.fail_offload(11, "u1", 12, "boom"),
        lambda: store.get_attempt("nope"),
        lambda: store.list_attempts(states=["BOGUS"]),  # type: ignore[list-item]
        lambda: store.set_offload_status(TOPIC, "BOGUS", 13),  # type: ignore[arg-type]
        lambda: store.record_index_rewrite("u1", 1, 2),
        lambda: store.mark_attempt_cleaned("u1", 13),
        lambda: store.begin_offload(10, "u2", DRIVER, 14, **KEYS),
        lambda: store.complete_offload(10, "u1", 15, data_size=1, index_size=1),
        lambda: store.complete_offload(10, "u2", 16, data_size=1, index_size=1),
        lambda: store.complete_offload(10, "u2", 17, data_size=1, index_size=1),  # repeated
        lambda: store.begin_offload(10, "u3", DRIVER, 18, **KEYS),
        lambda: store.fail_offload(10, "u2", 19, "late"),
        lambda: store.add_ledger(TOPIC, 11, 20),
        lambda: store.close_ledger(11, 21, 1, 10),
        lambda: (
            store.begin_offload(11, "v1", DRIVER, 22, **KEYS),
            store.fail_offload(11, "v1", 23, "boom"),
        ),
        lambda: store.complete_offload(11, "v1", 24, data_size=1, index_size=1),
        lambda: store.mark_ledger_deleted(10),
        lambda: store.begin_offload(10, "u4", DRIVER, 25, **KEYS),
        lambda: store.mark_local_deleted(10, "u2"),
        lambda: store.delete_topic(TOPIC) and store.get_ledger(10),
    ]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_both_backends_refuse_alike(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = BACKENDS[backend].open(BACKENDS[backend].new_location(request, tmp_path))
    try:
        got = [_refusal(step) for step in _script(store)]
    finally:
        store.close()
    for n, (want, had) in enumerate(zip(EXPECTED, got, strict=True)):
        assert had == want, f"step {n} on {backend}"
