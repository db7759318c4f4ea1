"""The pulsar-messages source and chunked messages across a ledger rollover: every message
exactly once, with its bytes, when its chunks span two or three ledgers of a topic (other
producers' batches and chunks interleaved), and dropped (as a consumer would) when a ledger
holding some of its chunks is not offloaded."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.pulsar import (
    ChunkAssembler,
    OutgoingMessage,
    encode_chunks,
    encode_entry,
    iter_messages,
)
from formats.pulsar.entry import parse_entry
from offloader.spark import register
from offloader.spark.message_chunks import CHUNK_EXPIRY_MS, ChunkFollower, following_ledgers
from tests.spark.conftest import TOPIC_A, Ledger, upload_ledger

pytestmark = [pytest.mark.spark, pytest.mark.s3]

T0 = 1_760_000_000_000
BLOCK = 2048


class _Producers:
    """Entries of several producers, each with its own increasing sequence ids."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seq: Counter[str] = Counter()
        self.clock = T0

    def batch(self, producer: str, n: int = 4) -> bytes:
        seq = self.seq[producer]
        self.seq[producer] += n
        self.clock += 1
        return encode_entry(
            [
                OutgoingMessage(f"{producer}-{seq + i}".encode(), key=f"{producer}-k{i % 2}")
                for i in range(n)
            ],
            producer_name=producer,
            sequence_id=seq,
            publish_time=self.clock,
            batch=True,
        )

    def chunks(self, producer: str, key: str, count: int) -> list[bytes]:
        seq = self.seq[producer]
        self.seq[producer] += 1
        self.clock += 1
        value = self.rng.randbytes(700 * count - 123)
        out = encode_chunks(
            OutgoingMessage(value, key=key),
            chunk_size=700,
            producer_name=producer,
            sequence_id=seq,
            publish_time=self.clock,
        )
        assert len(out) == count
        return out


def _rollover_ledgers() -> dict[int, list[bytes]]:
    """Ledgers 50, 51, 52 of one topic. ``m1`` (6 chunks) crosses 50 -> 51, ``m5`` (4 chunks)
    50 -> 51 -> 52, ``m3`` (5 chunks) 51 -> 52, ``m2`` (5 chunks) stays in 51 across blocks."""
    p = _Producers(22)
    m1 = p.chunks("p4", "m1", 6)
    m5 = p.chunks("p3", "m5", 4)
    l50 = [p.batch("p1"), p.batch("p2"), p.batch("p1"), m5[0], p.batch("p2"), m1[0], m1[1]]
    l50 += [p.batch("p2"), m1[2]]
    m2 = p.chunks("p2", "m2", 5)
    l51 = [m5[1], m1[3], p.batch("p1"), m5[2], m1[4], m1[5], p.batch("p1"), *m2, p.batch("p1")]
    m3 = p.chunks("p1", "m3", 5)
    l51 += [p.batch("p2"), m3[0], m3[1]]
    l52 = [m3[2], m5[3], m3[3], m3[4], p.batch("p1"), p.batch("p2"), p.batch("p3")]
    return {50: l50, 51: l51, 52: l52}


def _gap_ledgers() -> dict[int, list[bytes]]:
    """Ledgers 60, 61, 62; 61 is not offloaded. ``m6`` has chunks in all three (a consumer
    would never get it whole), ``m7`` begins in 60 and its producer sends again in 62 with no
    chunk of it left, ``m8`` is whole in 62."""
    p = _Producers(23)
    m6 = p.chunks("p6", "m6", 4)
    m7 = p.chunks("p7", "m7", 3)
    l60 = [p.batch("p1"), m6[0], p.batch("p2"), m7[0], m6[1]]
    l61 = [m6[2], p.batch("p1")]
    m8 = p.chunks("p1", "m8", 3)
    l62 = [m6[3], p.batch("p7"), *m8, p.batch("p2")]
    return {60: l60, 61: l61, 62: l62}


@pytest.fixture(scope="module")
def rollover(s3_endpoint: S3Endpoint) -> Any:
    bucket = s3_endpoint.new_bucket()
    up = {
        lid: upload_ledger(s3_endpoint, bucket, lid, entries, BLOCK, managed_ledger_name=TOPIC_A[1])
        for lid, entries in _rollover_ledgers().items()
    }
    gap = _gap_ledgers()
    up_gap = {
        lid: upload_ledger(
            s3_endpoint, bucket, lid, gap[lid], BLOCK, managed_ledger_name=TOPIC_A[1]
        )
        for lid in (60, 62)
    }
    return s3_endpoint, bucket, up, up_gap


