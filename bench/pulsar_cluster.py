"""A real Pulsar cluster's metadata read from ZooKeeper, and the orphan audit of its bucket.

``python -m bench pulsar_cluster [--topics N] [--ledgers L] [--objects M] [--stores file,s3]
[--placement shared,split] [--repeat R] [--fill prefill,put] [--s3-server moto,rgw]``

* ``pulsar_cluster.list_topics``: every topic's ``ManagedLedgerInfo`` of a cluster of N topics
  (L ledgers each, offloaded, the node values LZ4-compressed as a broker with
  ``managedLedgerInfoCompressionType=LZ4`` writes them) read and decoded by
  ``offloader.pulsar_cluster`` (tenants, namespaces and topics listed, the nodes fetched
  pipelined, each decompressed and decoded), against a bare ``kazoo`` listing of the topics'
  directory and a pipelined ``get`` of the same nodes (no decoding). Lower is better; goal
  ratio <= 1.5.
* ``pulsar_cluster.orphan_audit``: the orphan audit of a bucket of M objects (a local
  ``file://`` store: the figure is the audit's own work, not a network) against that cluster,
  1% of the objects orphans, against one bare listing of the same store. Lower is better;
  goal ratio <= 1.5.
* ``pulsar_cluster.orphan_audit.s3``: the same audit of a bucket of M objects in moto's S3
  server, run in its own process (as ``bench/common.py``'s ``moto_process``), against a bare
  boto3 ``list_objects_v2`` pass over the same keys. ``--placement split`` pins moto and
  ZooKeeper to the upper half of the CPUs and this process to the lower half (a stand-in for
  servers on other machines, ``bench/placement.py``); its rows end in ``.split``. Each of
  ``--repeat`` rounds is one row (best of 3 inside a round). ``--fill prefill`` (the default)
  has moto's process write the objects into its own backend before it serves
  (``bench/moto_process.py``), so only the measured listing and audit go over HTTP; ``--fill
  put`` PUTs them (about 7 ms an object on moto). ``--s3-server rgw`` runs the same case on
  Ceph's radosgw (filled by PUT on 32 threads); its rows are ``...orphan_audit.s3.rgw...``.

The ZooKeeper is the throwaway server of the tests (``devservers/zookeeper.py``); skipped
with a note where it cannot run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from unittest import mock

from bench import note, report
from bench.placement import add_run_arguments, parse_placements
from devservers.endpoint import S3Endpoint

ROOT = "/bench/managed-ledgers"


def _populate(client: object, topics: int, ledgers: int) -> dict[str, list[tuple[int, str]]]:
    from formats.pulsar import compression
    from formats.pulsar.managed_ledger_info import (
        DriverMetadata,
        LedgerInfo,
        ManagedLedgerInfo,
        OffloadContext,
        encode_managed_ledger_info,
        uuid_halves,
    )

    driver = DriverMetadata("aws-s3", (("bucket", "b"), ("region", "r"), ("endpoint", "")))
    zk = client  # a KazooClient
    zk.ensure_path(f"{ROOT}/public/default/persistent")  # type: ignore[attr-defined]
    out: dict[str, list[tuple[int, str]]] = {}
    pending = []
    lid = 1
    for t in range(topics):
        items = []
        pairs = []
        for _ in range(ledgers):
            uid = str(uuid.uuid4())
            msb, lsb = uuid_halves(uid)
            items.append(
                LedgerInfo(
                    lid,
                    entries=1000,
                    size=1 << 20,
                    timestamp=1_700_000_000_000,
                    offload_context=OffloadContext(
                        msb, lsb, complete=True, timestamp=1_700_000_000_000, driver_metadata=driver
                    ),
                )
            )
            pairs.append((lid, uid))
            lid += 1
        name = f"topic-{t:06d}"
        out[name] = pairs
        value = encode_managed_ledger_info(ManagedLedgerInfo(tuple(items)), codec=compression.LZ4)
        path = f"{ROOT}/public/default/persistent/{name}"
        pending.append(zk.create_async(path, value))  # type: ignore[attr-defined]
        if len(pending) >= 500:
            for p in pending:
                p.get()
            pending = []
    for p in pending:
        p.get()
    return out


def _timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """``fn()`` timed: wall seconds, this process's CPU seconds, its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def _bare(client: object) -> float:
    zk = client
    started = time.perf_counter()
    base = f"{ROOT}/public/default/persistent"
    names = zk.get_children(base)  # type: ignore[attr-defined]
    results: list[bytes] = []
    for start in range(0, len(names), 512):
        window = [zk.get_async(f"{base}/{n}") for n in names[start : start + 512]]  # type: ignore[attr-defined]
        results.extend(r.get()[0] for r in window)
    assert len(results) == len(names)
    return time.perf_counter() - started


