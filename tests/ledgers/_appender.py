"""Child process of the kill -9 test: appends with fsync "always", printing each acked id."""

from __future__ import annotations

import hashlib
import random
import sys

from offloader.errors import LedgerNotFound
from offloader.ledgers import LedgerStore

TOPIC = "acme/orders/crash"


def payload(entry_id: int) -> bytes:
    """The deterministic payload of an entry (sizes 0..~2 KiB)."""
    return hashlib.sha256(str(entry_id).encode()).digest() * (entry_id * 7 % 67)


def main(home: str, seed: int) -> None:
    store = LedgerStore(home, fsync="always")
    try:
        writer = store.open_for_append(TOPIC, 1)
    except LedgerNotFound:
        writer = store.create_ledger(TOPIC, 1)
    rng = random.Random(seed)
    print(f"start {writer.entry_count}", flush=True)
    while True:
        next_id = writer.entry_count
        if rng.random() < 0.5:
            acked = writer.append(payload(next_id))
        else:
            n = rng.randint(1, 8)
            acked = writer.append_batch(payload(next_id + i) for i in range(n))
        print(acked, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
