"""The process the Kafka kill -9 test kills: one ``kafka upload`` pass over a log directory.

Run as ``python -m tests.crash.kafka_worker HOME LOG_DIR``; prints ``DONE`` at the end. Parts
are tiny (multipart uploads on test-sized segments) and abandoned attempts are cleaned at once
(``stale_attempt_ms=0``), as after a restart.
"""

from __future__ import annotations

import sys
from pathlib import Path

from offloader.api import KafkaSettings, Offloader

SETTINGS = KafkaSettings(
    part_size=2048, enforce_min_part_size=False, concurrency=2, stale_attempt_ms=0
)


def main(home: str, log_dir: str) -> None:
    with Offloader.from_settings(home) as off:
        report = off.kafka(SETTINGS).upload(Path(log_dir))
        if not report.ok:
            raise SystemExit(f"upload failed: {report.segments}")
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