def _ours(url: str) -> tuple[float, float, int]:
    from offloader.pulsar_cluster import open_cluster_source
    from offloader.pulsar_cluster.base import all_topics

    with open_cluster_source(url) as source:
        wall, cpu, got = _timed(lambda: source.managed_ledgers(all_topics(source)))
    return wall, cpu, sum(len(ct.info.ledgers) for ct in got)  # type: ignore[attr-defined,misc]


def _fill(store: object, pairs: dict[str, list[tuple[int, str]]], objects: int) -> tuple[int, int]:
    """``objects`` objects: the ledgers' data and index objects, 1% orphans. Written without
    fsync (the file store syncs each object; 100,000 synced writes take many minutes and the
    fill is not what is measured)."""
    from formats.keys import data_key, index_key

    meta = {"s3managedledgeroffloaderformatversion": "1"}
    written = 0
    orphans = max(1, objects // 100)
    with mock.patch("os.fsync"):
        for lid, uid in (p for ps in pairs.values() for p in ps):
            if written >= objects - orphans:
                break
            store.put(data_key(uid, lid), b"d", meta)  # type: ignore[attr-defined]
            store.put(index_key(uid, lid), b"i", meta)  # type: ignore[attr-defined]
            written += 2
        for n in range(orphans):
            store.put(data_key(str(uuid.uuid4()), 10_000_000 + n), b"o", meta)  # type: ignore[attr-defined]
            written += 1
    return written, orphans


def _audit(url: str, pairs: dict[str, list[tuple[int, str]]], objects: int) -> None:
    from offloader.offload.cluster_orphans import audit_cluster_bucket
    from offloader.pulsar_cluster import open_cluster_source
    from offloader.store import open_store

    with tempfile.TemporaryDirectory(prefix="bench-cluster-bucket.") as tmp:
        store = open_store(f"file://{tmp}")
        written, orphans = _fill(store, pairs, objects)
        best_list = best_audit = (float("inf"), 0.0)
        found = listed = 0
        with open_cluster_source(url) as source:
            for _ in range(3):
                wall, cpu, n = _timed(lambda: sum(1 for _ in store.list()))
                listed = int(n)  # type: ignore[call-overload]
                best_list = min(best_list, (wall, cpu))
                wall, cpu, audit = _timed(
                    lambda: audit_cluster_bucket(
                        source, store, min_age_ms=0, now_ms=lambda: int(time.time() * 1000)
                    )
                )
                best_audit = min(best_audit, (wall, cpu))
                found = len(audit.objects)  # type: ignore[attr-defined]
        store.close()
    assert listed == written and found == orphans, (listed, written, found, orphans)
    report(
        "pulsar_cluster.orphan_audit",
        best_audit[0],
        best_list[0],
        "s",
        higher_is_better=False,
        client_cpu_s=round(best_audit[1], 3),
        baseline_client_cpu_s=round(best_list[1], 3),
        objects=written,
        orphans=orphans,
        topics=len(pairs),
        baseline_what="one bare listing of the same store",
        goal_ratio=1.5,
    )


def _s3_keys(pairs: dict[str, list[tuple[int, str]]], objects: int) -> tuple[list[str], int]:
    """The keys of the S3 bucket (as :func:`_fill`: data and index objects, 1% orphans)."""
    from formats.keys import data_key, index_key

    orphans = max(1, objects // 100)
    keys: list[str] = []
    for lid, uid in (p for ps in pairs.values() for p in ps):
        if len(keys) >= objects - orphans:
            break
        keys += [data_key(uid, lid), index_key(uid, lid)]
    keys += [data_key(str(uuid.uuid4()), 10_000_000 + n) for n in range(orphans)]
    return keys, orphans


#: the user metadata of every object of the fill
_META = {"s3managedledgeroffloaderformatversion": "1"}


def _fill_s3(endpoint: S3Endpoint, bucket: str, keys: list[str], threads: int = 16) -> None:
    """The keys put over HTTP on ``threads`` threads (``--fill put``: ~7 ms per PUT on moto)."""
    from concurrent.futures import ThreadPoolExecutor

    client = endpoint.client()

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=b"x", Metadata=_META)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, keys))


