"""Export to an Iceberg table with the Spark engine (real PySpark ``local[2]``): JSON values
decoded into a ``value_decoded`` struct, the table's schema evolving by name when the value's
schema gains a field, an incompatible change refused naming the field; DuckDB's Iceberg reader
checks every row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from offloader.api import ExportSpec
from offloader.errors import IcebergSchemaError
from tests.iceberg.helpers import digest, scan, table_digest
from tests.spark.export_helpers import TOPIC, Clock, new_home, offload_all, produce_ledger

pytestmark = [pytest.mark.spark]

TABLE = "iceberg://pulsar.orders"


def test_decoded_values_and_schema_evolution(spark: Any, tmp_path: Path) -> None:
    clock = Clock()
    off = new_home(tmp_path / "home", clock)
    try:
        values = produce_ledger(off, clock, TOPIC, 0, 40)
        offload_all(off, TOPIC)
        values += produce_ledger(off, clock, TOPIC, 40, 20)
        spec = ExportSpec(TABLE, partition_by="dt", value_format="json", schema="i BIGINT")
        (first,) = off.export_iceberg_run([TOPIC], spec, spark=spark)
        assert first.rows == 60
        assert table_digest(first.metadata_location) == (60, 60, digest(values))
        got = scan(first.metadata_location, "value_decoded.i", "ORDER BY 1")
        assert [r[0] for r in got] == list(range(60))

        # the value's schema gains a field: the table's schema gains it too (union by name)
        more = produce_ledger(off, clock, TOPIC, 60, 20)
        wider = ExportSpec(
            TABLE, partition_by="dt", value_format="json", schema="i BIGINT, pad STRING"
        )
        (second,) = off.export_iceberg_run([TOPIC], wider, spark=spark)
        assert second.rows == 20 and second.previous == first.watermark
        rows = scan(second.metadata_location, "value_decoded.i, value_decoded.pad", "ORDER BY 1")
        assert len(rows) == 80
        assert all(pad is None for _, pad in rows[:60])  # written before the field existed
        assert [pad for _, pad in rows[60:]] == [json.loads(v)["pad"] for v in more]
        both = values + more
        assert table_digest(second.metadata_location) == (80, 80, digest(both))

        # a field changing type is refused, naming it; nothing is committed
        produce_ledger(off, clock, TOPIC, 80, 5)
        clash = ExportSpec(TABLE, partition_by="dt", value_format="json", schema="i STRING")
        with pytest.raises(IcebergSchemaError, match=r"value_decoded\.i") as err:
            off.export_iceberg_run([TOPIC], clash, spark=spark)
        assert err.value.field == "value_decoded.i"
        status = off.export_iceberg_status(TOPIC, off.iceberg_target(TABLE))
        assert status.snapshot_id == second.snapshot_id and status.watermark == second.watermark
    finally:
        off.close()
