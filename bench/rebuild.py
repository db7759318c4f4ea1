"""``metadata rebuild`` against a bare listing, and the upload cost of the bucket manifests.

``python -m bench rebuild [--ledgers 10000] [--offload-ledgers 8] [--ledger-size 32M]
[--segments 10000] [--kafka-segments 4] [--segment-size 128M] [--only pulsar|kafka]``

1. **Rebuild vs listing** (goal: ratio <= 3). A moto server (its own process) gets N ledgers'
   worth of objects: per ledger its data object, its index and its completion marker (written
   directly, small objects, on 16 threads: this is set-up, not measured), in topics of 100
   ledgers, each with its watermark object. Then, in the same run: a bare boto3
   ``list_objects_v2`` pass over the bucket (the baseline), ``metadata rebuild --dry-run``
   (ours: our store's listing, the key parsing and the plan) on a fresh home, and the whole
   rebuild, writing every ledger's SQLite records (the listing again, then one batch, one
   transaction, per topic: ``MetadataStore.batch``), against a second bare listing made just
   before it (the server's speed drifts with the machine's load). The requests both make are
   counted on the S3 client (GETs and HEADs per listed object: 0 is the goal); each row
   carries this process's CPU seconds (``client_cpu_s``; ``baseline_client_cpu_s`` for the
   bare listing).
2. **Upload cost of the manifests** (goal: >= 0.97). Ledgers of 1 KiB entries are offloaded
   to moto through the facade, A/B in the same run: topics with the completion marker and
   watermark object (a marker PUT, a watermark PUT: small requests written on a thread of
   their own while the next ledger uploads), and topics whose two manifest calls are replaced
   by no-ops (the manifests cannot be turned off otherwise: they are what makes the bucket the
   source of truth); after a warm-up offload, four rounds ordered with/without,
   without/with, ..., M/4 ledgers each (each topic deleted after its round). ``ours`` is the
   throughput with them, ``baseline`` without.
3. **Kafka rebuild vs listing** (``--segments``, default 10,000; goal <= 3). Per segment its
   ``.log``, ``.index`` and ``.timeindex`` (tiny) and its completion marker, in 10 topics of 10
   partitions of 100 segments, each partition with its watermark object; the same bare
   ``list_objects_v2`` pass, then ``metadata rebuild --dry-run`` and a rebuild writing the
   SQLite records of one topic (1,000 segments). GETs and HEADs per segment counted. Then
   the marker bodies' GETs (one per recorded copy) before/after in the same run: the same
   topic rebuilt on two fresh homes, first with one GET at a time (``body_concurrency`` 1,
   the serial read of before), then with the default window of GETs in flight; each row
   gives the Kafka rebuilder's apply time (the GETs and the SQLite writes) beside the whole
   rebuild's, with client CPU.
4. **Kafka upload cost of the manifests** (``--kafka-segments``, ``--segment-size``; goal
   >= 0.97): a log directory of closed segments uploaded to moto, the marker and watermark
   calls timed around those calls inside the same run. Each figure has the client's CPU
   seconds beside it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import note, report
from bench.common import moto_process, quiet_logs, raw_client
from devservers.endpoint import S3Endpoint

if TYPE_CHECKING:
    from offloader.rebuild import RebuildReport

TOPICS_OF = 100  # ledgers per topic in the rebuild benchmark


def _populate(endpoint: S3Endpoint, bucket: str, prefix: str, ledgers: int) -> int:
    """Write N ledgers' data, index and marker (and a watermark per topic); the key count."""
    from formats.keys import data_key, index_key
    from formats.manifest import (
        LEDGERS_KIND,
        LedgerMarker,
        encode_marker_body,
        encode_watermark_body,
        ledger_marker_key,
        watermark_key,
    )

    client = raw_client(endpoint, pool=32)
    data, index = b"d" * 64, b"i" * 32

    def one(ledger_id: int) -> None:
        attempt = str(uuid.UUID(int=ledger_id + 1))
        name = f"bench/rebuild/persistent/t{ledger_id // TOPICS_OF}"
        marker = LedgerMarker(
            name, ledger_id, attempt, 10, 640, len(data), len(index), 0, "none", 1, 2, 3
        )
        client.put_object(Bucket=bucket, Key=prefix + data_key(attempt, ledger_id), Body=data)
        client.put_object(Bucket=bucket, Key=prefix + index_key(attempt, ledger_id), Body=index)
        body = encode_marker_body(marker)
        client.put_object(Bucket=bucket, Key=prefix + ledger_marker_key(marker), Body=body)
        if ledger_id % TOPICS_OF == TOPICS_OF - 1 or ledger_id == ledgers - 1:
            key = watermark_key(LEDGERS_KIND, name, ledger_id, attempt)
            wm = encode_watermark_body(LEDGERS_KIND, name, ledger_id, attempt, 3)
            client.put_object(Bucket=bucket, Key=prefix + key, Body=wm)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(ledgers)))
    return 3 * ledgers + -(-ledgers // TOPICS_OF)


def _bare_listing(endpoint: S3Endpoint, bucket: str, prefix: str) -> tuple[float, int]:
    client = raw_client(endpoint)
    started = time.perf_counter()
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        count += len(page.get("Contents", []))
    return time.perf_counter() - started, count


def _offloader(home: Path, url: str, endpoint: S3Endpoint, **broker: Any) -> Any:
    from offloader.api import BrokerSettings, Offloader
    from offloader.config import OffloadSettings

    settings = BrokerSettings(
        min_rollover_seconds=0,
        offload=OffloadSettings(offload_concurrency=4),
        **broker,
    )
    return Offloader.from_settings(
        home, url, endpoint_url=endpoint.url, region=endpoint.region, broker=settings
    )


def _count_requests(off: Any) -> dict[str, int]:
    """Every S3 operation the offloader's client makes from now on, by name."""
    counts: dict[str, int] = {}

    def seen(model: Any, **_: Any) -> None:
        counts[model.name] = counts.get(model.name, 0) + 1

    off.runtime.store._client.meta.events.register("before-call.s3", seen)
    return counts


@dataclass(frozen=True)
class _DryRun:
    """A filled bucket, its bare listing and the offloader's dry-run rebuild of it."""

    bucket: str
    keys: int
    bare: float
    bare_cpu: float
    dry: RebuildReport
    ours: float
    ours_cpu: float
    requests: dict[str, int]


def _fill_and_dry_run(
    endpoint: S3Endpoint,
    tmp: Path,
    what: str,
    populate: Callable[[S3Endpoint, str, str, int], int],
    count: int,
    prefix: str,
) -> _DryRun:
    """A new bucket filled by ``populate`` under ``prefix``, listed bare (wall and CPU s), then
    rebuilt as a dry run by a fresh home (wall and CPU s, and its S3 calls by name)."""
    bucket = f"{what}-{uuid.uuid4().hex[:12]}"
    raw_client(endpoint).create_bucket(Bucket=bucket)
    started = time.perf_counter()
    keys = populate(endpoint, bucket, prefix, count)
    note(f"bench {what}: {keys} objects written in {time.perf_counter() - started:.1f} s")
    cpu = time.process_time()
    bare, listed = _bare_listing(endpoint, bucket, prefix)
    bare_cpu = time.process_time() - cpu
    assert listed == keys, (listed, keys)
    off = _offloader(tmp / f"{what}-dry-home", f"s3://{bucket}/{prefix.rstrip('/')}", endpoint)
    counts = _count_requests(off)
    started, cpu = time.perf_counter(), time.process_time()
    dry = off.metadata_rebuild(dry_run=True)
    ours, ours_cpu = time.perf_counter() - started, time.process_time() - cpu
    off.close()
    return _DryRun(bucket, keys, bare, bare_cpu, dry, ours, ours_cpu, dict(counts))


def _rebuild_vs_listing(endpoint: S3Endpoint, ledgers: int, tmp: Path) -> None:
    run = _fill_and_dry_run(endpoint, tmp, "rebuild", _populate, ledgers, "r/")
    bucket, keys, bare, bare_cpu = run.bucket, run.keys, run.bare, run.bare_cpu
    dry, ours, dry_cpu, requests = run.dry, run.ours, run.ours_cpu, run.requests
    assert dry.count("offload") == ledgers and dry.count("problem") == 0
    # the whole rebuild: the same listing, then every ledger's records written into SQLite
    # (one batch, one transaction, per topic)
    # the bare listing again, just before: the server's speed drifts with the machine's load
    cpu = time.process_time()
    bare_again, _ = _bare_listing(endpoint, bucket, "r/")
    bare_again_cpu = time.process_time() - cpu
    off = _offloader(tmp / "home", f"s3://{bucket}/r", endpoint)
    counts = _count_requests(off)
    started, cpu = time.perf_counter(), time.process_time()
    written = off.metadata_rebuild()
    write_seconds, write_cpu = time.perf_counter() - started, time.process_time() - cpu
    off.close()
    wrote = written.count("offload")
    assert wrote == ledgers and written.count("problem") == 0
    gets = requests.get("GetObject", 0) + counts.get("GetObject", 0)
    heads = requests.get("HeadObject", 0) + counts.get("HeadObject", 0)
    common = {
        "ledgers": ledgers,
        "objects": keys,
        "list_requests": requests.get("ListObjectsV2", 0),
        "upload_list_requests": requests.get("ListMultipartUploads", 0),
        "gets_per_object": round(gets / 2 / keys, 4),
        "heads_per_object": round(heads / 2 / keys, 4),
        "baseline_client_cpu_s": round(bare_cpu, 3),
        "server": "moto (own process)",
    }
    report(
        f"rebuild.dry_run_vs_list.{ledgers}",
        ours,
        bare,
        "s",
        higher_is_better=False,
        client_cpu_s=round(dry_cpu, 3),
        store_calls=dict(dry.requests),
        **common,
    )
    common["baseline_client_cpu_s"] = round(bare_again_cpu, 3)
    report(
        f"rebuild.write_vs_list.{ledgers}",
        write_seconds,
        bare_again,
        "s",
        higher_is_better=False,
        client_cpu_s=round(write_cpu, 3),
        store_calls=dict(written.requests),
        # the records' cost: the client CPU beyond the dry run's (listing and plan)
        write_cpu_ms_per_ledger=round(1000 * max(write_cpu - dry_cpu, 0) / wrote, 3),
        **common,
    )


def _offload_cost(endpoint: S3Endpoint, ledgers: int, ledger_size: int, tmp: Path) -> None:
    from offloader.offload import commit

    bucket = f"offload-{uuid.uuid4().hex[:12]}"
    raw_client(endpoint).create_bucket(Bucket=bucket)
    entry = 1024
    per_ledger = max(1, ledger_size // entry)
    off = _offloader(
        tmp / "offload-home", f"s3://{bucket}/o", endpoint, max_entries_per_ledger=per_ledger
    )
    off.create_namespace("bench/offload")
    payload = [bytes([i % 251]) * entry for i in range(per_ledger)]
    rounds = 4
    per = max(1, ledgers // rounds)
    marker, watermark = commit.write_ledger_marker, commit.advance_watermark

    def skip(*_args: Any, **_kwargs: Any) -> None:
        return None

    def one(topic: str, manifests: bool) -> tuple[float, float, int]:
        for _ in range(per):
            off.produce(topic, payload)
        off.roll_over(topic)
        if not manifests:
            commit.write_ledger_marker = skip  # type: ignore[assignment]
            commit.advance_watermark = skip  # type: ignore[assignment]
        try:
            started, cpu = time.perf_counter(), time.process_time()
            trigger = off.offload_prefix(topic, size_threshold=0)
            spent = (time.perf_counter() - started, time.process_time() - cpu)
        finally:
            commit.write_ledger_marker, commit.advance_watermark = marker, watermark
        assert len(trigger.offloaded) >= per and not trigger.failed, trigger
        off.delete_topic(topic)  # its objects too: moto keeps every object in memory
        return spent[0], spent[1], len(trigger.offloaded)

    one("persistent://bench/offload/warm-up", True)  # clients, pools, the first topic's LIST
    totals = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # seconds, CPU s, ledgers
    for round_ in range(rounds):  # with/without, then without/with: ABBA against the drift
        for manifests in (True, False) if round_ % 2 == 0 else (False, True):
            spent = one(f"persistent://bench/offload/{manifests}-{round_}", manifests)
            for i in range(3):
                totals[manifests][i] += spent[i]
    off.close()
    mb = {v: t[2] * per_ledger * entry / 1e6 for v, t in totals.items()}
    report(
        "rebuild.offload_with_manifests",
        mb[True] / totals[True][0],
        mb[False] / totals[False][0],
        "MB/s",
        ledgers_each=int(totals[True][2]),
        ledger_bytes=per_ledger * entry,
        offload_seconds=round(totals[True][0], 3),
        baseline_offload_seconds=round(totals[False][0], 3),
        client_cpu_s=round(totals[True][1], 3),
        baseline_client_cpu_s=round(totals[False][1], 3),
        server="moto (own process)",
        method="A/B in one run: topics offloaded with the marker and watermark, and topics "
        "with both calls replaced by no-ops, in four rounds ordered ABBA after a warm-up "
        "offload (the manifests overlap the next ledger's upload, so their cost is no longer "
        "a sum of their calls)",
    )


KAFKA_TOPICS, KAFKA_PARTITIONS = 10, 10  # the Kafka rebuild's segments spread over these


def _populate_kafka(endpoint: S3Endpoint, bucket: str, prefix: str, segments: int) -> int:
    """N Kafka segments' objects and markers (and a watermark per partition); the key count."""
    from formats.kafka.manifest import (
        KAFKA_KIND,
        SegmentMarker,
        encode_segment_marker_body,
        segment_marker_key,
        watermark_name,
    )
    from formats.kafka.names import KafkaKeyScheme, scheme_key, uuid_to_kafka
    from formats.manifest import encode_watermark_body, watermark_key

    client = raw_client(endpoint, pool=32)
    scheme = KafkaKeyScheme()
    per_partition = -(-segments // (KAFKA_TOPICS * KAFKA_PARTITIONS))
    kinds = ("log", "index", "timeindex")
    log_body = b"l" * 64

    def one(n: int) -> None:
        slot, number = divmod(n, per_partition)
        topic, partition = f"t{slot // KAFKA_PARTITIONS}", slot % KAFKA_PARTITIONS
        topic_id = uuid_to_kafka(uuid.UUID(int=slot // KAFKA_PARTITIONS + 1))
        segment_id = uuid_to_kafka(uuid.UUID(int=n + 1))
        base = number * 100
        keys = {
            k: scheme_key(scheme, topic, topic_id, partition, base, segment_id, k) for k in kinds
        }
        marker = SegmentMarker(
            topic, topic_id, partition, base, segment_id, base, base + 99, 5, len(log_body), 0,
            "none", kinds, 3, {0: 0}, "none", keys,
        )  # fmt: skip
        for kind, key in keys.items():
            client.put_object(
                Bucket=bucket, Key=prefix + key, Body=log_body if kind == "log" else b"i"
            )
        body = encode_segment_marker_body(marker)
        client.put_object(Bucket=bucket, Key=prefix + segment_marker_key(marker), Body=body)
        if number == per_partition - 1 or n == segments - 1:
            name = watermark_name(topic, topic_id, partition)
            tag = marker.segment_uuid
            key = watermark_key(KAFKA_KIND, name, base + 99, tag)
            wm = encode_watermark_body(KAFKA_KIND, name, base + 99, tag, 3)
            client.put_object(Bucket=bucket, Key=prefix + key, Body=wm)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(segments)))
    return 4 * segments + -(-segments // per_partition)


def _kafka_rebuild_vs_listing(endpoint: S3Endpoint, segments: int, tmp: Path) -> None:
    run = _fill_and_dry_run(endpoint, tmp, "krebuild", _populate_kafka, segments, "k/")
    bucket, keys, bare, bare_cpu = run.bucket, run.keys, run.bare, run.bare_cpu
    dry, ours, ours_cpu, requests = run.dry, run.ours, run.ours_cpu, run.requests
    found = [i for i in dry.items if i.kind == "kafka-segments" and i.action == "offload"]
    assert len(found) == segments and dry.count("problem") == 0, dry.summary()
    off = _offloader(tmp / "kafka-home", f"s3://{bucket}/k", endpoint)
    started = time.perf_counter()
    written = off.metadata_rebuild(topics="t0")
    write_seconds = time.perf_counter() - started
    wrote = len([i for i in written.items if i.kind == "kafka-segments" and i.action == "offload"])
    assert len(off.kafka().ctx.meta.list_segments()) == wrote
    off.close()
    gets, heads = requests.get("GetObject", 0), requests.get("HeadObject", 0)
    _kafka_body_reads(endpoint, bucket, tmp)
    record = report(
        f"rebuild.kafka_dry_run_vs_list.{segments}",
        ours,
        bare,
        "s",
        higher_is_better=False,
        segments=segments,
        objects=keys,
        list_requests=requests.get("ListObjectsV2", 0),
        gets_per_segment=round(gets / segments, 4),
        heads_per_segment=round(heads / segments, 4),
        client_cpu_s=round(ours_cpu, 3),
        baseline_client_cpu_s=round(bare_cpu, 3),
        rebuild_with_sqlite_writes_s=round(write_seconds, 3),
        rebuild_with_sqlite_writes_segments=wrote,
        sqlite_write_ms_per_segment=round(1000 * max(write_seconds - ours, 0) / max(wrote, 1), 2),
        server="moto (own process)",
    )
    note(
        f"kafka rebuild of {segments} segments: {ours:.2f} s vs a bare listing {bare:.2f} s "
        f"(ratio {record['ratio']}; client CPU {record['client_cpu_s']} s vs "
        f"{record['baseline_client_cpu_s']} s; GETs/segment {record['gets_per_segment']}, "
        f"HEADs/segment {record['heads_per_segment']})"
    )


def _kafka_body_reads(endpoint: S3Endpoint, bucket: str, tmp: Path) -> None:
    """Topic t0 rebuilt with its marker bodies read serially, then concurrently (one run)."""
    from offloader.rebuild.kafka_segments import KafkaSegments

    apply = KafkaSegments.apply
    runs: dict[int, dict[str, float]] = {}
    default = KafkaSegments.body_concurrency
    for concurrency in (1, default):
        spent: list[float] = []
        KafkaSegments.body_concurrency = concurrency
        KafkaSegments.apply = _timed(apply, spent)  # type: ignore[method-assign]
        off = _offloader(tmp / f"kafka-bodies-{concurrency}", f"s3://{bucket}/k", endpoint)
        try:
            cpu, started = time.process_time(), time.perf_counter()
            done = off.metadata_rebuild(topics="t0")
            whole, cpu = time.perf_counter() - started, time.process_time() - cpu
        finally:
            KafkaSegments.apply = apply  # type: ignore[method-assign]
            KafkaSegments.body_concurrency = default
            off.close()
        recorded = done.count("offload")
        assert recorded and done.gets == recorded, done.summary()
        runs[concurrency] = {
            "apply": sum(spent),
            "whole": whole,
            "cpu": cpu,
            "gets": done.gets,
            "records": recorded,
        }
    serial, ours = runs[1], runs[default]
    record = report(
        "rebuild.kafka_marker_bodies",
        ours["apply"],
        serial["apply"],
        "s",
        higher_is_better=False,
        segments=ours["records"],
        gets=ours["gets"],
        body_concurrency=default,
        rebuild_s=round(ours["whole"], 3),
        baseline_rebuild_s=round(serial["whole"], 3),
        client_cpu_s=round(ours["cpu"], 3),
        baseline_client_cpu_s=round(serial["cpu"], 3),
        server="moto (own process)",
        method="one run: the same topic rebuilt on two fresh homes, one marker-body GET at a "
        "time (baseline), then the default window in flight (ours); the times are the Kafka "
        "rebuilder's apply (GETs and SQLite writes), the rebuild_s fields the whole rebuild "
        "with its listing",
    )
    note(
        f"kafka rebuild of {ours['records']} segments' records: apply {ours['apply']:.2f} s with "
        f"{default} GETs in flight vs {serial['apply']:.2f} s one at a time (ratio "
        f"{record['ratio']}; whole rebuild {ours['whole']:.1f} s vs {serial['whole']:.1f} s; "
        f"client CPU {ours['cpu']:.2f} s vs {serial['cpu']:.2f} s)"
    )


def _timed(func: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    """``func``, its calls' wall time appended to ``spent``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    return wrapper


def _kafka_upload_cost(endpoint: S3Endpoint, segments: int, segment_size: int, tmp: Path) -> None:
    from bench.kafka import write_segment
    from offloader.api import KafkaSettings
    from offloader.kafka import upload

    log_dir = tmp / "kafka-logs"
    total_bytes = 0
    for partition in range(segments):
        log, _ = write_segment(log_dir, segment_size, partition=partition)
        total_bytes += log.stat().st_size
    bucket = f"kupload-{uuid.uuid4().hex[:12]}"
    raw_client(endpoint).create_bucket(Bucket=bucket)
    off = _offloader(tmp / "kafka-upload-home", f"s3://{bucket}/u", endpoint)
    tier = off.kafka(KafkaSettings(part_size=8 * 1024 * 1024, concurrency=4))
    spent: list[float] = []
    marker, watermark = upload.write_segment_marker, upload.raise_partition_watermark
    upload.write_segment_marker = _timed(marker, spent)  # type: ignore[assignment]
    upload.raise_partition_watermark = _timed(watermark, spent)  # type: ignore[assignment]
    try:
        cpu, started = time.process_time(), time.perf_counter()
        result = tier.upload(log_dir)
        total = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        upload.write_segment_marker, upload.raise_partition_watermark = marker, watermark
    off.close()
    done = len(result.of("uploaded"))
    assert result.ok and done == segments, result
    manifests = sum(spent)
    size_mb = total_bytes / 1e6
    record = report(
        "rebuild.kafka_upload_with_manifests",
        size_mb / total,
        size_mb / (total - manifests),
        "MB/s",
        segments=done,
        segment_bytes=total_bytes // max(done, 1),
        manifest_seconds=round(manifests, 3),
        manifest_ms_per_segment=round(1000 * manifests / max(done, 1), 2),
        upload_seconds=round(total, 3),
        client_cpu_s=round(cpu, 3),
        server="moto (own process)",
        method="marker and watermark calls timed inside the same upload run",
    )
    note(
        f"kafka upload with manifests: {record['ours']:.1f} vs {record['baseline']:.1f} MB/s "
        f"without their time (ratio {record['ratio']}; {record['manifest_ms_per_segment']} ms "
        f"per segment; client CPU {record['client_cpu_s']} s)"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench rebuild", description=__doc__)
    parser.add_argument("--ledgers", type=int, default=10_000, help="ledgers to rebuild (10000)")
    parser.add_argument(
        "--offload-ledgers",
        type=int,
        default=8,
        help="ledgers offloaded per variant, in four rounds (8)",
    )
    parser.add_argument("--ledger-size", default="32M", help="bytes per offloaded ledger (32M)")
    parser.add_argument("--segments", type=int, default=10_000, help="Kafka segments (10000)")
    parser.add_argument(
        "--kafka-segments", type=int, default=4, help="Kafka segments to upload (4)"
    )
    parser.add_argument("--segment-size", default="128M", help="bytes per uploaded segment (128M)")
    parser.add_argument(
        "--only", choices=("pulsar", "kafka"), help="run one side's benchmarks only"
    )
    args = parser.parse_args(argv)
    from offloader.units import parse_size

    quiet_logs()
    with (
        tempfile.TemporaryDirectory(prefix="bench-rebuild.") as tmp,
        moto_process() as (
            endpoint,
            _pid,
        ),
    ):
        os.environ.update(endpoint.env())  # the Offloader's S3 client finds moto's keys
        if args.only != "kafka":
            if args.ledgers > 0:  # 0: only the upload cost
                _rebuild_vs_listing(endpoint, args.ledgers, Path(tmp))
            size = parse_size(args.ledger_size)
            _offload_cost(endpoint, args.offload_ledgers, size, Path(tmp))
        if args.only != "pulsar":
            if args.segments > 0:
                _kafka_rebuild_vs_listing(endpoint, args.segments, Path(tmp))
            size = parse_size(args.segment_size)
            _kafka_upload_cost(endpoint, args.kafka_segments, size, Path(tmp))
    return 0
