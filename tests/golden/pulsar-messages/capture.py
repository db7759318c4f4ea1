"""Recapture the golden Pulsar message entries with the official client (pulsar-client, dev
extra) producing to the fake broker of tests/servers/fake_pulsar.py.

    .venv/bin/python tests/golden/pulsar-messages/capture.py [OUTDIR]

Writes ``<case>.entries`` (each SEND's entry bytes as ``length u32 | entry``, in send order)
and ``manifest.json`` (what the client was asked to send, per case) into OUTDIR (default: this
directory). Values come from a seeded PRNG, so a recapture differs only in publish times, the
producer's random encryption keys and IVs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

import pulsar  # noqa: E402
from pulsar.schema import AvroSchema, Float, Integer, JsonSchema, Record, String  # noqa: E402

from tests.servers.fake_pulsar import FakeBroker  # noqa: E402

CHUNK_LIMIT = 20_000  # max_message_size the fake broker announces (makes the client chunk)
CODECS = {
    "none": pulsar.CompressionType.NONE,
    "lz4": pulsar.CompressionType.LZ4,
    "zlib": pulsar.CompressionType.ZLib,
    "zstd": pulsar.CompressionType.ZSTD,
    "snappy": pulsar.CompressionType.SNAPPY,
}


class Reading(Record):
    sensor = String()
    value = Float()
    count = Integer()


def _messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        msg: dict[str, Any] = {
            "value": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
            if i % 3
            else (f"text message {i} " * 5).encode()
        }
        if i % 2 == 0:
            msg["key"] = f"key-{i % 4}"
        if i % 4 == 1:
            msg["ordering_key"] = f"ok-{i}"
        if i % 3 == 0:
            msg["properties"] = {"n": str(i), "kind": "golden"}
        if i % 2 == 1:
            msg["event_time"] = 1_700_000_000_000 + i
        if i == n - 2:
            msg["value"] = None  # a null value (tombstone)
        out.append(msg)
    return out


def _send(producer: Any, msg: dict[str, Any], content: Any = None) -> None:
    producer.send_async(
        msg["value"] if content is None else content,
        None,
        properties=msg.get("properties"),
        partition_key=msg.get("key"),
        ordering_key=msg.get("ordering_key"),
        event_timestamp=msg.get("event_time"),
    )


def _jsonable(msg: dict[str, Any]) -> dict[str, Any]:
    out = dict(msg)
    value = out.pop("value")
    if isinstance(value, bytes) and len(value) > 4096:  # large values: their digest only
        out["value_sha256"] = hashlib.sha256(value).hexdigest()
        out["value_len"] = len(value)
    elif isinstance(value, bytes | None):
        out["value_b64"] = None if value is None else base64.b64encode(value).decode()
    else:
        out["record"] = value
    return out


def capture(outdir: Path) -> None:
    rng = random.Random(20261125)
    keys = tempfile.mkdtemp()
    cases: list[dict[str, Any]] = []
    with FakeBroker(max_message_size=CHUNK_LIMIT) as broker:
        client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())

        def run(name: str, msgs: list[dict[str, Any]], records: bool = False, **opts: Any) -> None:
            topic = f"persistent://public/golden/{name}"
            producer = client.create_producer(topic, producer_name=f"golden-{name}", **opts)
            for msg in msgs:
                _send(producer, msg, msg["value"] if records else None)
            producer.flush()
            producer.close()
            described = {
                k: (v if isinstance(v, int | str | bool) else str(v))
                for k, v in opts.items()
                if k not in ("schema", "crypto_key_reader")
            }
            stored = [
                _jsonable({**m, "value": m["value"].__dict__ if records else m["value"]})
                for m in msgs
            ]
            if records:
                for m, src in zip(stored, msgs, strict=True):
                    m["record"] = {
                        k: getattr(src["value"], k) for k in ("sensor", "value", "count")
                    }
            cases.append({"name": name, "topic": topic, "producer": described, "messages": stored})

        base = _messages(rng, 12)
        for codec, value in CODECS.items():
            run(
                f"batch-{codec}",
                base,
                batching_enabled=True,
                batching_max_messages=100,
                batching_max_publish_delay_ms=1000,
                compression_type=value,
            )
            run(f"single-{codec}", base[:6], batching_enabled=False, compression_type=value)
        big = [{"value": rng.randbytes(50_000), "key": "big", "properties": {"part": "chunked"}}]
        run("chunked-none", big, chunking_enabled=True, batching_enabled=False)
        text = [{"value": rng.randbytes(30_000) + b"compressible text " * 2000, "key": "big-lz4"}]
        run(
            "chunked-lz4",
            text,
            chunking_enabled=True,
            batching_enabled=False,
            compression_type=pulsar.CompressionType.LZ4,
        )
        readings = [
            {"value": Reading(sensor=f"s{i % 3}", value=i * 1.5, count=i), "key": f"s{i % 3}"}
            for i in range(8)
        ]
        run(
            "json-schema",
            readings,
            records=True,
            schema=JsonSchema(Reading),
            batching_enabled=True,
            batching_max_publish_delay_ms=1000,
        )
        run(
            "avro-schema",
            readings,
            records=True,
            schema=AvroSchema(Reading),
            batching_enabled=False,
        )
        public, private = _rsa_files(Path(keys))
        reader = pulsar.CryptoKeyReader(str(public), str(private))
        run(
            "encrypted-batch-zstd",
            base[:5],
            batching_enabled=True,
            batching_max_publish_delay_ms=1000,
            compression_type=pulsar.CompressionType.ZSTD,
            encryption_key="golden-key",
            crypto_key_reader=reader,
        )
        client.close()
        by_topic: dict[str, list[bytes]] = {}
        for sent in broker.sent:
            by_topic.setdefault(sent.topic, []).append(sent.entry)
        for case in cases:
            entries = by_topic.get(case["topic"], [])
            case["entries"] = f"{case['name']}.entries"
            case["entry_count"] = len(entries)
            with open(outdir / case["entries"], "wb") as fh:
                for entry in entries:
                    fh.write(len(entry).to_bytes(4, "big") + entry)
            schema = broker.schemas.get(case["topic"])
            if schema is not None:
                case["schema_command_b64"] = base64.b64encode(schema).decode()
    manifest = {
        "client": f"pulsar-client {pulsar.__version__ if hasattr(pulsar, '__version__') else '?'}",
        "chunk_limit": CHUNK_LIMIT,
        "private_key": "golden-private.pem",
        "cases": cases,
    }
    (outdir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (outdir / "golden-private.pem").write_bytes(Path(private).read_bytes())


def _rsa_files(folder: Path) -> tuple[Path, Path]:
    from formats.pulsar.crypto import generate_rsa_pem

    private, public = generate_rsa_pem()
    (folder / "public.pem").write_bytes(public)
    (folder / "private.pem").write_bytes(private)
    return folder / "public.pem", folder / "private.pem"


def _quiet_logger() -> Any:
    import logging

    logger = logging.getLogger("pulsar-capture")
    logger.setLevel(logging.WARNING)
    return logger


if __name__ == "__main__":
    capture(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
