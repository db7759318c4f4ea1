"""The batched (``multiRead``) reads of :class:`offloader.zk.reader.ZkReader` against a real
ZooKeeper: the same values, in the same order, as one ``get`` per node, and each node's own
error named by its path."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from devservers.zookeeper import ZkServer
from offloader.errors import PulsarMetadataError, PulsarMetadataUnavailable
from offloader.zk import reader as zk_reader
from offloader.zk.address import ZkAddress
from offloader.zk.reader import ZkReader

pytestmark = pytest.mark.zookeeper


@pytest.fixture()
def root(zk_admin: KazooClient) -> str:
    path = f"/batched-{uuid.uuid4().hex[:12]}"
    zk_admin.ensure_path(path)
    return path


@pytest.fixture()
def reader(zk_server: ZkServer, zk_admin: KazooClient) -> Iterator[ZkReader]:
    # after zk_admin: its start (with retries) waits until the new server takes sessions
    r = ZkReader(
        ZkAddress(tuple(zk_server.hosts.split(",")), ""),
        "zk:test",
        error=PulsarMetadataError,
        unavailable=PulsarMetadataUnavailable,
    )
    yield r
    r.close()


def _single(reader: ZkReader, paths: list[str]) -> list[tuple[str, bytes | None]]:
    return [(p, reader.get(p)) for p in paths]


@pytest.fixture()
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of nodes in each multiRead request sent (the real request, recorded)."""
    sizes: list[int] = []

    class Recorded(zk_reader._MultiRead):
        def __init__(self, paths: list[str]) -> None:
            sizes.append(len(paths))
            super().__init__(paths)

    monkeypatch.setattr(zk_reader, "_MultiRead", Recorded)
    return sizes


def test_the_fixture_server_has_multi_read(reader: ZkReader) -> None:
    # else the tests below would compare the pipelined path with itself
    assert reader.multi_read()


def test_batched_reads_equal_one_get_per_node(
    reader: ZkReader, zk_admin: KazooClient, root: str, batch_sizes: list[int]
) -> None:
    n = zk_reader.BATCH * (zk_reader.BATCH_WINDOW + 2) + 7  # more than the window holds
    txn = []
    for i in range(n):
        value = bytes((i * 7 + k) % 256 for k in range(i % 300))  # 0..299 bytes, b"" too
        txn.append(zk_admin.create_async(f"{root}/n{i:05d}", value))
    for t in txn:
        t.get()
    zk_admin.create(f"{root}/null")  # kazoo writes b"" for no value
    paths = [f"{root}/n{i:05d}" for i in range(n)]
    # missing nodes anywhere (first, inside a batch, at a batch's edge, last), a repeat
    paths.insert(0, f"{root}/missing-0")
    paths.insert(zk_reader.BATCH, f"{root}/missing-edge")
    paths.insert(300, f"{root}/null")
    paths.insert(301, paths[5])
    paths.append(f"{root}/missing-last")
    got = list(reader.get_many(paths))
    assert got == _single(reader, paths)
    assert [p for p, _ in got] == paths
    assert sum(v is None for _, v in got) == 3
    assert sum(batch_sizes) == len(paths)
    assert batch_sizes[0] == zk_reader.FIRST_BATCH and max(batch_sizes) == zk_reader.BATCH


def test_large_values_go_a_few_at_a_time(
    reader: ZkReader, zk_admin: KazooClient, root: str, batch_sizes: list[int]
) -> None:
    value = bytes(range(256)) * 800  # 200 KiB: about five fit in BATCH_BYTES
    for i in range(40):
        zk_admin.create(f"{root}/big{i:02d}", value[i:] + bytes([i]))
    paths = [f"{root}/big{i:02d}" for i in range(40)]
    got = list(reader.get_many(paths))
    assert got == _single(reader, paths)
    assert sum(batch_sizes) == 40
    assert batch_sizes[: zk_reader.BATCH_WINDOW] == [zk_reader.FIRST_BATCH] * 4
    fit = zk_reader.BATCH_BYTES // len(value)
    assert 1 <= max(batch_sizes[zk_reader.BATCH_WINDOW :]) <= fit + 1


def test_a_server_without_multi_read_gets_one_node_per_request(
    reader: ZkReader, zk_admin: KazooClient, root: str, batch_sizes: list[int]
) -> None:
    """As against a server older than 3.6 (or without ``srvr``): pipelined gets, the same
    values."""
    for i in range(20):
        zk_admin.create(f"{root}/n{i}", bytes([i]) * i)
    paths = [f"{root}/n{i}" for i in range(20)] + [f"{root}/missing"]
    reader._multi_read = False  # what multi_read() decides for such a server
    assert list(reader.get_many(paths)) == _single(reader, paths)
    assert batch_sizes == []


def test_no_paths_reads_nothing(reader: ZkReader) -> None:
    assert list(reader.get_many([])) == []


def test_an_acl_refusal_inside_a_batch_names_its_node(
    reader: ZkReader, zk_admin: KazooClient, root: str
) -> None:
    for i in range(10):
        zk_admin.create(f"{root}/ok{i}", b"v")
    secret = f"{root}/secret"
    zk_admin.create(secret, b"s", acl=[make_digest_acl("someone", "else", all=True)])
    paths = [f"{root}/ok{i}" for i in range(5)] + [secret] + [f"{root}/ok{i}" for i in range(5, 10)]
    seen: list[str] = []
    with pytest.raises(PulsarMetadataError, match=f"zk:test: {secret}: access denied"):
        for path, _ in reader.get_many(paths):
            seen.append(path)
    assert seen == paths[:5]  # the nodes before it were given, in order


@pytest.mark.parametrize(
    ("srvr", "version"),
    [
        (
            "Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022",
            (3, 8),
        ),
        ("Zookeeper version: 3.5.9-83df9301aa5c2a5d284a9940177808c01bc35cef, built on", (3, 5)),
        ("Zookeeper version: 3.10.1\nLatency min/avg/max: 0/0.0/0", (3, 10)),
        ("srvr is not executed because it is not in the whitelist.\n", None),
        ("", None),
    ],
)
def test_the_server_version_from_srvr(srvr: str, version: tuple[int, int] | None) -> None:
    assert zk_reader._version(srvr) == version
    has = version is not None and version >= zk_reader.MULTI_READ_SINCE
    assert has == (version in ((3, 8), (3, 10)))