@contextmanager
def _filled_s3(
    server: str, pairs: dict[str, list[tuple[int, str]]], objects: int, fill: str
) -> Iterator[tuple[S3Endpoint, tuple[int, ...], str, int, int, float, str]]:
    """The S3 server (``moto`` in its own process, or ``rgw``: Ceph's radosgw, moto when it
    cannot start) with the bucket filled. moto: ``prefill`` (the child writes the objects into
    its own backend before it serves) or ``put`` (PUT over HTTP); RGW is always filled by PUT
    (32 threads). Yields the endpoint, the server's pids, the bucket, the objects, the
    orphans, the fill's seconds and what the server was."""
    from bench.common import moto_process
    from bench.common import server as s3_server
    from bench.moto_process import Prefill, moto_child

    keys, orphans = _s3_keys(pairs, objects)
    started = time.perf_counter()
    if server == "rgw":
        with s3_server("rgw") as srv:
            bucket = srv.endpoint.new_bucket()
            _fill_s3(srv.endpoint, bucket, keys, threads=32)
            what = "Ceph RGW" if srv.name == "rgw" else f"moto (own process; {srv.note})"
            took = time.perf_counter() - started
            yield srv.endpoint, srv.pids, bucket, len(keys), orphans, took, what
        return
    what = "moto (own process)"
    if fill == "prefill":
        bucket = f"t-{uuid.uuid4().hex[:20]}"
        with moto_child(Prefill(bucket, [(k, 1) for k in keys], _META)) as (endpoint, pid):
            took = time.perf_counter() - started
            yield endpoint, (pid,), bucket, len(keys), orphans, took, what
        return
    with moto_process() as (endpoint, pid):
        bucket = endpoint.new_bucket()
        _fill_s3(endpoint, bucket, keys)
        yield endpoint, (pid,), bucket, len(keys), orphans, time.perf_counter() - started, what


def _bare_s3(client: object, bucket: str) -> int:
    """A bare boto3 ``list_objects_v2`` pass: the keys counted."""
    n = 0
    token: str | None = None
    while True:
        kwargs = {"Bucket": bucket, "MaxKeys": 1000}
        if token:
            kwargs["ContinuationToken"] = token
        page = client.list_objects_v2(**kwargs)  # type: ignore[attr-defined]
        n += len(page.get("Contents", ()))
        if not page.get("IsTruncated"):
            return n
        token = page["NextContinuationToken"]


