"""The export and chunked messages whose chunks span a ledger rollover (spec/export.md §5): the
task holding a message's first chunk finishes it in the topic's next closed ledger and the
row sits at its first chunk's position; a message whose last chunk is not in a closed ledger
yet stops the watermark before its first chunk, and the next run exports it exactly once;
``export reset`` inside the span removes the right files and the re-run writes the same ones."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from offloader.api import ExportSpec
from tests.spark.export_helpers import (
    TOPIC,
    ChunkedTopic,
    Clock,
    digest,
    duck,
    duck_digest,
    new_home,
    offload_all,
)

pytestmark = [pytest.mark.spark]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*.parquet"))
        if p.is_file()
    }


def _rows_of(out: Path, value: bytes) -> list[tuple[Any, ...]]:
    sha = hashlib.sha256(value).hexdigest()
    rows = duck(str(out), "message_id, ledger_id, entry_id, value")
    return [r[:3] for r in rows if hashlib.sha256(bytes(r[3])).hexdigest() == sha]


@pytest.fixture()
def rollover(tmp_path: Path) -> Any:
    """Ledger A (offloaded): batches of p1/p2, ``n`` (3 chunks) whole in A interleaved with
    the first chunks of ``m`` (4 chunks), which ends in ledger B (closed, still on local disk);
    ledger C is open."""
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    t = ChunkedTopic(off, clock)
    n_value, n = t.chunked("pn", 3)
    m_value, m = t.chunked("pm", 4)
    a, _ = t.produce([t.batch("p1"), n[0], t.batch("p2"), n[1], m[0], n[2], t.batch("p1"), m[1]])
    off.roll_over(TOPIC)
    offload_all(off, TOPIC)
    b, _ = t.produce([t.batch("p2"), m[2], t.batch("p1"), m[3], t.batch("p2")])
    off.roll_over(TOPIC)
    values = list(t.values)
    t.produce([t.batch("p1")])  # ledger C: open, never exported
    yield off, t, values, (a, b), (n_value, m_value), tmp_path
    off.close()


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_chunked_message_across_the_rollover_exported_exactly_once(
    spark: Any, rollover: Any, engine: str
) -> None:
    off, _t, values, (a, b), (n_value, m_value), tmp = rollover
    out = tmp / f"lake-{engine}"
    (report,) = off.export_run([TOPIC], ExportSpec(str(out)), spark=spark, engine=engine)
    assert report.watermark == (b, 4) and report.rows == len(values)
    assert duck_digest(str(out)) == (len(values), len(values), digest(values)[1])
    # the row keeps the source's id (its last chunk's), in ledger B, but the file holding it
    # is named by its first chunk's position in ledger A
    assert _rows_of(out, m_value) == [(f"{b}:3:-1:-1", b, 3)]
    assert _rows_of(out, n_value) == [(f"{a}:5:-1:-1", a, 5)]
    # A's last row is at entry 6 (entry 7 is m's chunk: no row sits there)
    names = sorted(p.name for p in out.rglob("*.parquet"))
    assert names == [f"g1-{a}-0-6-2025-06-15T15.parquet", f"g1-{b}-0-4-2025-06-15T15.parquet"]


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_watermark_waits_for_the_ledger_holding_the_last_chunk(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    try:
        t = ChunkedTopic(off, clock)
        before_m = [t.batch("p1"), t.batch("p2")]
        first_run = list(t.values)  # the 6 messages before m's first chunk
        m_value, m = t.chunked("pm", 3)
        a, _ = t.produce([*before_m, m[0], t.batch("p1"), m[1]])
        off.roll_over(TOPIC)
        offload_all(off, TOPIC)
        b, _ = t.produce([t.batch("p2")])  # ledger B open: m's last chunk not written yet
        out = tmp_path / "lake"
        spec = ExportSpec(str(out))
        (one,) = off.export_run([TOPIC], spec, spark=spark, engine=engine)
        assert one.watermark == (a, 1)  # just before m's first chunk
        assert one.rows == len(first_run) == 6
        assert duck_digest(str(out)) == (6, 6, digest(first_run)[1])
        assert [p.name for p in out.rglob("*.parquet")] == [f"g1-{a}-0-1-2025-06-15T15.parquet"]
        status = off.export_status(TOPIC, str(out))
        assert status.watermark == (a, 1) and status.uncommitted_files == 0

        # still open: the next run changes nothing
        (same,) = off.export_run([TOPIC], spec, spark=spark, engine=engine)
        assert (same.watermark, same.rows, same.files) == ((a, 1), 0, 0)

        t.produce([m[2], t.batch("p1")])
        off.roll_over(TOPIC)  # B closed (still on local disk)
        (two,) = off.export_run([TOPIC], spec, spark=spark, engine=engine)
        assert two.previous == (a, 1) and two.watermark == (b, 2)
        values = list(t.values)
        assert two.rows == len(values) - 6
        assert duck_digest(str(out)) == (len(values), len(values), digest(values)[1])
        assert _rows_of(out, m_value) == [(f"{b}:1:-1:-1", b, 1)]
        assert sorted(p.name for p in out.rglob("*.parquet")) == [
            f"g1-{a}-0-1-2025-06-15T15.parquet",
            f"g1-{a}-2-3-2025-06-15T15.parquet",
            f"g1-{b}-0-2-2025-06-15T15.parquet",
        ]
    finally:
        off.close()


def test_reset_inside_the_span_and_rerun_writes_the_same_files(rollover: Any) -> None:
    off, _t, values, (a, b), (_n_value, m_value), tmp = rollover
    out = tmp / "lake"
    spec = ExportSpec(str(out))
    off.export_run([TOPIC], spec, engine="local")
    first = _files(out)
    assert len(first) == 2

    # a point in ledger B, inside m's span (m began in A): only B's file goes, m stays
    r = off.export_reset(TOPIC, str(out), f"{b}:2")
    assert r.watermark == (b, -1)
    assert [p.rpartition("/")[2] for p in r.removed] == [f"g1-{b}-0-4-2025-06-15T15.parquet"]
    assert _rows_of(out, m_value) == [(f"{b}:3:-1:-1", b, 3)]
    (again,) = off.export_run([TOPIC], spec, engine="local")
    assert again.watermark == (b, 4) and _files(out) == first
    assert duck_digest(str(out)) == (len(values), len(values), digest(values)[1])

    # a point in A after m's first chunk: A's file straddles it, so both files go
    r = off.export_reset(TOPIC, str(out), f"{a}:5")
    assert r.watermark == (a, -1) and len(r.removed) == 2
    assert not list(out.rglob("*.parquet"))
    off.export_run([TOPIC], spec, engine="local")
    assert _files(out) == first  # same names, same bytes
    assert _rows_of(out, m_value) == [(f"{b}:3:-1:-1", b, 3)]
    assert duck_digest(str(out)) == (len(values), len(values), digest(values)[1])


def test_held_message_in_a_middle_block_removes_the_later_blocks_files(tmp_path: Path) -> None:
    """Ledger A offloaded in 2 KiB blocks; ``m`` begins in one of its middle blocks and ends in
    the open ledger B: the later blocks' tasks wrote their files, which are past the watermark
    and removed by the run; the next run (B closed) writes them again, ``m`` exactly once."""
    from offloader.api import BrokerSettings, Offloader
    from offloader.config import OffloadSettings

    clock = Clock()
    small = BrokerSettings(
        offload=OffloadSettings(
            max_block_size=2048, read_buffer_size=1024, enforce_min_block_size=False
        )
    )
    off = Offloader.from_settings(tmp_path / "home", broker=small, clock_ms=clock)
    off.create_namespace("public/default")
    try:
        t = ChunkedTopic(off, clock)
        head = [t.batch("p1", 8) for _ in range(12)]
        first_run = list(t.values)
        m_value, m = t.chunked("pm", 3, chunk_size=300)
        tail = [t.batch("p2", 8) for _ in range(12)]
        a, _ = t.produce([*head, m[0], m[1], *tail])
        off.roll_over(TOPIC)
        offload_all(off, TOPIC)
        blocks = [r for r in off.topic_info(TOPIC).ledgers if r.ledger_id == a]
        assert blocks and blocks[0].offload_complete
        b, _ = t.produce([t.batch("p1")])
        out = tmp_path / "lake"
        spec = ExportSpec(str(out), partition_by="dt")
        (one,) = off.export_run([TOPIC], spec, engine="local")
        assert one.watermark == (a, 11) and one.rows == len(first_run)
        names = sorted(p.name for p in out.rglob("*.parquet"))
        assert len(names) >= 2  # the blocks before m's
        assert all(int(n.split("-")[3]) <= 11 for n in names)
        assert off.export_status(TOPIC, str(out)).uncommitted_files == 0
        assert duck_digest(str(out)) == (len(first_run), len(first_run), digest(first_run)[1])

        t.produce([m[2]])
        off.roll_over(TOPIC)
        (two,) = off.export_run([TOPIC], spec, engine="local")
        values = list(t.values)
        assert two.watermark == (b, 1)
        assert duck_digest(str(out)) == (len(values), len(values), digest(values)[1])
        assert _rows_of(out, m_value) == [(f"{b}:1:-1:-1", b, 1)]
    finally:
        off.close()


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_a_message_whose_producer_stopped_mid_way_expires_instead_of_holding_the_watermark(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    """Its producer crashed after two of three chunks: once closed ledgers hold entries
    published more than a minute later (a Pulsar consumer's expiry), the message is dropped
    and the watermark passes it, rather than waiting for a chunk that never comes."""
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    try:
        t = ChunkedTopic(off, clock)
        m_value, m = t.chunked("pm", 3)
        a, _ = t.produce([t.batch("p1"), m[0], t.batch("p2"), m[1]])
        off.roll_over(TOPIC)
        offload_all(off, TOPIC)
        # ledger B, closed: 30 s later, within the expiry: m still waits
        clock.now += 30_000
        t.produce([t.batch("p1")])
        off.roll_over(TOPIC)
        out = tmp_path / "lake"
        spec = ExportSpec(str(out))
        (one,) = off.export_run([TOPIC], spec, spark=spark, engine=engine)
        assert one.watermark == (a, 0)  # just before m's first chunk
        # ledger C, closed: two minutes later; m's producer never came back
        clock.now += 120_000
        c, _ = t.produce([t.batch("p2"), t.batch("p1")])
        off.roll_over(TOPIC)
        (two,) = off.export_run([TOPIC], spec, spark=spark, engine=engine)
        assert two.watermark == (c, 1)
        expected = [v for v in t.values if v != m_value]
        assert duck_digest(str(out)) == (len(expected), len(expected), digest(expected)[1])
    finally:
        off.close()
