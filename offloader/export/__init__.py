"""Exactly-once export of topics to Hive-partitioned Parquet (Secor's job, on Spark).

The driver's side, importable without pyspark: :mod:`~offloader.export.settings` (what a run is
asked to do), :mod:`~offloader.export.naming` (directories and deterministic file names),
:mod:`~offloader.export.plan` (the ranges a run exports), :mod:`~offloader.export.target`
(listing, cleanup and ``_SUCCESS`` markers through ``pyarrow.fs``), :mod:`~offloader.export.run`
(the protocol: cleanup, write, check, compare-and-set the watermark, markers),
:mod:`~offloader.export.manage` (status and reset) and :mod:`~offloader.export.lock`. The
engine that reads and writes is :mod:`offloader.spark.export_job` (executors:
:mod:`offloader.spark.export_write`). The watermarks are in the metadata store
(:mod:`offloader.metadata.export_base`). Layer 6: may import the backends, ``runtime`` and
``read``; must not import ``topics``, ``spark``, ``service`` or ``api``.
"""

from __future__ import annotations

from offloader.export.settings import ExportSpec

__all__ = ["ExportSpec"]
