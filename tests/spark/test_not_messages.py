"""``pulsar-messages`` over ledgers that are not in Pulsar message format (raw entries, Pulsar's
golden objects): found on the driver before the job starts, named, failed on or skipped
(``on_error``), and named by the executors too when a later entry is not a message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from devservers.endpoint import S3Endpoint
from formats.keys import data_key
from formats.pulsar import NotPulsarMessagesError, OutgoingMessage, encode_entry
from offloader.errors import ConfigError
from offloader.spark import message_probe, register
from offloader.spark.message_probe import PROBE_BYTES
from offloader.spark.message_rows import messages_arrow_schema
from offloader.spark.messages import PulsarMessagesReader
from offloader.spark.tasks import CountingStore
from tests.spark.conftest import TOPIC_A, TOPIC_B, Ledger, upload_ledger
from tests.spark.test_golden_and_errors import MANIFEST, _upload_golden

pytestmark = [pytest.mark.spark, pytest.mark.s3]

T0 = 1_750_000_000_000
GOLDEN = next(c for c in MANIFEST["cases"] if c["name"] == "multi-block")  # ledger 12


def _messages(count: int, tag: str) -> list[bytes]:
    return [
        encode_entry(
            [OutgoingMessage(f"{tag}{i}".encode(), key=tag)],
            producer_name="p",
            sequence_id=i,
            publish_time=T0 + i,
            batch=False,
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def mixed(s3_endpoint: S3Endpoint) -> dict[str, Any]:
    """One bucket: ledger 1 of messages (several blocks, no zone maps), ledger 3 of messages
    with zone maps, ledger 2 of raw entries (``entry-N``) and Pulsar's golden ledger 12 of raw
    entries. Another bucket: ledger 4 of messages but for its entry 5."""
    bucket = s3_endpoint.new_bucket()
    ledgers = {
        1: upload_ledger(
            s3_endpoint, bucket, 1, _messages(30, "a"), 1024, managed_ledger_name=TOPIC_A[1]
        ),
        2: upload_ledger(
            s3_endpoint,
            bucket,
            2,
            [f"entry-{i}".encode() for i in range(40)],
            1024,
            managed_ledger_name=TOPIC_B[1],
        ),
        3: upload_ledger(
            s3_endpoint,
            bucket,
            3,
            _messages(20, "z"),
            1024,
            managed_ledger_name=TOPIC_A[1],
            zone_maps=True,
        ),
    }
    golden_uuid = _upload_golden(s3_endpoint, bucket, GOLDEN)
    other = s3_endpoint.new_bucket()
    entries = _messages(10, "m")
    entries[5] = b"entry-5"
    later = upload_ledger(s3_endpoint, other, 4, entries, 64 * 1024)
    return {
        "bucket": bucket,
        "ledgers": ledgers,
        "golden_uuid": golden_uuid,
        "other": other,
        "later": later,
    }


def _reader(endpoint: S3Endpoint, bucket: str, **options: str) -> PulsarMessagesReader:
    from pyspark.sql.pandas.types import from_arrow_schema

    opts = {"store": f"s3://{bucket}", "endpoint": endpoint.url, **options}
    return PulsarMessagesReader(opts, from_arrow_schema(messages_arrow_schema()))


def _raw_ledger(mixed: dict[str, Any]) -> Ledger:
    ledger: Ledger = mixed["ledgers"][2]
    return ledger


def test_discover_fails_on_the_driver_naming_the_ledger(
    mixed: dict[str, Any], aws_env: S3Endpoint
) -> None:
    reader = _reader(aws_env, mixed["bucket"], discover="true")
    with pytest.raises(NotPulsarMessagesError) as info:
        reader.partitions()
    raw = _raw_ledger(mixed)
    assert str(info.value) == (
        f"ledger 2 (managed ledger {TOPIC_B[1]}, object {data_key(raw.uuid, 2)} of "
        f"s3://{mixed['bucket']}) entry 0 is not in Pulsar message format: metadata of "
        "1701737586 bytes does not fit the entry (3 bytes left; no Pulsar magic 0x0e01 or "
        "0x0e02 at its start); read its entries with the offloaded-ledger source, or set the "
        "option on_error=skip to leave such ledgers out (1 more ledger of this read too)"
    )
    assert (info.value.ledger_id, info.value.entry_id) == (2, 0)


def test_skip_leaves_them_out_with_one_warning_and_one_small_get_each(
    mixed: dict[str, Any], aws_env: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes: list[CountingStore] = []
    ranges: list[int] = []
    plain = message_probe.task_store

    def counted(task: Any, store: Any) -> Any:
        view = CountingStore(plain(task, store))
        original = view.get_range

        def get_range(key: str, start: int, end: int) -> Any:
            ranges.append(end - start)
            return original(key, start, end)

        view.get_range = get_range  # type: ignore[method-assign]
        probes.append(view)
        return view

    monkeypatch.setattr(message_probe, "task_store", counted)
    reader = _reader(aws_env, mixed["bucket"], discover="true", on_error="skip")
    with capture_logs() as logs:
        parts = reader.partitions()
    tasks = [p.task for p in parts]  # type: ignore[attr-defined]
    assert sorted({t.ledger_id for t in tasks}) == [1, 3]
    assert len(tasks) == len(mixed["ledgers"][1].blocks) + len(mixed["ledgers"][3].blocks)
    # ledgers 1, 2 and 12 have no zone maps: one GET of their first block's head each;
    # ledger 3's zone maps say its entries are messages: no GET
    assert sum(p.gets for p in probes) == 3
    assert all(r <= 128 + 12 + PROBE_BYTES for r in ranges), ranges
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert warning["event"] == "ledgers left out: not in Pulsar message format (on_error=skip)"
    assert warning["ledgers"] == 2
    left_out = warning["left_out"]
    assert f"ledger 2 (managed ledger {TOPIC_B[1]}, object" in left_out
    assert f"ledger 12 (object {data_key(mixed['golden_uuid'], 12)}" in left_out
    assert "1701737586 bytes" in left_out
    # the rows of the other ledgers are all there
    rows = [r for part in parts for batch in reader.read(part) for r in batch.to_pylist()]
    assert sorted(r["value"] for r in rows) == sorted(
        [f"a{i}".encode() for i in range(30)] + [f"z{i}".encode() for i in range(20)]
    )


def test_on_error_takes_fail_or_skip_only(mixed: dict[str, Any], aws_env: S3Endpoint) -> None:
    with pytest.raises(ConfigError, match=r"on_error='ignore': expected fail or skip"):
        _reader(aws_env, mixed["bucket"], discover="true", on_error="ignore")
    assert _reader(aws_env, mixed["bucket"], discover="true", on_error="FAIL").on_error == "fail"


def test_a_later_entry_that_is_not_a_message_is_named_by_the_task(
    mixed: dict[str, Any], aws_env: S3Endpoint
) -> None:
    later: Ledger = mixed["later"]
    reader = _reader(aws_env, mixed["other"], ledgers=f"4:{later.uuid}")
    (part,) = reader.partitions()  # its first entry is a message: the plan passes
    with pytest.raises(NotPulsarMessagesError) as info:
        for _batch in reader.read(part):
            pass
    assert str(info.value).startswith(
        f"ledger 4 (object {data_key(later.uuid, 4)} of s3://{mixed['other']}) entry 5 is not "
        "in Pulsar message format: metadata of 1701737586 bytes does not fit the entry"
    )
    assert str(info.value).endswith("; read its entries with the offloaded-ledger source")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_spark_job_fails_with_our_message_first_or_skips(
    spark: Any, mixed: dict[str, Any], aws_env: S3Endpoint
) -> None:
    register(spark)

    def load(**options: str) -> Any:
        r = (
            spark.read.format("pulsar-messages")
            .option("store", f"s3://{mixed['bucket']}")
            .option("endpoint", aws_env.url)
            .option("discover", "true")
        )
        for key, value in options.items():
            r = r.option(key, value)
        return r.load()

    with pytest.raises(Exception) as info:  # Spark wraps the planner's error
        load().collect()
    first = str(info.value).splitlines()[0]
    assert "NotPulsarMessagesError: ledger 2 (managed ledger" in first, str(info.value)[:3000]
    assert "is not in Pulsar message format: metadata of 1701737586 bytes" in first
    assert "Traceback" not in str(info.value)
    rows = load(on_error="skip").select("ledger_id", "value").collect()
    assert sorted((r.ledger_id, bytes(r.value)) for r in rows) == sorted(
        [(1, f"a{i}".encode()) for i in range(30)] + [(3, f"z{i}".encode()) for i in range(20)]
    )


def test_transformed_and_local_ledgers_of_raw_entries_are_found_too(
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    aws_env: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A topic of raw entries: its compressed + encrypted offloaded ledger is judged through
    the decoding view (its first chunk), its closed local and open ledgers from their files."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from offloader.api import Offloader, TransformPolicy, create_key
    from tests.transforms.helpers import NS, TOPIC, broker, json_payloads

    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    bucket = s3_endpoint.new_bucket()
    with Offloader.from_settings(
        home, f"s3://{bucket}/off", endpoint_url=s3_endpoint.url, broker=broker(100)
    ) as off:
        off.create_namespace(NS)
        create_key(home, "k1")
        off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
        off.produce(TOPIC, json_payloads(250))  # ledgers 0 and 1 closed, 2 open
        off.offload_prefix(TOPIC, size_threshold=0)
    off.runtime.ledgers.delete_ledger(TOPIC, 0)
    schema = from_arrow_schema(messages_arrow_schema())
    options = {"home": str(home), "topics": TOPIC, "on_error": "skip"}
    with capture_logs() as logs:
        parts = PulsarMessagesReader(options, schema).partitions()
    assert parts == []
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["ledgers"] == 3, warning
    left_out = warning["left_out"]
    assert "ledger 0 (managed ledger public/default/persistent/secret, object" in left_out
    assert "open in the local ledger store" in left_out
    assert "entry 0: metadata of" in left_out  # JSON text read as a metadata size