def _df(spark: Any, data: Any, ledgers: Sequence[Ledger], **options: Any) -> Any:
    endpoint, bucket, *_ = data
    register(spark)
    r = (
        spark.read.format("pulsar-messages")
        .option("store", f"s3://{bucket}")
        .option("endpoint", endpoint.url)
        .option("ledgers", ",".join(f"{lg.ledger_id}:{lg.uuid}" for lg in ledgers))
    )
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.ledger_id, r.entry_id, r.batch_index, r.key, r.sequence_id, bytes(r.value), r.topic)
        for r in df.collect()
    )


def _want(entries: list[tuple[int, int, bytes]], assembler: ChunkAssembler | None = None) -> list:
    return [
        (m.ledger_id, m.entry_id, m.batch_index, m.key, m.sequence_id, m.value, TOPIC_A[0])
        for m in iter_messages(entries, assembler=assembler)
    ]


def test_chunks_across_a_rollover_exactly_once(spark: Any, rollover: Any, aws_env: Any) -> None:
    _, _, ledgers, _ = rollover
    ordered = [ledgers[lid] for lid in sorted(ledgers)]
    assert all(len(lg.blocks) >= 2 for lg in ordered)
    df = _df(spark, rollover, ordered)
    assert df.rdd.getNumPartitions() == sum(len(lg.blocks) for lg in ordered)
    got = _rows(df)
    entries = [(lg.ledger_id, i, p) for lg in ordered for i, p in enumerate(lg.payloads)]
    want = sorted(_want(entries))  # the decoder reassembles across ledgers: the reference
    assert got == want
    by_key = Counter(r[3] for r in got)
    assert [by_key[k] for k in ("m1", "m2", "m3", "m5")] == [1, 1, 1, 1]
    ids = {r[3]: r[:2] for r in got if r[3] in ("m1", "m3", "m5")}
    assert ids == {"m1": (51, 5), "m5": (52, 1), "m3": (52, 3)}  # the last chunk's id
    assert len(got) == len({r[:3] for r in got})  # no message id twice
    # the block boundary case inside one ledger, read alone: m2 whole, the orphans skipped
    alone = _rows(_df(spark, rollover, [ledgers[51]]))
    assert [r[3] for r in alone].count("m2") == 1
    assert not {"m1", "m3", "m5"} & {r[3] for r in alone}


def test_a_ledger_not_offloaded_drops_the_message(spark: Any, rollover: Any, aws_env: Any) -> None:
    _, _, _, gap = rollover
    got = _rows(_df(spark, rollover, [gap[60], gap[62]]))
    want = []
    for lid in (60, 62):  # each ledger alone: what a consumer gets (m6, m7 never whole)
        lg = gap[lid]
        entries = [(lid, i, p) for i, p in enumerate(lg.payloads)]
        want += _want(entries, ChunkAssembler(skip_orphans=True))
    assert got == sorted(want)
    keys = Counter(r[3] for r in got)
    assert keys["m8"] == 1 and keys["m6"] == 0 and keys["m7"] == 0


def test_following_ledgers_are_the_topics_next_ones(rollover: Any, aws_env: Any) -> None:
    from offloader.spark.plan import StoreSpec, plan_pairs

    endpoint, bucket, ledgers, _ = rollover
    spec = StoreSpec(f"s3://{bucket}", endpoint.url)
    tasks = plan_pairs(spec, [(lid, ledgers[lid].uuid) for lid in (52, 50, 51)])
    following = following_ledgers(tasks)
    for task, after in zip(tasks, following, strict=True):
        assert [t.ledger_id for t in after] == [lid for lid in (51, 52) if lid > task.ledger_id]
        assert all(t.ref.block == 0 for t in after)  # type: ignore[union-attr]


