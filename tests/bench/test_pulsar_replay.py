"""bench.pulsar_memory's replay control: ``pulsar-messages``' own batches of the largest block,
read once per worker from moto over HTTP, then replayed for every partition with no GET."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from bench import pulsar_memory
from bench.pulsar_memory import _REPLAYED, _ReplayReader
from bench.pulsar_scan import _upload
from devservers.endpoint import S3Endpoint
from offloader.spark import message_blocks
from offloader.spark.message_chunks import ChunkFollower
from offloader.spark.message_rows import messages_arrow_schema
from offloader.spark.messages import MessagesPartition, PulsarMessagesReader

pytestmark = [pytest.mark.s3]


@pytest.fixture()
def topic(moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Two ledgers of 50-message entries in 256 KiB blocks (the last block of each shorter)."""
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    args = argparse.Namespace(
        total="1M", block="256K", ledgers=2, batch=50, message=100, compression="none"
    )
    pairs, _, _ = _upload(moto_endpoint, bucket, args)
    _REPLAYED.clear()
    yield {"store": f"s3://{bucket}", "endpoint": moto_endpoint.url, "ledgers": ",".join(pairs)}
    _REPLAYED.clear()


def test_replay_yields_the_largest_blocks_batches_per_partition(
    topic: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = from_arrow_schema(messages_arrow_schema())
    real = PulsarMessagesReader(topic, schema)
    largest = max(real.plan(), key=lambda t: t.ref.end - t.ref.start)  # type: ignore[union-attr]
    expected = pa.Table.from_batches(
        list(real.messages(MessagesPartition(largest), ChunkFollower()))
    )
    replay = _ReplayReader({**topic, "blocks": "3"}, schema)
    parts = replay.partitions()
    assert len(parts) == 3
    first = pa.Table.from_batches(list(replay.read(parts[0])))
    assert first.equals(expected)
    assert first.num_rows > 0 and first.num_rows % 50 == 0

    def no_get(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the replay read the store again")

    monkeypatch.setattr(message_blocks, "read_packed_block", no_get)
    monkeypatch.setattr(pulsar_memory.PulsarMessagesReader, "plan", no_get)
    for part in parts[1:]:
        assert pa.Table.from_batches(list(replay.read(part))).equals(expected)
