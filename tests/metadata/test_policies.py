"""NamespacePolicies and the pure policy algorithms: Pulsar's examples as tables, plus
hypothesis properties of the automatic offload selection and the size-threshold position."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloader.errors import ConfigError
from offloader.policies import (
    DEFAULT_DELETION_LAG_MS,
    LedgerView,
    NamespacePolicies,
    PrefixPlan,
    ledgers_due_for_local_deletion,
    ledgers_to_trim_for_retention,
    offload_prefix_candidates,
    select_ledgers_for_auto_offload,
    size_threshold_position,
)

NOW = 1_000_000


def ledger(
    ledger_id: int,
    size: int = 100,
    closed_ms: int | None = 1,
    *,
    entries: int | None = None,
    complete: bool = False,
    local_deleted: bool = False,
    offloaded_ms: int | None = None,
) -> LedgerView:
    return LedgerView(
        ledger_id=ledger_id,
        entries=(1 if size else 0) if entries is None else entries,
        size_bytes=size,
        closed_ms=closed_ms,
        offload_complete=complete,
        local_deleted=local_deleted,
        offloaded_ms=offloaded_ms,
    )


def by_size(threshold: int) -> NamespacePolicies:
    return NamespacePolicies(offload_threshold_bytes=threshold)


# --- NamespacePolicies --------------------------------------------------------------------
def test_defaults_are_pulsars() -> None:
    policies = NamespacePolicies()
    assert policies.offload_threshold_bytes == -1
    assert policies.offload_threshold_seconds == -1
    assert policies.offload_deletion_lag_ms is None
    assert policies.effective_deletion_lag_ms == DEFAULT_DELETION_LAG_MS == 14_400_000
    assert (policies.retention_size_bytes, policies.retention_time_seconds) == (0, 0)
    assert policies.read_priority == "tiered-storage-first" and not policies.prefers_local
    assert not policies.auto_offload_enabled


def test_read_priority_aliases() -> None:
    # Pulsar's names are canonical; local-first (the name earlier versions stored) is an alias
    assert NamespacePolicies(read_priority="bookkeeper-first").read_priority == "bookkeeper-first"
    assert NamespacePolicies(read_priority="local-first").read_priority == "bookkeeper-first"
    assert NamespacePolicies(read_priority="LOCAL-FIRST").prefers_local
    assert NamespacePolicies(read_priority="bookkeeper-first").prefers_local
    with pytest.raises(ConfigError, match="read priority"):
        NamespacePolicies(read_priority="remote-preferred")


@pytest.mark.parametrize(
    ("lag", "effective"), [(None, 14_400_000), (0, 0), (60_000, 60_000), (-1, None)]
)
def test_effective_deletion_lag(lag: int | None, effective: int | None) -> None:
    assert NamespacePolicies(offload_deletion_lag_ms=lag).effective_deletion_lag_ms == effective


def test_invalid_values_are_refused() -> None:
    with pytest.raises(ConfigError):
        NamespacePolicies(offload_threshold_bytes="10M")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        NamespacePolicies(retention_time_seconds=True)
    with pytest.raises(ConfigError):
        NamespacePolicies(offload_deletion_lag_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        NamespacePolicies().replace(read_priority="nope")


@pytest.mark.parametrize(
    "field",
    [
        "offload_threshold_bytes",
        "offload_threshold_seconds",
        "offload_deletion_lag_ms",
        "retention_size_bytes",
        "retention_time_seconds",
    ],
)
def test_values_beyond_64_bits_are_refused(field: str) -> None:
    assert getattr(NamespacePolicies(**{field: 2**63 - 1}), field) == 2**63 - 1
    assert getattr(NamespacePolicies(**{field: -(2**63)}), field) == -(2**63)
    for value in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(ConfigError, match="signed 64-bit"):
            NamespacePolicies(**{field: value})
        with pytest.raises(ConfigError, match="signed 64-bit"):
            NamespacePolicies().replace(**{field: value})


def test_replace() -> None:
    policies = NamespacePolicies().replace(offload_threshold_seconds=0)
    assert policies.offload_threshold_seconds == 0 and policies.auto_offload_enabled


# --- automatic offload ---------------------------------------------------------------------
AUTO_CASES = [
    # (ledgers, policies, expected): ids are ascending; None closed_ms = the open ledger
    pytest.param(
        [ledger(1), ledger(2), ledger(3, closed_ms=None)],
        NamespacePolicies(),
        [],
        id="both-thresholds-off",
    ),
    pytest.param(
        [ledger(1), ledger(2), ledger(3), ledger(4, closed_ms=None)],
        by_size(0),
        [1, 2, 3],
        id="zero-offloads-every-closed-ledger",
    ),
    pytest.param(
        [ledger(1), ledger(2), ledger(3), ledger(4), ledger(5, 50, None)],
        by_size(150),
        [1, 2, 3],
        id="the-ledger-crossing-the-threshold-is-offloaded-too",
    ),
    pytest.param(
        [ledger(1), ledger(2), ledger(3), ledger(4), ledger(5, 10**9, None)],
        by_size(200),
        [1, 2],
        id="open-ledger-not-counted",
    ),
    pytest.param(
        [ledger(1), ledger(2), ledger(3, complete=True), ledger(4, closed_ms=None)],
        by_size(150),
        [1, 2],
        id="complete-ledgers-count-but-are-not-selected",
    ),
    pytest.param(
        [ledger(1), ledger(2, 0), ledger(3), ledger(4, closed_ms=None)],
        by_size(0),
        [1, 3],
        id="empty-ledgers-skipped",
    ),
    pytest.param(
        [
            ledger(1, closed_ms=NOW - 60_000),
            ledger(2, closed_ms=NOW - 59_999),
            ledger(3, closed_ms=None),
        ],
        NamespacePolicies(offload_threshold_seconds=60),
        [1],
        id="time-threshold-from-close-time-inclusive",
    ),
    pytest.param(
        [ledger(1, closed_ms=NOW - 3_600_000), ledger(2, closed_ms=NOW), ledger(3, 10, NOW)],
        NamespacePolicies(offload_threshold_bytes=500, offload_threshold_seconds=3600),
        [1],
        id="either-trigger",
    ),
    pytest.param(
        [ledger(3), ledger(1), ledger(2)],
        by_size(0),
        [1, 2, 3],
        id="unsorted-input-oldest-first-output",
    ),
]


@pytest.mark.parametrize(("ledgers", "policies", "expected"), AUTO_CASES)
def test_select_ledgers_for_auto_offload(
    ledgers: list[LedgerView], policies: NamespacePolicies, expected: list[int]
) -> None:
    assert select_ledgers_for_auto_offload(ledgers, policies, NOW) == expected


@st.composite
def ledger_lists(draw: st.DrawFn) -> list[LedgerView]:
    count = draw(st.integers(0, 12))
    ids = sorted(draw(st.sets(st.integers(0, 10_000), min_size=count, max_size=count)))
    views = []
    for index, ledger_id in enumerate(ids):
        is_last = index == len(ids) - 1
        is_open = is_last and draw(st.booleans())
        size = draw(st.integers(0, 1000))
        complete = not is_open and size > 0 and draw(st.booleans())
        views.append(
            LedgerView(
                ledger_id=ledger_id,
                entries=draw(st.integers(1, 50)) if size else 0,
                size_bytes=size,
                closed_ms=None if is_open else draw(st.integers(0, NOW)),
                offload_complete=complete,
                offloaded_ms=NOW if complete else None,
            )
        )
    return views


def _eligible(ledgers: list[LedgerView]) -> list[int]:
    return [
        v.ledger_id
        for v in ledgers
        if v.closed_ms is not None and v.size_bytes > 0 and v.entries > 0 and not v.offload_complete
    ]


@given(ledger_lists(), st.integers(-1, 3000), st.integers(-1, 2000))
def test_auto_offload_selection_properties(
    ledgers: list[LedgerView], threshold_bytes: int, threshold_seconds: int
) -> None:
    policies = NamespacePolicies(
        offload_threshold_bytes=threshold_bytes, offload_threshold_seconds=threshold_seconds
    )
    selected = select_ledgers_for_auto_offload(ledgers, policies, NOW)
    assert selected == sorted(set(selected))  # oldest first, no repeats
    assert set(selected) <= set(_eligible(ledgers))  # never open, empty or complete
    if threshold_bytes < 0 and threshold_seconds < 0:
        assert selected == []


@given(ledger_lists(), st.sampled_from([-1, 0, 500]))
def test_threshold_zero_selects_every_eligible_ledger(
    ledgers: list[LedgerView], threshold_seconds: int
) -> None:
    by_bytes = NamespacePolicies(
        offload_threshold_bytes=0, offload_threshold_seconds=threshold_seconds
    )
    assert select_ledgers_for_auto_offload(ledgers, by_bytes, NOW) == _eligible(ledgers)
    by_time = NamespacePolicies(offload_threshold_seconds=0)
    assert select_ledgers_for_auto_offload(ledgers, by_time, NOW) == _eligible(ledgers)


@given(ledger_lists(), st.integers(0, 3000), st.integers(0, 3000))
def test_size_selection_is_a_prefix_and_shrinks_as_the_threshold_grows(
    ledgers: list[LedgerView], a: int, b: int
) -> None:
    low, high = sorted((a, b))
    selected_low = select_ledgers_for_auto_offload(ledgers, by_size(low), NOW)
    selected_high = select_ledgers_for_auto_offload(ledgers, by_size(high), NOW)
    assert set(selected_high) <= set(selected_low)
    eligible = _eligible(ledgers)
    if selected_low:  # every eligible ledger older than a selected one is selected
        assert selected_low == [i for i in eligible if i <= selected_low[-1]]


@given(ledger_lists(), st.integers(0, 2000))
def test_time_selection_is_by_close_time(ledgers: list[LedgerView], seconds: int) -> None:
    policies = NamespacePolicies(offload_threshold_seconds=seconds)
    expected = [
        v.ledger_id
        for v in ledgers
        if v.ledger_id in _eligible(ledgers)
        and v.closed_ms is not None
        and NOW - v.closed_ms >= seconds * 1000
    ]
    assert select_ledgers_for_auto_offload(ledgers, policies, NOW) == expected


# --- offload-prefix ------------------------------------------------------------------------
PREFIX_LEDGERS = [ledger(1), ledger(2, complete=True), ledger(3, 0), ledger(4), ledger(5, 0, None)]


@pytest.mark.parametrize(
    ("position_ledger", "expected"),
    [
        (4, PrefixPlan([1], 4)),  # complete (2) and empty (3) ledgers are skipped
        (5, PrefixPlan([1, 4], 5)),  # up to the current ledger: never the current one
        (99, PrefixPlan([1, 4], 5)),
        (1, PrefixPlan([], 1)),
        (0, PrefixPlan([], 1)),
    ],
)
def test_offload_prefix_candidates(position_ledger: int, expected: PrefixPlan) -> None:
    assert offload_prefix_candidates(PREFIX_LEDGERS, position_ledger) == expected


def test_offload_prefix_edge_cases() -> None:
    assert offload_prefix_candidates([], 5) == PrefixPlan([], None)
    assert offload_prefix_candidates([ledger(7, closed_ms=None)], 8) == PrefixPlan([], 7)
    # the last ledger is the current one even when closed
    assert offload_prefix_candidates([ledger(1), ledger(2)], 9) == PrefixPlan([1], 2)


@given(ledger_lists(), st.integers(0, 10_001))
def test_offload_prefix_properties(ledgers: list[LedgerView], position: int) -> None:
    plan = offload_prefix_candidates(ledgers, position)
    assert plan.ledger_ids == sorted(plan.ledger_ids)
    assert set(plan.ledger_ids) <= set(_eligible(ledgers))
    assert all(i < position for i in plan.ledger_ids)
    if ledgers:
        assert ledgers[-1].ledger_id not in plan.ledger_ids
        assert plan.first_retained_ledger_id is not None
        assert all(i < plan.first_retained_ledger_id for i in plan.ledger_ids)


# --- topics offload --size-threshold -------------------------------------------------------
@pytest.mark.parametrize(
    ("sizes", "threshold", "expected"),
    [
        ([100, 100, 50], 120, 3),  # keeps the current ledger (50 bytes) local
        ([100, 100, 50], 200, 2),  # 150 kept; adding ledger 1 would pass 200
        ([100, 100, 50], 250, None),  # everything fits: "Nothing to offload"
        ([100, 100, 50], 249, 2),
        ([10, 500], 100, 2),  # the current ledger alone is over: offload all before it
        ([100, 0], 0, 2),
        ([0, 0], 0, None),
        ([], 10, None),
    ],
)
def test_size_threshold_position(sizes: list[int], threshold: int, expected: int | None) -> None:
    ledgers = [
        ledger(i + 1, size, None if i == len(sizes) - 1 else 1) for i, size in enumerate(sizes)
    ]
    assert size_threshold_position(ledgers, threshold) == expected


@given(ledger_lists(), st.integers(0, 5000))
def test_size_threshold_position_properties(ledgers: list[LedgerView], threshold: int) -> None:
    position = size_threshold_position(ledgers, threshold)
    total = sum(v.size_bytes for v in ledgers)
    if position is None:
        assert total <= threshold
        return
    ids = [v.ledger_id for v in ledgers]
    kept = sum(v.size_bytes for v in ledgers if v.ledger_id >= position)
    assert kept <= threshold or position == ids[-1]
    index = ids.index(position)
    if index > 0:  # one more (older) ledger would not fit
        assert kept + ledgers[index - 1].size_bytes > threshold


# --- deletion lag --------------------------------------------------------------------------
def test_ledgers_due_for_local_deletion() -> None:
    ledgers = [
        ledger(1, complete=True, offloaded_ms=NOW - 1001),
        ledger(2, complete=True, offloaded_ms=NOW - 1000),  # exactly the lag: not yet
        ledger(3, complete=True, offloaded_ms=NOW - 5000, local_deleted=True),
        ledger(4, offloaded_ms=None),  # not offloaded
        ledger(5, complete=True, offloaded_ms=0),
        ledger(6, closed_ms=None),
    ]
    assert ledgers_due_for_local_deletion(ledgers, 1000, NOW) == [1, 5]
    assert ledgers_due_for_local_deletion(ledgers, None, NOW) == []
    assert ledgers_due_for_local_deletion(ledgers, 0, NOW) == [1, 2, 5]
    default_lag = NamespacePolicies().effective_deletion_lag_ms
    assert ledgers_due_for_local_deletion(ledgers, default_lag, NOW) == []


# --- retention --------------------------------------------------------------------------------
RETENTION_LEDGERS = [
    ledger(1, 100, NOW - 10_000),
    ledger(2, 100, NOW - 5_000, complete=True),  # offloaded ledgers count and are trimmed too
    ledger(3, 100, NOW - 1_000),
    ledger(4, 100, None),
]


@pytest.mark.parametrize(
    ("size", "seconds", "expected"),
    [
        (0, 0, []),  # not set: forever
        (-1, -1, []),  # Pulsar's "infinite"
        (400, 0, []),
        (399, 0, [1]),
        (250, 0, [1, 2]),
        (1, 0, [1, 2, 3]),  # never the current ledger
        (0, 5, [1]),  # closed more than 5 s ago (exactly 5 s is kept)
        (0, 1, [1, 2]),
        (350, 9, [1]),  # either limit
        (0, -1, []),
    ],
)
def test_ledgers_to_trim_for_retention(size: int, seconds: int, expected: list[int]) -> None:
    policies = NamespacePolicies(retention_size_bytes=size, retention_time_seconds=seconds)
    assert ledgers_to_trim_for_retention(RETENTION_LEDGERS, policies, NOW) == expected


def test_retention_trims_only_a_prefix() -> None:
    ledgers = [ledger(1, 10, NOW), ledger(2, 10, NOW - 100_000), ledger(3, 10, None)]
    policies = NamespacePolicies(retention_time_seconds=10)
    assert ledgers_to_trim_for_retention(ledgers, policies, NOW) == []


@given(ledger_lists(), st.integers(-1, 5000), st.integers(-1, 2000))
def test_retention_properties(ledgers: list[LedgerView], size: int, seconds: int) -> None:
    policies = NamespacePolicies(retention_size_bytes=size, retention_time_seconds=seconds)
    trimmed = ledgers_to_trim_for_retention(ledgers, policies, NOW)
    ids = [v.ledger_id for v in ledgers]
    assert trimmed == ids[: len(trimmed)]  # a prefix
    if ledgers:
        assert ids[-1] not in trimmed
    if size > 0 and seconds <= 0 and ledgers:
        kept = sum(v.size_bytes for v in ledgers[len(trimmed) :])
        stopped_early = len(trimmed) < len(ledgers) - 1
        assert kept <= size or not stopped_early or ledgers[len(trimmed)].closed_ms is None
