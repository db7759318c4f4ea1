"""Pure planning helpers of the Spark reader (no Spark needed): pruning, options, descriptors."""

from __future__ import annotations

import pickle

import pytest

from offloader.errors import ConfigError
from offloader.read.objects import BlockRef
from offloader.spark.entry_filter import EntryFilter
from offloader.spark.plan import BlockTask, StoreSpec, parse_ledger_pairs

UUID = "6f1c2a3b-0000-4000-8000-000000000001"


def _ref(ledger: int, first: int, last: int) -> BlockRef:
    return BlockRef(ledger, UUID, 0, 0, 100, first, last, None)


@pytest.mark.parametrize(
    ("column", "op", "value", "keeps"),
    [
        ("ledger_id", "=", 7, True),
        ("ledger_id", "=", 8, False),
        ("ledger_id", "in", [1, 7], True),
        ("ledger_id", "in", [], False),
        ("entry_id", "=", 10, True),
        ("entry_id", "=", 20, True),
        ("entry_id", "=", 21, False),
        ("entry_id", ">", 20, False),
        ("entry_id", ">=", 20, True),
        ("entry_id", "<", 10, False),
        ("entry_id", "<=", 10, True),
        ("entry_id", ">", 19.5, True),
        ("entry_id", "<", 10.5, True),
        ("entry_id", "in", [3, 25], False),
        ("entry_id", "in", [3, 15], True),
        ("entry_id", "=", None, False),
    ],
)
def test_block_pruning(column: str, op: str, value: object, keeps: bool) -> None:
    assert EntryFilter().and_(column, op, value).keeps_block(_ref(7, 10, 20)) is keeps


def test_conjunction_and_entry_filter() -> None:
    f = EntryFilter().and_("entry_id", ">=", 12).and_("entry_id", "<", 15)
    assert [e for e in range(10, 21) if f.keeps_entry(e)] == [12, 13, 14]
    assert not f.and_("entry_id", ">", 30).keeps_block(_ref(7, 0, 100))
    assert EntryFilter.from_options([7], (15, 16)).keeps_block(_ref(7, 10, 20))
    assert not EntryFilter.from_options([8], None).keeps_block(_ref(7, 10, 20))
    with pytest.raises(ConfigError):
        EntryFilter().and_("payload", "=", 1)


def test_ledger_pairs_option() -> None:
    assert parse_ledger_pairs(f"12:{UUID}, 13:{UUID.upper()}") == [(12, UUID), (13, UUID)]
    for bad in ("12", f"x:{UUID}", "12:not-a-uuid"):
        with pytest.raises(ConfigError):
            parse_ledger_pairs(bad)


def test_descriptors_are_picklable_and_carry_no_credentials() -> None:
    task = BlockTask(StoreSpec("s3://bucket/prefix", "http://127.0.0.1:9000"), _ref(7, 0, 9), "t")
    assert pickle.loads(pickle.dumps(task)) == task
    assert "bucket" in repr(task) and "ledger 7" in repr(task)
    with pytest.raises(ConfigError) as info:
        StoreSpec("s3://AKIA:secret@bucket")
    assert "secret" not in str(info.value)
