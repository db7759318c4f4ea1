"""Fixtures of the Spark tier: ONE session-scoped SparkSession (local[2], ~10 s to start) and
small offloaded datasets uploaded to the current ``s3_endpoint`` (moto, and RGW when it runs).

Test ledgers are encoded in memory (``formats.encode.encode_ledger``) and uploaded as two single
PUT objects with Pulsar's user metadata, so blocks can be a few KiB on every server (S3's 5 MiB
minimum applies to multipart parts only). The Python workers get the endpoint's credentials from
``AWS_*`` variables, which ``offloaded_rdd``/``register`` copy from the test's environment.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid as uuid_mod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.encode import encode_ledger
from formats.keys import data_key, index_key, object_user_metadata
from formats.ledger_metadata import LedgerMetadata

#: (topic, managed ledger name) of the test topics
TOPIC_A = ("persistent://public/default/spark-a", "public/default/persistent/spark-a")
TOPIC_B = ("persistent://public/default/spark-b", "public/default/persistent/spark-b")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the run."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from offloader.spark import local_session

    session = local_session("ledger-offloader-tests")
    yield session
    session.stop()


@pytest.fixture()
def aws_env(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> S3Endpoint:
    """The endpoint's credentials in this process's environment (workers get them from it)."""
    for key, value in s3_endpoint.env().items():
        monkeypatch.setenv(key, value)
    return s3_endpoint


@dataclass
class Ledger:
    ledger_id: int
    uuid: str
    topic: str | None
    payloads: list[bytes]
    blocks: list[tuple[int, int, int, int]]  # (first entry, last entry, start, end)
    #: the index object's bytes (what a metadata store records the size and CRC32C of)
    index: bytes = field(default=b"", repr=False)


@dataclass
class Dataset:
    endpoint: S3Endpoint
    bucket: str
    ledgers: list[Ledger] = field(default_factory=list)

    @property
    def store_url(self) -> str:
        return f"s3://{self.bucket}"

    @property
    def pairs(self) -> list[tuple[int, str]]:
        return [(lg.ledger_id, lg.uuid) for lg in self.ledgers]

    @property
    def block_count(self) -> int:
        return sum(len(lg.blocks) for lg in self.ledgers)

    def expected(self, ledger_ids: Sequence[int] | None = None) -> list[tuple[Any, ...]]:
        """Sorted ``(topic, ledger_id, entry_id, sha256)`` of every entry."""
        return sorted(
            (lg.topic or "", lg.ledger_id, i, sha(p))
            for lg in self.ledgers
            if ledger_ids is None or lg.ledger_id in ledger_ids
            for i, p in enumerate(lg.payloads)
        )


def sha(payload: bytes | bytearray) -> str:
    return hashlib.sha256(payload).hexdigest()


def records_digest(records: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((t or "", int(lid), int(eid), sha(bytes(p))) for t, lid, eid, p in records)


def upload_ledger(
    endpoint: S3Endpoint,
    bucket: str,
    ledger_id: int,
    payloads: Sequence[bytes],
    max_block_size: int,
    *,
    managed_ledger_name: str | None = None,
    with_extension: bool = True,
    zone_maps: bool = False,
) -> Ledger:
    """Encode a ledger and PUT its data and index objects with Pulsar's user metadata."""
    encoded = encode_ledger(
        list(payloads),
        LedgerMetadata.closed_default(
            last_entry_id=len(payloads) - 1, length=sum(len(p) for p in payloads)
        ),
        max_block_size,
        with_extension=with_extension,
        zone_maps=zone_maps,
    )
    uid = str(uuid_mod.uuid4())
    client = endpoint.client()
    for key, body, role in (
        (data_key(uid, ledger_id), encoded.data, "data"),
        (index_key(uid, ledger_id), encoded.index, "index"),
    ):
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            Metadata=object_user_metadata(role, managed_ledger_name=managed_ledger_name),
        )
    blocks = [
        (p.first_entry_id, p.last_entry_id, p.offset, p.offset + p.size) for p in encoded.plans
    ]
    topic = None
    if managed_ledger_name is not None:
        topic = (TOPIC_A if managed_ledger_name == TOPIC_A[1] else TOPIC_B)[0]
    return Ledger(ledger_id, uid, topic, list(payloads), blocks, encoded.index)


def payloads_of(seed: int, count: int, lo: int, hi: int, empty_every: int = 0) -> list[bytes]:
    rnd = __import__("random").Random(seed)
    out = []
    for i in range(count):
        if empty_every and i % empty_every == 0:
            out.append(b"")
        else:
            out.append(rnd.randbytes(rnd.randint(lo, hi)))
    return out


@pytest.fixture(scope="module")
def dataset(s3_endpoint: S3Endpoint) -> Dataset:
    """Five ledgers on two topics: multi-block, empty entries, all-empty, no index extension."""
    bucket = s3_endpoint.new_bucket()
    ds = Dataset(s3_endpoint, bucket)
    ds.ledgers = [
        upload_ledger(
            s3_endpoint,
            bucket,
            3,
            payloads_of(3, 300, 1, 600),
            4096,
            managed_ledger_name=TOPIC_A[1],
        ),
        upload_ledger(
            s3_endpoint,
            bucket,
            5,
            payloads_of(5, 60, 0, 100, empty_every=3),
            1024,
            managed_ledger_name=TOPIC_A[1],
        ),
        upload_ledger(
            s3_endpoint, bucket, 7, [os.urandom(10_000)], 64 * 1024, managed_ledger_name=TOPIC_B[1]
        ),
        upload_ledger(s3_endpoint, bucket, 8, [b""] * 20, 1024, managed_ledger_name=TOPIC_B[1]),
        upload_ledger(
            s3_endpoint,
            bucket,
            9,
            payloads_of(9, 40, 100, 300),
            2048,
            managed_ledger_name=None,
            with_extension=False,
        ),
    ]
    return ds
