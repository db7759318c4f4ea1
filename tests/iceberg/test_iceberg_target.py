"""The pure values of an Iceberg target: names, catalog and warehouse URIs, watermark keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.api import ExportSpec
from offloader.errors import ConfigError
from offloader.export.iceberg_target import (
    PUBLISH_PREFIX,
    WATERMARK_PREFIX,
    TableWatermark,
    normalize_catalog,
    normalize_warehouse,
    parse_table_name,
    path_of,
    resolve_target,
    time_column,
    watermark_properties,
    watermarks_from,
)


def test_table_names() -> None:
    assert parse_table_name("iceberg://pulsar.orders") == (("pulsar",), "orders")
    assert parse_table_name("ICEBERG://a.b.t") == (("a", "b"), "t")
    assert parse_table_name("lake.t_1") == (("lake",), "t_1")
    for bad in ("iceberg://orders", "iceberg://a..b", "iceberg://a.b-c", "iceberg://.t", ""):
        with pytest.raises(ConfigError, match=r"NAMESPACE\.TABLE"):
            parse_table_name(bad)
    assert ExportSpec("iceberg://Lake.T").target == "iceberg://Lake.T"
    with pytest.raises(ConfigError, match="iceberg:// targets"):
        ExportSpec("/data/lake", catalog="sqlite:///x.db")


def test_catalog_and_warehouse(tmp_path: Path) -> None:
    assert normalize_catalog(str(tmp_path / "c.db")) == f"sqlite:///{tmp_path}/c.db"
    assert normalize_catalog("postgresql://u@h/db") == "postgresql://u@h/db"
    assert normalize_catalog("https://rest.example/api") == "https://rest.example/api"
    with pytest.raises(ConfigError, match="--catalog"):
        normalize_catalog("ftp://x/y")
    assert normalize_warehouse("s3://bucket/pre/fix/") == "s3://bucket/pre/fix"
    assert normalize_warehouse(str(tmp_path)) == f"file://{tmp_path}"
    with pytest.raises(ConfigError, match="no credentials"):
        normalize_warehouse("s3://key:secret@bucket/x")
    target = resolve_target("iceberg://ns.t", tmp_path / "home")
    assert target.catalog_uri == f"sqlite:///{tmp_path}/home/iceberg/catalog.db"
    assert target.warehouse == f"file://{tmp_path}/home/iceberg/warehouse"
    assert target.identifier == "ns.t" and target.url == "iceberg://ns.t"
    pg = resolve_target("ns.t", tmp_path, catalog="postgresql://me:s3cret@db:5432/ice")
    assert pg.catalog_kind == "sql" and "s3cret" not in pg.catalog_display
    assert resolve_target("ns.t", tmp_path, catalog="http://r/").catalog_kind == "rest"


def test_watermark_keys_round_trip() -> None:
    marks = {
        "persistent://public/default/a": TableWatermark(
            "persistent://public/default/a", (3, 9), 17
        ),
        "kafka:orders:1": TableWatermark("kafka:orders:1", (1, 400), None),
    }
    props = watermark_properties(marks)
    assert props[WATERMARK_PREFIX + "kafka:orders:1"] == "1:400"
    assert PUBLISH_PREFIX + "kafka:orders:1" not in props
    assert watermarks_from({**props, "other": "x"}) == marks
    with pytest.raises(ConfigError, match="LEDGER:ENTRY"):
        watermarks_from({WATERMARK_PREFIX + "t": "12"})


def test_time_columns_and_paths() -> None:
    assert time_column("publish_time", False) == ("publish_time",)
    assert time_column("ts", False) == ("value_decoded", "ts")
    assert time_column("value.a.b", True) == ("value_a", "b")
    assert path_of("s3://b/k/x.parquet") == "b/k/x.parquet"
    assert path_of("file:///tmp/x") == "/tmp/x"