def _audit_s3(
    url: str,
    zk_pid: int | None,
    pairs: dict[str, list[tuple[int, str]]],
    objects: int,
    placements: list[object],
    repeat: int,
    fill: str,
    server: str,
) -> None:
    from bench.placement import _pin_process, placed
    from offloader.offload.cluster_orphans import audit_cluster_bucket
    from offloader.pulsar_cluster import open_cluster_source
    from offloader.store import open_store

    filled = _filled_s3(server, pairs, objects, fill)
    with filled as (endpoint, pids, bucket, written, orphans, fill_s, what):
        client = endpoint.client()
        os.environ.update(endpoint.env())  # the store's credentials, as the CLI takes them
        store = open_store(f"s3://{bucket}", endpoint_url=endpoint.url, region=endpoint.region)
        servers = [*pids] + ([zk_pid] if zk_pid is not None else [])
        everything = sorted(os.sched_getaffinity(0))
        for place in placements:
            with placed(servers, place) as cpus:  # type: ignore[arg-type]
                if cpus:
                    _pin_process(os.getpid(), cpus)
                try:
                    for round_ in range(repeat):
                        best_list = best_audit = (float("inf"), 0.0)
                        listed = found = 0
                        with open_cluster_source(url) as source:
                            for _ in range(3):
                                wall, cpu, n = _timed(lambda: _bare_s3(client, bucket))
                                listed = int(n)  # type: ignore[call-overload]
                                best_list = min(best_list, (wall, cpu))
                                wall, cpu, audit = _timed(
                                    lambda: audit_cluster_bucket(
                                        source,
                                        store,
                                        min_age_ms=0,
                                        now_ms=lambda: int(time.time() * 1000),
                                    )
                                )
                                best_audit = min(best_audit, (wall, cpu))
                                found = len(audit.objects)  # type: ignore[attr-defined]
                        assert listed == written and found == orphans, (listed, found, orphans)
                        report(
                            f"pulsar_cluster.orphan_audit.s3{'.rgw' if server == 'rgw' else ''}"
                            f"{place.suffix}",  # type: ignore[attr-defined]
                            best_audit[0],
                            best_list[0],
                            "s",
                            higher_is_better=False,
                            client_cpu_s=round(best_audit[1], 3),
                            baseline_client_cpu_s=round(best_list[1], 3),
                            objects=written,
                            orphans=orphans,
                            topics=len(pairs),
                            round=round_ + 1,
                            placement=place.name,  # type: ignore[attr-defined]
                            server=what,
                            fill=fill if server == "moto" else "put",
                            fill_s=round(fill_s, 1),
                            baseline_what="a bare boto3 list_objects_v2 pass over the same keys",
                            goal_ratio=1.5,
                        )
                finally:
                    if cpus:
                        _pin_process(os.getpid(), everything)
        store.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench pulsar_cluster", description=__doc__)
    parser.add_argument("--topics", type=int, default=10_000, help="topics (10000)")
    parser.add_argument("--ledgers", type=int, default=5, help="ledgers per topic (5)")
    parser.add_argument("--objects", type=int, default=100_000, help="objects audited (100000)")
    parser.add_argument(
        "--stores", default="file,s3", help="audit cases: file (a local store), s3 (moto)"
    )
    parser.add_argument(
        "--fill",
        choices=("prefill", "put"),
        default="prefill",
        help="how the S3 bucket is filled: prefill (moto's process writes the objects into its "
        "own backend before it serves; default) or put (PUT over HTTP, ~7 ms per object)",
    )
    parser.add_argument(
        "--s3-server",
        choices=("moto", "rgw"),
        default="moto",
        help="the S3 server of the s3 case: moto (own process; default) or rgw (Ceph's "
        "radosgw, filled by PUT on 32 threads; moto when it cannot start)",
    )
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    stores = {s.strip() for s in args.stores.split(",") if s.strip()}
    placements = parse_placements(args.placement)
    from kazoo.client import KazooClient

    from devservers import zookeeper

    reason = zookeeper.unavailable_reason()
    if reason is not None:
        note(f"bench pulsar_cluster: skipped, ZooKeeper cannot run here ({reason})")
        return 0
    with zookeeper.start_zookeeper() as server:
        client = KazooClient(hosts=server.hosts, timeout=30)
        client.start(timeout=60)
        try:
            pairs = _populate(client, args.topics, args.ledgers)
            url = server.url("/bench")
            _ours(url)  # warm: imports, the first connection
            _bare(client)
            best_ours = best_bare = (float("inf"), 0.0)
            ledgers = 0
            for _ in range(3):
                wall, cpu, ledgers = _ours(url)
                best_ours = min(best_ours, (wall, cpu))
                wall, cpu, _n = _timed(lambda: _bare(client))
                best_bare = min(best_bare, (wall, cpu))
            assert ledgers == args.topics * args.ledgers
            report(
                "pulsar_cluster.list_topics",
                best_ours[0],
                best_bare[0],
                "s",
                higher_is_better=False,
                client_cpu_s=round(best_ours[1], 3),
                baseline_client_cpu_s=round(best_bare[1], 3),
                topics=args.topics,
                ledgers_per_topic=args.ledgers,
                compression="lz4",
                baseline_what="bare kazoo get_children + pipelined get of the same nodes",
                goal_ratio=1.5,
                zookeeper_start_s=round(server.start_seconds, 3),
            )
            if "file" in stores:
                _audit(url, pairs, args.objects)
            if "s3" in stores:
                proc = server.process
                _audit_s3(
                    url,
                    None if proc is None else proc.pid,
                    pairs,
                    args.objects,
                    placements,  # type: ignore[arg-type]
                    args.repeat,
                    args.fill,
                    args.s3_server,
                )
        finally:
            client.stop()
            client.close()
    return 0
