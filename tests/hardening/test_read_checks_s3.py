"""Issue 21 items 1, 4, 5 and 9 on S3 (moto and RGW, over HTTP): what ``topics read`` checks before
it prints entries, with the objects edited on the server the way a hostile or broken writer
would (the file-store versions are in test_read_checks.py, test_data_version.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devservers.endpoint import S3Endpoint
from formats.keys import FORMAT_VERSION_KEY
from tests.cli.helpers import json_lines, ok, one_line_error, run

pytestmark = pytest.mark.s3

ENTRIES = 1000  # per ledger, of 1 KiB: one block and several span CRC32Cs each
#: where entry n's payload starts in a one-block data object (block header 128, entry header 12)
PAYLOAD_OF = 128 + 12


def _payload_byte(n: int) -> int:
    return PAYLOAD_OF + (1024 + 12) * n + 50


class _Topic:
    """``t`` with two offloaded ledgers (local copies deleted) in a fresh bucket."""

    def __init__(self, home: Path, endpoint: S3Endpoint) -> None:
        self.home = home
        self.client = endpoint.client()
        self.bucket = endpoint.new_bucket()
        self.store = ("--store", f"s3://{self.bucket}/p", "--endpoint-url", endpoint.url)
        self.ok("namespaces", "create", "public/default")
        self.ok(
            "topics", "produce", "t", "--synthetic", str(2 * ENTRIES), "--size", "1K",
            "--max-entries-per-ledger", str(ENTRIES), "--min-rollover-time", "0",
        )  # fmt: skip
        self.produced = self.read()
        self.ok("topics", "offload-prefix", "t", "-s", "0", "--max-block-size", "5M")
        self.ok("namespaces", "set-offload-deletion-lag", "public/default", "-l", "0")
        self.ok("service", "run", "--once")
        (info,) = json_lines(self.ok("--json", "topics", "info", "t"))
        offloaded = [r for r in info["ledgers"] if r["uuid"]]
        self.uuids = {r["ledger_id"]: r["uuid"] for r in offloaded}
        assert set(self.uuids) == {0, 1} and all(r["local_deleted"] for r in offloaded)
        assert self.read() == self.produced
        self.pristine = {
            self.key(i, index): self.get(self.key(i, index)) for i in (0, 1) for index in (0, 1)
        }

    def restore(self) -> None:
        for key, (body, metadata) in self.pristine.items():
            self.put(key, body, metadata)

    def ok(self, *args: str) -> Any:
        return ok(self.home, *self.store, *args)

    def run(self, *args: str) -> Any:
        return run(self.home, *self.store, *args)

    def read(self, *args: str) -> list[tuple[int, int, str]]:
        rows = json_lines(self.ok("--json", "topics", "read", "t", *args))
        return [(r["ledger_id"], r["entry_id"], r["sha256"]) for r in rows]

    def key(self, ledger_id: int, index: int = 0) -> str:
        return f"p/{self.uuids[ledger_id]}-ledger-{ledger_id}" + ("-index" if index else "")

    def get(self, key: str) -> tuple[bytes, dict[str, str]]:
        got = self.client.get_object(Bucket=self.bucket, Key=key)
        return got["Body"].read(), dict(got["Metadata"])

    def put(self, key: str, body: bytes, metadata: dict[str, str]) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=body, Metadata=metadata)


@pytest.fixture(scope="module")
def offloaded(
    s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Topic]:
    """One topic per server; each test edits its objects, restored before the next test."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in s3_endpoint.env().items():
            mp.setenv(name, value)
        yield _Topic(tmp_path_factory.mktemp("home"), s3_endpoint)


@pytest.fixture()
def topic(offloaded: _Topic) -> _Topic:
    offloaded.restore()
    return offloaded


def test_a_count_ending_at_the_last_entry_checks_the_data(topic: _Topic) -> None:
    data, metadata = topic.get(topic.key(0))
    flipped = bytearray(data)
    flipped[_payload_byte(ENTRIES - 1)] ^= 1  # the last entry of ledger 0's only block
    topic.put(topic.key(0), bytes(flipped), metadata)
    result = topic.run("--json", "topics", "read", "t", "-n", str(ENTRIES))
    assert "CRC32C" in one_line_error(result)
    printed = [(r["ledger_id"], r["entry_id"], r["sha256"]) for r in json_lines(result)]
    assert printed == topic.produced[: len(printed)]  # nothing wrong was printed
    assert len(printed) < ENTRIES - 1


def test_swapped_pairs_are_refused(topic: _Topic) -> None:
    for index in (0, 1):
        a, b = topic.get(topic.key(0, index)), topic.get(topic.key(1, index))
        topic.put(topic.key(0, index), *b)
        topic.put(topic.key(1, index), *a)
    line = one_line_error(topic.run("--json", "topics", "read", "t", "-n", "5"))
    assert "ledger 0" in line and "not the index this ledger was offloaded with" in line, line
    assert json_lines(topic.run("--json", "topics", "read", "t", "-n", "5")) == []


def test_a_data_object_of_another_version_is_refused(topic: _Topic) -> None:
    data, metadata = topic.get(topic.key(1))
    topic.put(topic.key(1), data, {**metadata, FORMAT_VERSION_KEY: "12345"})
    assert topic.read("-n", "3") == topic.produced[:3]  # ledger 0 is fine
    line = one_line_error(topic.run("--json", "topics", "read", "t", "--from", "1:0", "-n", "1"))
    name = topic.key(1).removeprefix("p/")  # the object's name in the store, as Pulsar's
    assert f"Invalid object version 12345 for {name}" in line and "ledger 1" in line, line


def test_an_oversized_index_is_refused_before_it_is_read(topic: _Topic) -> None:
    index, metadata = topic.get(topic.key(0, index=1))
    topic.put(topic.key(0, index=1), index + bytes(8 << 20), metadata)
    line = one_line_error(topic.run("--json", "topics", "read", "t", "-n", "1"))
    assert "refused before reading it" in line and "ledger 0" in line, line
