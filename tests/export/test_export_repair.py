"""Files gone below the watermark (deleted by hand, or a whole topic directory) are reported by
``export status`` and written again by the next ``export run`` with the same names and the same
bytes; one target spelled several ways (a symlink, ``..``, a trailing slash) has one watermark,
and a watermark stored under an older spelling is found. The local engine on a file target (no
JVM); the same over moto's S3 and for a Kafka topic's partitions."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devservers.endpoint import S3Endpoint
from offloader.api import ExportSpec, KafkaSettings, Offloader
from offloader.export.naming import TOPIC_KEY, topic_dir
from tests.kafka.logdir import write_partition
from tests.spark.export_helpers import TOPIC, Clock, digest, duck_digest, new_home, produce_ledger


def _files(root: Path) -> dict[str, str]:
    """Every data file and marker under ``root``: relative path -> SHA-256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (p.suffix == ".parquet" or p.name == "_SUCCESS")
    }


def _home_with_three_ledgers(tmp_path: Path) -> tuple[Offloader, Clock, list[bytes]]:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    values = produce_ledger(off, clock, TOPIC, 0, 90)
    values += produce_ledger(off, clock, TOPIC, 90, 60)
    values += produce_ledger(off, clock, TOPIC, 150, 45)
    return off, clock, values


