"""Where a ``pulsar-messages`` task's CPU goes: one block's stages, timed in this process.

Uploads one ledger of batched entries (``--batch`` messages of ``--message`` bytes, as
``bench pulsar_scan`` does) to moto or RGW, then runs its first block's task the way a Spark
Python worker does, taking each step's thread CPU apart (best of ``--repeat`` per stage, ms):

* ``get``: the ranged GET's request (one per block); ``socket_reads``: the body's reads
  (``read_buffer`` bytes each); ``copy``: their copy into the worker's block buffer;
  ``crc``: the block CRC32C;
* ``framing``: the block's entries walked and each payload copied (``read_task``);
* ``decode``: ``parse_entry`` and ``MessageColumns.add`` per entry; ``flush``: the staged rows
  made Arrow batches (``batch_rows`` / ``batch_bytes``, the source's defaults unless given);
* ``ipc``: the batches struct-wrapped and written as an Arrow stream, as PySpark's serializer
  sends them to the JVM (here into memory).

Beside them, ``task_ms``: the real reader's ``read()`` of the same block, whole (the stages
are a copy of its steps; a sum far from it means they went stale), and the baseline: the
client CPU of a raw boto3 ``read()`` of the block's bytes in one ranged GET, what the download
measure of ``bench pulsar_scan`` spends per block. ``ours`` is the task's CPU; the ratio says
how many downloads of its bytes a task costs.

    python -m bench pulsar_stages [--s3 moto|rgw] [--total 128M] [--block 64M] [--batch 100]
                                  [--message 200] [--repeat 5] [--batch-bytes N]
                                  [--compression none|lz4|zlib|zstd|snappy]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from bench import note, report

_STAGES = ("get", "socket_reads", "copy", "crc", "framing", "decode", "flush", "ipc")


def _task_stages(reader: Any, task: Any) -> tuple[dict[str, float], int, int]:
    """One run of the block's steps: ``(seconds per stage, rows, batches)``."""
    import pyarrow as pa

    from formats.block import iter_block_entries
    from formats.extension import crc32c
    from formats.pulsar.entry import parse_entry
    from offloader.read.objects import check_data_version
    from offloader.spark.buffers import BLOCK_BUFFERS
    from offloader.spark.message_columns import MessageColumns
    from offloader.spark.message_rows import ValueDecoder
    from offloader.spark.tasks import executor_store

    clock = time.thread_time
    took = dict.fromkeys(_STAGES, 0.0)
    ref = task.ref
    size = ref.end - ref.start
    store = executor_store(task.store)
    t = clock()
    body = store.open_range(ref.data_key, ref.start, ref.end)
    check_data_version(body.metadata, ref.data_key, f"ledger {ref.ledger_id}")
    took["get"] = clock() - t
    out = BLOCK_BUFFERS.take(size)
    filled = crc = 0
    step = task.store.settings.read_buffer_size
    while filled < size:
        t = clock()
        chunk = body.read(min(step, size - filled))
        took["socket_reads"] += clock() - t
        t = clock()
        crc = crc32c(chunk, crc)
        took["crc"] += clock() - t
        t = clock()
        out[filled : filled + len(chunk)] = chunk
        took["copy"] += clock() - t
        filled += len(chunk)
    body.close()
    if ref.crc32c is not None and crc != ref.crc32c:
        raise AssertionError(f"block CRC32C 0x{crc:08x}, the index says 0x{ref.crc32c:08x}")
    t = clock()
    entries = [
        (e.entry_id, bytes(e.payload))
        for e in iter_block_entries(
            out[:size], base_offset=ref.start, expected_first_entry_id=ref.first_entry_id
        )
    ]
    took["framing"] = clock() - t
    rows = MessageColumns(
        task.topic,
        reader.arrow_schema,
        ValueDecoder(reader.value_format, reader.avro_schema),
        batch_rows=reader.message_rows,
        batch_bytes=reader.batch_bytes,
        predicates=(),
        decryptor=None,
        first_entries=False,
    )
    batches = []
    for entry_id, payload in entries:
        t = clock()
        parsed = parse_entry(payload, ledger_id=ref.ledger_id, entry_id=entry_id)
        rows.add(parsed, ref.ledger_id, entry_id, entry_id)
        full = rows.full
        took["decode"] += clock() - t
        if full:
            t = clock()
            batches.append(rows.flush())
            took["flush"] += clock() - t
    t = clock()
    batches.append(rows.flush())
    took["flush"] += clock() - t
    done = [b for b in batches if b is not None]
    del entries
    out.release()
    t = clock()
    sink = pa.BufferOutputStream()
    wrapped = [
        pa.RecordBatch.from_arrays(
            [pa.StructArray.from_arrays(b.columns, fields=list(b.schema))], ["_0"]
        )
        for b in done
    ]
    with pa.ipc.new_stream(sink, wrapped[0].schema) as writer:
        for batch in wrapped:
            writer.write_batch(batch)
    took["ipc"] = clock() - t
    return took, sum(b.num_rows for b in done), len(done)


