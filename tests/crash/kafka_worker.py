"""The process the Kafka kill -9 tests kill: one ``kafka upload`` pass over a log directory.

Run as ``python -m tests.crash.kafka_worker HOME LOG_DIR [STORE_URL]``; prints ``DONE`` at the
end. Parts are tiny (multipart uploads on test-sized segments) and abandoned attempts are
cleaned at once (``stale_attempt_ms=0``), as after a restart. The store is ``STORE_URL`` (else
the home's ``objects``), the metadata ``$LEDGER_OFFLOADER_CRASH_METADATA`` (else SQLite in the
home); ``$LEDGER_OFFLOADER_CRASH_PART_SIZE`` sets the part size (RGW wants 5 MiB parts, so a
bigger part makes every test segment one PUT there).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from offloader.api import KafkaSettings, Offloader

PART_SIZE_ENV = "LEDGER_OFFLOADER_CRASH_PART_SIZE"
METADATA_ENV = "LEDGER_OFFLOADER_CRASH_METADATA"
SETTINGS = KafkaSettings(
    part_size=int(os.environ.get(PART_SIZE_ENV) or 2048),
    enforce_min_part_size=False,
    concurrency=2,
    stale_attempt_ms=0,
)


def main(home: str, log_dir: str, store_url: str | None = None) -> None:
    metadata = os.environ.get(METADATA_ENV) or None
    with Offloader.from_settings(home, store_url, metadata_url=metadata) as off:
        report = off.kafka(SETTINGS).upload(Path(log_dir))
        if not report.ok:
            raise SystemExit(f"upload failed: {report.segments}")
    print("DONE", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