def test_local_ledgers_and_offloaded_ones_read_on(
    s3_endpoint: S3Endpoint, aws_env: Any, tmp_path: Any
) -> None:
    """Through ``topics`` + ``home``: a chunked message begun in an offloaded ledger ends in a
    ledger only on local disk, split into several local tasks; another crosses two local
    ledgers. Each partition read in this process (the planner's and the executor's code)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from formats.keys import data_key, index_key
    from offloader.ledgers import LedgerStore
    from offloader.metadata import open_metadata_store
    from offloader.metadata.base import DriverMetadata
    from offloader.spark.messages import PulsarMessagesReader
    from offloader.spark.plan import LocalLedgerTask
    from tests.spark.test_message_columns import _schema

    p = _Producers(24)

    def big(seq: int) -> bytes:  # local tasks split a ledger by max_block_size (5 MiB at least)
        value = p.rng.randbytes(3 << 20)
        return encode_entry(
            [OutgoingMessage(value, key="big")],
            producer_name="p8",
            sequence_id=seq,
            publish_time=T0,
        )

    m1 = p.chunks("p1", "m1", 5)
    m2 = p.chunks("p2", "m2", 4)
    m3 = p.chunks("p3", "m3", 3)
    content = {  # ledger ids 0, 1, 2 as the metadata store allocates them
        0: [p.batch("p9"), m1[0], p.batch("p9"), m1[1]],
        1: [m1[2], big(0), m1[3], m2[0], big(1), m1[4], big(2), *m2[1:], big(3), m3[0]],
        2: [m3[1], p.batch("p9"), m3[2], p.batch("p9")],
    }
    bucket = s3_endpoint.new_bucket()
    topic = TOPIC_A[0]
    ledgers = LedgerStore(tmp_path)
    meta = open_metadata_store(tmp_path)
    meta.create_namespace("public/default", T0)
    meta.create_topic(topic, T0)
    for lid, entries in content.items():
        assert meta.allocate_ledger_id() == lid
        meta.add_ledger(topic, lid, T0)
        writer = ledgers.create_ledger(topic, lid)
        for e in entries:
            writer.append(e)
        writer.close()
        meta.close_ledger(lid, T0, len(entries), sum(map(len, entries)))
        if lid == 0:
            up = upload_ledger(
                s3_endpoint, bucket, lid, entries, BLOCK, managed_ledger_name=TOPIC_A[1]
            )
            driver = DriverMetadata(
                "aws-s3", {"store_url": f"s3://{bucket}", "endpoint": s3_endpoint.url}
            )
            meta.begin_offload(
                lid,
                up.uuid,
                driver,
                T0,
                data_key=data_key(up.uuid, lid),
                index_key=index_key(up.uuid, lid),
            )
            from formats.extension import crc32c

            meta.complete_offload(
                lid,
                up.uuid,
                T0,
                data_size=up.blocks[-1][3],
                index_size=len(up.index),
                index_crc32c=crc32c(up.index),
            )
            meta.mark_local_deleted(lid, up.uuid)
            ledgers.delete_ledger(topic, lid)
    meta.close()
    reader = PulsarMessagesReader(
        {"topics": topic, "home": str(tmp_path)}, from_arrow_schema(_schema())
    )
    reader.settings = reader.settings.replace(max_block_size=5 << 20)
    parts = reader.partitions()
    local = [pt.task for pt in parts if isinstance(pt.task, LocalLedgerTask)]  # type: ignore[attr-defined]
    assert len({t.ledger_id for t in local}) == 2 and len(local) > 3
    rows = []
    for part in parts:
        for batch in reader.read(part):
            rows += [
                (r["ledger_id"], r["entry_id"], r["batch_index"], r["key"], r["value"])
                for r in batch.to_pylist()
            ]
    every = [(lid, i, e) for lid, entries in content.items() for i, e in enumerate(entries)]
    want = [(m.ledger_id, m.entry_id, m.batch_index, m.key, m.value) for m in iter_messages(every)]
    assert sorted(rows) == sorted(want)
    assert Counter(r[3] for r in rows)["m1"] == 1 and Counter(r[3] for r in rows)["m3"] == 1


def test_follower_tells_first_chunks_and_what_waits() -> None:
    """The export's use of :class:`ChunkFollower`: the first chunk of each message it returns,
    and (``wait_at_end``) the messages still incomplete when the known ledgers end, kept
    waiting instead of dropped."""
    for wait in (False, True):
        p = _Producers(5)
        m = p.chunks("pa", "m", 3)
        w = p.chunks("pb", "w", 2)
        follower = ChunkFollower(wait_at_end=wait)
        assert follower.own(parse_entry(m[0]), 50, 3) is None
        assert follower.own(parse_entry(w[0]), 50, 4) is None
        assert follower.own(parse_entry(m[1]), 50, 6) is None
        whole = follower.follow(parse_entry(m[2]), 51, 0)  # across the rollover
        assert whole is not None and follower.completed_from == (50, 3)
        assert follower.begun  # w's last chunk never comes
        follower.give_up()
        assert not follower.begun
        assert (follower.waiting, follower.dropped) == (([(50, 4)], 0) if wait else ([], 1))


def test_a_waiting_message_expires_once_entries_a_minute_later_are_read() -> None:
    """``wait_at_end``: a message whose producer stopped mid-way waits only until entries
    published more than :data:`CHUNK_EXPIRY_MS` after its last chunk have been read."""
    for gap, waits in ((CHUNK_EXPIRY_MS, True), (CHUNK_EXPIRY_MS + 1, False)):
        p = _Producers(7)
        w = p.chunks("pw", "w", 3)
        follower = ChunkFollower(wait_at_end=True)
        assert follower.own(parse_entry(w[0]), 60, 0) is None
        assert follower.own(parse_entry(w[1]), 60, 1) is None
        p.clock += gap - 1  # the next batch is published ``gap`` ms after w's chunks
        assert follower.follow(parse_entry(p.batch("px")), 61, 0) is None
        follower.give_up()
        assert not follower.begun
        assert (follower.waiting, follower.dropped) == (([(60, 0)], 0) if waits else ([], 1))