def test_deleted_files_are_reported_and_written_again_byte_for_byte(tmp_path: Path) -> None:
    off, clock, values = _home_with_three_ledgers(tmp_path)
    lake = tmp_path / "lake"
    spec = ExportSpec(str(lake), max_file_size=2048)
    with off:
        (first,) = off.export_run([TOPIC], spec, engine="local")
        assert first.rows == len(values) and first.files > 8
        before = _files(lake)
        data = sorted(p for p in before if p.endswith(".parquet"))
        gone = [data[1], data[2], data[len(data) // 2], data[-1]]  # two in a row, the last
        for path in gone:
            (lake / path).unlink()

        status = off.export_status(TOPIC, str(lake))
        assert status.missing_files == 4 and status.rows == len(values)
        assert len(status.files) == first.files - 4
        ranges = status.missing_ranges
        for path in gone:  # each gone file's range is reported as not covered
            name = path.rpartition("/")[2].split("-")
            ledger, lo, hi = int(name[1]), int(name[2]), int(name[3])
            assert any(a <= (ledger, lo) and (ledger, hi) <= b for a, b in ranges), path

        more = produce_ledger(off, clock, TOPIC, 195, 20)
        (second,) = off.export_run([TOPIC], spec, engine="local")
        assert (second.repaired, second.missing, second.rows) == (4, 0, 20)
        after = _files(lake)
        assert {p: h for p, h in after.items() if p in before} == before  # same names, bytes
        assert duck_digest(str(lake)) == (215, 215, digest(values + more)[1])
        healthy = off.export_status(TOPIC, str(lake))
        assert healthy.missing_files == 0 and healthy.missing_ranges == ()
        (third,) = off.export_run([TOPIC], spec, engine="local")
        assert (third.repaired, third.rows) == (0, 0)
        assert _files(lake) == after


def test_a_topic_directory_removed_whole_comes_back(tmp_path: Path) -> None:
    off, _clock, values = _home_with_three_ledgers(tmp_path)
    lake = tmp_path / "lake"
    spec = ExportSpec(str(lake), max_file_size=4096)
    with off:
        (first,) = off.export_run([TOPIC], spec, engine="local")
        before = _files(lake)
        assert any(p.endswith("_SUCCESS") for p in before)
        shutil.rmtree(lake / topic_dir(TOPIC))
        status = off.export_status(TOPIC, str(lake))
        assert status.missing_files == first.files and status.files == ()
        assert [(a[0], b[0]) for a, b in status.missing_ranges] == [(0, 0), (1, 1), (2, 2)]
        (again,) = off.export_run([TOPIC], spec, engine="local")
        assert (again.repaired, again.rows) == (first.files, 0)
        assert _files(lake) == before  # markers included
        assert duck_digest(str(lake)) == (len(values), len(values), digest(values)[1])


def test_one_target_spelled_several_ways_has_one_watermark(tmp_path: Path) -> None:
    """A reset through a symlink moves the watermark of the directory it points at (it was a
    target of its own, whose reset removed the other's files unnoticed)."""
    off, _clock, values = _home_with_three_ledgers(tmp_path)
    lake = tmp_path / "lake"
    lake.mkdir()
    (tmp_path / "link").symlink_to("lake")
    spec = ExportSpec(str(lake), max_file_size=4096)
    with off:
        (first,) = off.export_run([TOPIC], spec, engine="local")
        link = ExportSpec(f"{tmp_path}/link/", max_file_size=4096)
        (through_link,) = off.export_run([TOPIC], link, engine="local")
        assert (through_link.rows, through_link.previous) == (0, first.watermark)
        status = off.export_status(TOPIC, f"{tmp_path}/x/../link")
        assert status.watermark == first.watermark and status.target == str(lake.resolve())
        reset = off.export_reset(TOPIC, f"{tmp_path}/link//", "0:0")
        assert reset.watermark == (0, -1) and len(reset.removed) == first.files
        assert off.export_status(TOPIC, str(lake)).watermark == (0, -1)
        (rerun,) = off.export_run([TOPIC], spec, engine="local")
        assert rerun.rows == len(values)
        assert duck_digest(str(lake)) == (len(values), len(values), digest(values)[1])


def test_a_watermark_stored_under_an_older_spelling_is_adopted(tmp_path: Path) -> None:
    """Before targets were canonical, a watermark was stored under the spelling given; once
    that spelling is a symlink, the real directory's export still finds it."""
    off, clock, values = _home_with_three_ledgers(tmp_path)
    old = tmp_path / "lake"
    with off:
        (first,) = off.export_run([TOPIC], ExportSpec(str(old)), engine="local")
        old.rename(tmp_path / "moved")
        old.symlink_to("moved")  # the stored spelling is now a symlink to the real directory
        real = str((tmp_path / "moved").resolve())
        exports = off._export_meta()
        assert exports.get_watermark(real, TOPIC, 1) is None
        status = off.export_status(TOPIC, real)
        assert (status.watermark, status.rows, status.missing_files) == (first.watermark, 195, 0)
        more = produce_ledger(off, clock, TOPIC, 195, 10)
        (second,) = off.export_run([TOPIC], ExportSpec(real), engine="local")
        assert (second.previous, second.rows) == (first.watermark, 10)
        adopted = exports.get_watermark(real, TOPIC, 1)
        assert adopted is not None and adopted.rows == len(values) + 10
        assert duck_digest(real) == (205, 205, digest(values + more)[1])


def test_a_topic_name_longer_than_a_file_name_is_exported(tmp_path: Path) -> None:
    topic = "persistent://public/default/" + "t" * 254  # the longest legal local name
    clock = Clock()
    lake = tmp_path / "lake"
    with new_home(tmp_path / "home", clock) as off:
        values = produce_ledger(off, clock, topic, 0, 30)
        (report,) = off.export_run([topic], ExportSpec(str(lake)), engine="local")
        assert report.rows == 30
        (directory,) = [d for d in lake.iterdir() if d.name != "_offloader"]  # its records
        assert directory.name == topic_dir(topic) and len(directory.name) <= 255
        for path in directory.rglob("*.parquet"):
            meta = pq.read_metadata(path).metadata
            assert meta[TOPIC_KEY.encode()] == topic.encode()
            assert set(pq.read_table(path, columns=["topic"]).column(0).to_pylist()) == {topic}
        assert duck_digest(str(lake)) == (30, 30, digest(values)[1])
        status = off.export_status(topic, str(lake))
        assert status.rows == 30 and len(status.files) == report.files


@pytest.mark.s3
def test_s3_prefixes_share_a_watermark_and_deleted_objects_come_back(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    off, _clock, values = _home_with_three_ledgers(tmp_path)
    url = moto_endpoint.url
    with off:
        spec = ExportSpec(f"s3://{bucket}/lake", endpoint_url=url, max_file_size=4096)
        (first,) = off.export_run([TOPIC], spec, engine="local")
        other = ExportSpec(f"s3://{bucket}//lake/", endpoint_url=url, max_file_size=4096)
        (same,) = off.export_run([TOPIC], other, engine="local")
        assert (same.previous, same.rows) == (first.watermark, 0)
        client = moto_endpoint.client()
        listed = client.list_objects_v2(Bucket=bucket, Prefix="lake/")["Contents"]
        objects = {
            o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            for o in listed
            if o["Key"].endswith(".parquet")
        }
        gone = sorted(objects)[::3]
        for key in gone:
            client.delete_object(Bucket=bucket, Key=key)
        status = off.export_status(TOPIC, f"s3://{bucket}/lake/", endpoint_url=url)
        assert status.missing_files == len(gone)
        (again,) = off.export_run([TOPIC], spec, engine="local")
        assert again.repaired == len(gone)
        for key in gone:
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == objects[key]
        assert off.export_status(TOPIC, spec.target, endpoint_url=url).missing_files == 0
        assert first.rows == len(values)


@pytest.mark.s3
def test_a_kafka_partitions_deleted_files_come_back(
    tmp_path: Path, moto_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in moto_endpoint.env().items():
        monkeypatch.setenv(key, value)
    bucket = moto_endpoint.new_bucket()
    root = tmp_path / "logs"
    write_partition(root, "orders", 0, records=300)
    write_partition(root, "orders", 1, records=200)
    lake = tmp_path / "lake"
    store = f"s3://{bucket}/k"
    with Offloader.from_settings(tmp_path / "home", store, endpoint_url=moto_endpoint.url) as off:
        assert off.kafka(KafkaSettings()).upload(root).ok
        spec = ExportSpec(str(lake), max_file_size=2048)
        reports = off.export_run(["orders"], spec, engine="local", kafka=True)
        assert [r.topic for r in reports] == ["kafka:orders:0", "kafka:orders:1"]
        before = _files(lake)
        ones = sorted(p for p in before if "/g1-1-" in p)
        assert len(ones) > 2
        for path in ones[:2]:
            (lake / path).unlink()
        assert off.export_status("kafka:orders:1", str(lake)).missing_files == 2
        assert off.export_status("kafka:orders:0", str(lake)).missing_files == 0
        again = off.export_run(["orders"], spec, engine="local", kafka=True)
        assert [(r.repaired, r.rows) for r in again] == [(0, 0), (2, 0)]
        assert _files(lake) == before


def test_files_whose_ledger_is_gone_are_reported_once(tmp_path: Path) -> None:
    """A file gone with its ledger (trimmed by retention) cannot be written again: the run
    reports it and the watermark stops counting it, so later runs do not look again."""
    off, clock, values = _home_with_three_ledgers(tmp_path)
    lake = tmp_path / "lake"
    spec = ExportSpec(str(lake), max_file_size=4096)
    with off:
        (first,) = off.export_run([TOPIC], spec, engine="local")
        produce_ledger(off, clock, TOPIC, 195, 5)  # the trim keeps the newest ledger
        off.set_retention("public/default", 1, 1)
        clock.now += 86_400_000
        trimmed = off.apply_retention(TOPIC)
        assert {0, 1, 2} <= set(trimmed)
        gone = [*sorted(lake.rglob("g1-0-*.parquet")), sorted(lake.rglob("g1-1-*.parquet"))[0]]
        for path in gone:
            path.unlink()
        status = off.export_status(TOPIC, str(lake))
        assert status.missing_files == len(gone)
        (second,) = off.export_run([TOPIC], spec, engine="local")
        assert (second.repaired, second.missing) == (0, len(gone))
        assert off.export_status(TOPIC, str(lake)).missing_files == 0
        (third,) = off.export_run([TOPIC], spec, engine="local")
        assert (third.repaired, third.missing) == (0, 0)
        assert first.rows == len(values)
