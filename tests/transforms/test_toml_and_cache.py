"""offloader.toml's [transform] table (chunk size, chunk cache, per-namespace transforms) and
the bounded cache of decoded chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from formats.index import decode_index
from formats.transform import transform_of
from offloader.api import Offloader, Position, TransformPolicy, create_key
from offloader.read.handle import ReadHandle
from offloader.read.transformed import ChunkCache
from tests.cli.helpers import ok, one_line_error, run
from tests.transforms.helpers import NS, TOPIC, CountingStore, broker, json_payloads

TOML = """
[broker]
max_block_size = "256K"
max_entries_per_ledger = 300
min_rollover_time = 0

[transform]
chunk_size = "64K"
chunk_cache_size = "4M"

[transform.namespaces."public/default"]
compression = "zstd"
encryption = "aes-256-gcm"
key_id = "k1"
"""


def test_toml_transform_applies_to_namespaces_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text(TOML)
    ok(home, "keys", "create", "k1")
    ok(home, "namespaces", "create", NS)
    lines = "\n".join(f"line {i} " + "x" * 900 for i in range(600))
    (tmp_path / "in.txt").write_text(lines + "\n")
    ok(home, "topics", "produce", TOPIC, "--file", str(tmp_path / "in.txt"))
    ok(home, "topics", "offload-prefix", TOPIC, "--size-threshold", "1K")
    with Offloader.from_settings(home) as off:
        record = off.runtime.meta.get_ledger(0)
        assert record.offload is not None
        index = decode_index(off.runtime.store.get(record.offload.index_key).data)
        section = transform_of(index.extension)
        assert section is not None and section.key_id == "k1" and section.chunk_size == 65536
    out = ok(home, "topics", "read", TOPIC, "--from", "0:5", "--count", "1").stdout
    assert "0:5" in out


@pytest.mark.parametrize(
    "table, message",
    [
        ('[transform]\nchunk_size = "1K"', "64K..64M"),
        ("[transform]\nbogus = 1", "unknown [transform] key"),
        ('[transform.namespaces."a/b"]\ncompression = "lz4"', "compression 'lz4'"),
        ('[transform.namespaces."a/b"]\nlevel = 3', "needs --compression zstd"),
    ],
)
def test_bad_transform_tables_are_refused(tmp_path: Path, table: str, message: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text(table)
    line = one_line_error(run(home, "namespaces", "create", NS))
    assert message in line and "offloader.toml" in line


def test_chunk_cache_serves_repeated_reads_without_a_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OFFLOADER_KEY_RING", raising=False)
    with Offloader.from_settings(tmp_path / "h", broker=broker(chunk_cache_bytes=1 << 20)) as off:
        off.create_namespace(NS)
        create_key(off.runtime.home, "k1")
        off.set_offload_transform(NS, TransformPolicy("zstd", None, "aes-256-gcm", None))
        payloads = json_payloads(300)
        off.produce(TOPIC, payloads)
        off.offload_prefix(TOPIC, position=Position(1, 0))
        record = off.runtime.meta.get_ledger(0)
        assert record.offload is not None
        counting = CountingStore(off.runtime.store)
        settings = off.runtime.broker.offload
        gets = []
        for _ in range(3):
            before = counting.data_gets
            with ReadHandle.open(counting, 0, record.offload.uuid, settings) as handle:  # type: ignore[arg-type]
                assert handle.read_entry(150) == payloads[150]
            gets.append(counting.data_gets - before)
        assert gets == [1, 0, 0]


def test_chunk_cache_is_bounded() -> None:
    cache = ChunkCache(100)
    for i in range(10):
        cache.put(("k", i), bytes(30))
    assert cache.get(("k", 0)) is None and cache.get(("k", 9)) is not None
    assert sum(cache.get(("k", i)) is not None for i in range(10)) == 3
    cache.put(("k", 99), bytes(101))  # bigger than the cache: not kept
    assert cache.get(("k", 99)) is None
