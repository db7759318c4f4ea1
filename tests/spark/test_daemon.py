"""offloader.spark.daemon: the executors' Python workers are forked from our daemon, which
imports the read path once before forking; scans work through it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from offloader.spark.daemon import DAEMON_CONF, DAEMON_MODULE, PRELOAD, preload
from tests.spark.conftest import Dataset, records_digest


def _parent_and_modules(_: Iterator[int]) -> Iterator[tuple[str, bool, bool, int]]:
    """In a Python worker: its parent's command line (the daemon it was forked from), whether
    the source and pyarrow are loaded, and how many objects the collector skips (frozen)."""
    import gc
    import os

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    yield (
        " ".join(argv),
        "offloader.spark.source" in sys.modules,
        "pyarrow" in sys.modules,
        gc.get_freeze_count(),
    )


@pytest.mark.spark
@pytest.mark.s3
def test_scan_through_our_daemon(spark: Any, dataset: Dataset, aws_env: Any) -> None:
    from offloader.spark import register

    assert spark.conf.get(DAEMON_CONF) == DAEMON_MODULE
    register(spark)
    df = (
        spark.read.format("offloaded-ledger")
        .option("store", dataset.store_url)
        .option("endpoint", dataset.endpoint.url)
        .option("ledgers", ",".join(f"{lid}:{uid}" for lid, uid in dataset.pairs))
        .load()
    )
    assert records_digest([tuple(r) for r in df.collect()]) == dataset.expected()
    workers = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_parent_and_modules)
    for parent, source_loaded, arrow_loaded, frozen in workers.collect():
        assert f"-m {DAEMON_MODULE} pyspark.worker" in parent
        assert source_loaded and arrow_loaded
        assert frozen > 10_000  # the preloaded modules' objects, frozen in the daemon


def test_prepare_imports_the_read_path_and_freezes_it_in_a_fresh_interpreter() -> None:
    code = (
        "import json, sys\n"
        "import gc\n"
        "from offloader.spark.daemon import prepare\n"
        "from offloader.store import s3_client\n"
        "loaded = prepare()\n"
        "print(json.dumps({'loaded': loaded, 'in': [m for m in loaded if m in sys.modules],\n"
        "                  'loader': s3_client._loader is not None,\n"
        "                  'frozen': gc.get_freeze_count(), 'tracked': len(gc.get_objects())}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == list(PRELOAD)
    assert got["in"] == list(PRELOAD)
    assert got["loader"]  # the S3 model parsed into the shared botocore loader
    assert got["frozen"] > 10_000 and got["tracked"] < 1_000  # what a gc.collect() walks


def test_preload_skips_a_module_that_does_not_import() -> None:
    assert preload(("json", "offloader_no_such_module_xyz")) == ["json"]


def test_warm_loader_needs_no_credentials_nor_network(monkeypatch: pytest.MonkeyPatch) -> None:
    from offloader.store import s3_client

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    s3_client.warm_loader()
    assert s3_client._loader is not None
