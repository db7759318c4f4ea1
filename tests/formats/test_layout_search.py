"""plan_blocks and fine_offsets_for find block ends and fine points by binary search over
prefix sums; these tests hold them to the one-step-per-entry loops they replace (Pulsar's)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from formats.extension import fine_offsets_for
from formats.layout import BlockPlan, block_size_for, plan_blocks
from formats.wire import BLOCK_HEADER_LEN, ENTRY_HEADER_LEN


def _pulsar_plan(lengths: Sequence[int], max_block: int) -> list[BlockPlan]:
    count, total = len(lengths), sum(lengths)
    plans: list[BlockPlan] = []
    start = written = offset = 0
    while start < count:
        size = block_size_for(count - start, total - written, max_block)
        pos, i, payload = BLOCK_HEADER_LEN, start, 0
        while i < count and pos + ENTRY_HEADER_LEN + lengths[i] <= size:
            pos += ENTRY_HEADER_LEN + lengths[i]
            payload += lengths[i]
            i += 1
        plans.append(BlockPlan(len(plans) + 1, start, i - 1, offset, size, payload))
        offset, written, start = offset + size, written + payload, i
    return plans


def _stepwise_fine(
    plans: Sequence[BlockPlan], lengths: Sequence[int], interval: int
) -> list[tuple[int, int]]:
    points = []
    for plan in plans:
        pos = last = plan.offset + BLOCK_HEADER_LEN
        for entry_id in range(plan.first_entry_id, plan.last_entry_id + 1):
            if pos - last >= interval:
                points.append((entry_id, pos))
                last = pos
            pos += ENTRY_HEADER_LEN + lengths[entry_id]
    return points


@settings(max_examples=400)
@given(
    max_block=st.integers(141, 2000),
    data=st.data(),
    interval=st.sampled_from([0, 1, 17, 48, 300, 5000]),
)
def test_the_search_plans_what_the_loop_plans(
    max_block: int, data: st.DataObject, interval: int
) -> None:
    largest = max_block - 140
    sizes = st.one_of(st.just(0), st.integers(0, min(64, largest)), st.integers(0, largest))
    lengths = data.draw(st.lists(sizes, min_size=1, max_size=200))
    plans = plan_blocks(lengths, max_block)
    assert plans == _pulsar_plan(lengths, max_block)
    assert fine_offsets_for(plans, lengths, interval) == _stepwise_fine(plans, lengths, interval)
