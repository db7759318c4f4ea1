"""The process the three-sidecars kill -9 test kills: one broker's sidecar, one upload pass.

``python -m tests.kafka_cluster.sidecar_worker HOME STORE PG_URL ZK_URL LOG_DIR`` (``PG_URL``
``-``: the home's own SQLite metadata; ``ZK_URL``: any ``--kafka-metadata`` value): prints
``READY``, runs one ``kafka upload`` pass over the broker's log dir with the cluster's metadata
(only what this broker leads) on the shared store and PostgreSQL metadata, prints
``UPLOADED n SKIPPED m`` and ``DONE``.
A corrupt or failed segment exits 3 (the harness fails the test on it).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from offloader.api import KafkaSettings, Offloader

SETTINGS = KafkaSettings(
    part_size=2048, enforce_min_part_size=False, concurrency=2, stale_attempt_ms=0
)


def settings(zk_url: str) -> KafkaSettings:
    return dataclasses.replace(SETTINGS, cluster_metadata=zk_url)


def main(argv: list[str]) -> int:
    home, store, pg_url, zk_url, log_dir = argv
    print("READY", flush=True)
    metadata_url = None if pg_url == "-" else pg_url
    with Offloader.from_settings(home, store, metadata_url=metadata_url) as off:
        report = off.kafka(settings(zk_url)).upload(Path(log_dir))
    if not report.ok:
        print(f"upload failed: {report.segments}", file=sys.stderr, flush=True)
        return 3
    uploaded, skipped = len(report.of("uploaded")), len(report.of("skipped"))
    print(f"UPLOADED {uploaded} SKIPPED {skipped}", flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
