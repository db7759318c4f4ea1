"""The offloaded-ledger DataFrame source: schema, partitions = blocks, exact rows, pushdown."""

from __future__ import annotations

from typing import Any

import pytest

from offloader.spark import register
from tests.spark.conftest import Dataset, records_digest

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def _reader(spark: Any, dataset: Dataset, **options: str) -> Any:
    register(spark)
    r = (
        spark.read.format("offloaded-ledger")
        .option("store", dataset.store_url)
        .option("endpoint", dataset.endpoint.url)
    )
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def _ledgers_option(dataset: Dataset) -> str:
    return ",".join(f"{lid}:{uid}" for lid, uid in dataset.pairs)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return records_digest([tuple(r) for r in df.collect()])


def test_schema_partitions_and_every_row(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    df = _reader(spark, dataset, ledgers=_ledgers_option(dataset))
    assert df.schema.simpleString() == (
        "struct<topic:string,ledger_id:bigint,entry_id:bigint,payload:binary>"
    )
    assert df.rdd.getNumPartitions() == dataset.block_count
    assert _rows(df) == dataset.expected()


def test_discover_and_group_by(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    from pyspark.sql import functions as F

    df = _reader(spark, dataset, discover="true")
    assert df.rdd.getNumPartitions() == dataset.block_count
    got = {
        r["ledger_id"]: (r["entries"], r["bytes"])
        for r in df.groupBy("ledger_id")
        .agg(F.count("*").alias("entries"), F.sum(F.length("payload")).alias("bytes"))
        .collect()
    }
    assert got == {
        lg.ledger_id: (len(lg.payloads), sum(len(p) for p in lg.payloads)) for lg in dataset.ledgers
    }


def test_pushdown_prunes_blocks_and_filters_rows(
    spark: Any, dataset: Dataset, aws_env: Any
) -> None:
    from pyspark.sql import functions as F

    df = _reader(spark, dataset, ledgers=_ledgers_option(dataset))
    ledger = dataset.ledgers[0]
    first, last = 100, 140
    needed = [b for b in ledger.blocks if b[1] >= first and b[0] <= last]
    pruned = df.filter(
        (F.col("ledger_id") == ledger.ledger_id)
        & (F.col("entry_id") >= first)
        & (F.col("entry_id") < last + 1)
    )
    assert pruned.rdd.getNumPartitions() == len(needed) < len(ledger.blocks)
    want = [r for r in dataset.expected([ledger.ledger_id]) if first <= r[2] <= last]
    assert _rows(pruned) == want

    two = [dataset.ledgers[1].ledger_id, dataset.ledgers[3].ledger_id]
    by_in = df.filter(F.col("ledger_id").isin(two) & (F.col("entry_id") > 10))
    blocks = [b for lg in dataset.ledgers if lg.ledger_id in two for b in lg.blocks if b[1] > 10]
    assert by_in.rdd.getNumPartitions() == len(blocks)
    assert _rows(by_in) == [r for r in dataset.expected(two) if r[2] > 10]

    # an unsupported filter (on payload) is left to Spark, the rest still prunes
    mixed = df.filter((F.col("ledger_id") == 5) & (F.length("payload") == 0))
    assert mixed.rdd.getNumPartitions() == len(dataset.ledgers[1].blocks)
    assert mixed.count() == sum(1 for p in dataset.ledgers[1].payloads if not p)


def test_option_pruning_without_pushdown(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    ledger = dataset.ledgers[0]
    df = _reader(
        spark,
        dataset,
        ledgers=_ledgers_option(dataset),
        pushdown="false",
        ledger_ids=str(ledger.ledger_id),
        entry_range="0:49",
    )
    needed = [b for b in ledger.blocks if b[0] <= 49]
    assert df.rdd.getNumPartitions() == len(needed)
    assert _rows(df) == [r for r in dataset.expected([ledger.ledger_id]) if r[2] <= 49]


def test_nothing_matches(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    from pyspark.sql import functions as F

    df = _reader(spark, dataset, ledgers=_ledgers_option(dataset))
    assert df.filter(F.col("ledger_id") == 123456).count() == 0
