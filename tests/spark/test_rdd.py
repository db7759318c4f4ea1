"""offloaded_rdd: one partition per block, every entry exact, pruning fetches only needed blocks."""

from __future__ import annotations

from typing import Any

import pytest

from offloader.config import OffloadSettings
from offloader.spark import offloaded_rdd
from tests.spark.conftest import Dataset, records_digest

pytestmark = [pytest.mark.spark, pytest.mark.s3]

#: small ranged GETs, so multi-GET blocks are exercised with KiB-sized blocks
SMALL_BUFFER = OffloadSettings(read_buffer_size=1024)


def test_pairs_read_every_entry_one_partition_per_block(
    spark: Any, dataset: Dataset, aws_env: Any
) -> None:
    rdd = offloaded_rdd(
        spark.sparkContext,
        dataset.pairs,
        SMALL_BUFFER,
        store_url=dataset.store_url,
        endpoint_url=dataset.endpoint.url,
    )
    assert rdd.getNumPartitions() == dataset.block_count
    assert dataset.block_count > 30
    records = rdd.collect()
    assert len(records) == sum(len(lg.payloads) for lg in dataset.ledgers)
    assert records_digest(records) == dataset.expected()
    assert all(isinstance(r[3], bytes) for r in records)


def test_discover_reads_every_ledger(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    rdd = offloaded_rdd(
        spark.sparkContext,
        "discover",
        store_url=dataset.store_url,
        endpoint_url=dataset.endpoint.url,
    )
    assert rdd.getNumPartitions() == dataset.block_count
    assert records_digest(rdd.collect()) == dataset.expected()


def test_pruned_read_fetches_only_the_blocks_it_needs(
    spark: Any, dataset: Dataset, aws_env: Any
) -> None:
    sc = spark.sparkContext
    ledger = dataset.ledgers[0]  # 300 entries in 4 KiB blocks
    first, last = 100, 140
    needed = [b for b in ledger.blocks if b[1] >= first and b[0] <= last]
    assert 1 <= len(needed) < len(ledger.blocks) // 2
    gets = sc.accumulator(0)
    rdd = offloaded_rdd(
        sc,
        dataset.pairs,
        SMALL_BUFFER,
        store_url=dataset.store_url,
        endpoint_url=dataset.endpoint.url,
        ledger_ids=[ledger.ledger_id],
        entry_range=(first, last),
        get_counter=gets,
    )
    assert rdd.getNumPartitions() == len(needed)
    got = records_digest(rdd.collect())
    want = [r for r in dataset.expected([ledger.ledger_id]) if first <= r[2] <= last]
    assert got == want
    # every GET the executors made: one streamed ranged GET per needed block, nothing else
    assert gets.value == len(needed)

    full = sc.accumulator(0)
    offloaded_rdd(
        sc,
        dataset.pairs,
        SMALL_BUFFER,
        store_url=dataset.store_url,
        endpoint_url=dataset.endpoint.url,
        get_counter=full,
    ).count()
    assert full.value > 4 * gets.value


def test_default_read_buffer_is_one_get_per_small_block(
    spark: Any, dataset: Dataset, aws_env: Any
) -> None:
    gets = spark.sparkContext.accumulator(0)
    rdd = offloaded_rdd(
        spark.sparkContext,
        dataset.pairs,
        store_url=dataset.store_url,
        endpoint_url=dataset.endpoint.url,
        get_counter=gets,
    )
    assert rdd.count() == sum(len(lg.payloads) for lg in dataset.ledgers)
    assert gets.value == dataset.block_count
