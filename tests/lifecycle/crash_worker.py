"""The process the kill -9 test kills: produces, offloads, deletes local copies, collects
garbage, in a loop, printing ``ACK <n>`` once entries up to sequence number n are acknowledged.

Run as ``python -m tests.lifecycle.crash_worker HOME``.
"""

from __future__ import annotations

import logging
import random
import sys

from offloader.api import Offloader
from offloader.logs import configure
from tests.lifecycle.helpers import TOPIC, small_broker


def payload(seq: int) -> bytes:
    return f"p{seq:08d}".encode() * (1 + seq % 7)


def main(home: str) -> None:
    configure(level=logging.CRITICAL)
    off = Offloader.from_settings(home, broker=small_broker(default_deletion_lag_ms=0))
    off.produce(TOPIC, [])  # recovers the current ledger: the stats now match the file
    seq = off.topic_info(TOPIC).entries
    rng = random.Random()
    while True:
        n = rng.randint(1, 8)
        off.produce(TOPIC, [payload(s) for s in range(seq, seq + n)])
        seq += n
        print(f"ACK {seq - 1}", flush=True)
        step = rng.randrange(4)
        if step == 0:
            off.offload_prefix(TOPIC, size_threshold=0)
        elif step == 1:
            off.apply_deletion_lag(TOPIC)
        elif step == 2:
            off.gc(min_age_seconds=0)
        else:
            off.service_tick()


if __name__ == "__main__":
    main(sys.argv[1])