def _best_cpu(repeat: int, fn: Callable[[], Any]) -> float:
    best = None
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        used = time.thread_time() - t
        best = used if best is None else min(best, used)
    assert best is not None
    return best


def _reader(options: dict[str, str]) -> Any:
    from offloader.spark.export_job import binary_schema
    from offloader.spark.messages import PulsarMessagesReader

    return PulsarMessagesReader(options, binary_schema())


def main(argv: list[str]) -> int:
    from bench.pulsar_scan import _upload
    from bench.spark import _server
    from formats.pulsar.compression import CODECS_BY_NAME
    from offloader.spark.source import TaskPartition

    parser = argparse.ArgumentParser(prog="python -m bench pulsar_stages")
    parser.add_argument("--s3", choices=["moto", "rgw"], default="moto")
    parser.add_argument("--total", default="128M")
    parser.add_argument("--block", default="64M")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--message", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch-bytes", default=None)
    parser.add_argument("--compression", choices=sorted(CODECS_BY_NAME), default="none")
    args = parser.parse_args(argv)
    args.ledgers = 1
    with _server(args.s3) as endpoint:
        for key, value in endpoint.env().items():
            os.environ[key] = value
        bucket = endpoint.new_bucket()
        pairs, data_bytes, messages = _upload(endpoint, bucket, args)
        note(f"pulsar_stages: {messages} messages, {data_bytes} bytes")
        options = {"store": f"s3://{bucket}", "endpoint": endpoint.url, "ledgers": pairs[0]}
        if args.batch_bytes:
            options["batch_bytes"] = str(args.batch_bytes)
        reader = _reader(options)
        task = reader.plan()[0]
        ref = task.ref
        best = dict.fromkeys(_STAGES, float("inf"))
        rows = batches = 0
        for _ in range(args.repeat):
            took, rows, batches = _task_stages(reader, task)
            best = {k: min(best[k], took[k]) for k in _STAGES}
        task_cpu = _best_cpu(
            args.repeat, lambda: sum(b.num_rows for b in reader.read(TaskPartition(task)))
        )
        client = endpoint.client()
        key = ref.data_key

        def download() -> int:
            rng = f"bytes={ref.start}-{ref.end - 1}"
            return len(client.get_object(Bucket=bucket, Key=key, Range=rng)["Body"].read())

        raw = _best_cpu(args.repeat, download)
        stages_ms = {k: round(v * 1000, 1) for k, v in best.items()}
        report(
            "pulsar_task_stages",
            task_cpu * 1000,
            raw * 1000,
            "cpu_ms",
            higher_is_better=False,
            stages_ms=stages_ms,
            stages_sum_ms=round(sum(stages_ms.values()), 1),
            block_bytes=ref.end - ref.start,
            entries=ref.last_entry_id - ref.first_entry_id + 1,
            rows=rows,
            batches=batches,
            batch_rows=reader.message_rows,
            batch_bytes=reader.batch_bytes,
            baseline_is="client CPU of a raw boto3 read() of the block's bytes (one ranged GET)",
            what="thread CPU of one block's task in this process, best of --repeat per stage",
            server=args.s3,
        )
    return 0
