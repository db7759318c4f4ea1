"""The process the kill -9 harness kills: a scripted, resumable workload on one topic.

Run as ``python -m tests.crash.worker HOME STORE_URL SEED``. The workload (:func:`run`) goes
through :class:`offloader.api.Offloader` only, in rounds::

    produce (1-3 entries per call) until the topic holds the round's target count
    roll over; offload-prefix (by position, or by size threshold 0)
    [round 1: before the offload, plant a stalled attempt of this home on the ledger just
     closed (its data and index objects with our marker and an upload, written after the
     attempt was cleaned: gc deletes them);
     after it, plant what others left (an object under an unknown UUID, a key that is no
     offload key, an upload under an unknown UUID: gc reports them and leaves them alone)]
    deletion lag 0; service tick (verify, mark local_deleted, delete the local copy)
    gc(min_age_seconds=0)

then one last produce and ``DONE``. Every step is idempotent by construction: a produce step
fills the topic *up to* a target, so a restarted worker (or the harness, in process) simply runs
the workload again from the top and ends with exactly :data:`TOTAL_ENTRIES` entries. Entry
``seq`` (0-based over the whole topic) always has the payload :func:`payload` ``(seed, seq)``,
so entries a crash made durable without acknowledging them are still the right bytes.

Output, one line each, flushed: ``READY`` once the Offloader is built, then for every
acknowledged entry (only after ``produce`` returned) ``ACK <seq> <ledger>:<entry> <sha256>``,
and ``DONE`` at the end. The harness sets ``LEDGER_OFFLOADER_CRASH_AT`` to die at a crash point.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import sys
import time
import uuid
from collections.abc import Callable

from formats.extension import crc32c
from formats.keys import data_key, index_key, object_user_metadata
from offloader.api import BrokerSettings, Offloader, Position
from offloader.config import OffloadSettings
from offloader.errors import AlreadyExists, OffloadAlreadyComplete
from offloader.logs import configure
from offloader.metadata.base import DriverMetadata

NS = "crash/ns"
TOPIC = "persistent://crash/ns/t"
#: the produce targets of the rounds (cumulative entry counts), then the last produce
ROUND_TARGETS = (14, 27, 40)
TOTAL_ENTRIES = 45
MAX_ENTRIES_PER_LEDGER = 5

Emit = Callable[[str], None]


def broker_settings(store_url: str) -> BrokerSettings:
    """Tiny ledgers (5 entries) and blocks (1 KiB: several parts per ledger; 4 KiB, one part,
    on S3, whose servers want every part but the last at the minimum size), every append
    fsynced, no minimum rollover time; the deletion lag is set by the workload."""
    block = 4096 if store_url.startswith("s3://") else 1024
    return BrokerSettings(
        max_entries_per_ledger=MAX_ENTRIES_PER_LEDGER,
        min_rollover_seconds=0,
        fsync="always",
        offload=OffloadSettings(
            max_block_size=block,
            read_buffer_size=1024,
            enforce_min_block_size=False,
            offload_concurrency=2,
        ),
    )


def payload(seed: int, seq: int) -> bytes:
    """Entry ``seq``'s bytes: 1 to 400 pseudo-random bytes, a function of (seed, seq) only."""
    digest = hashlib.sha256(f"{seed}/{seq}".encode()).digest()
    size = 1 + int.from_bytes(digest[:2], "big") % 400
    stream = b"".join(
        hashlib.sha256(digest + i.to_bytes(4, "big")).digest() for i in range(size // 32 + 1)
    )
    return stream[:size]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_offloader(home: str, store_url: str) -> Offloader:
    """The Offloader of the worker (and of the harness's restarts). On S3 the endpoint and
    credentials come from the environment (``AWS_ENDPOINT_URL``...)."""
    return Offloader.from_settings(home, store_url, broker=broker_settings(store_url))


def _positions(first: Position, last: Position, count: int) -> list[Position]:
    """The positions of ``count`` entries produced by one call, from its first and last: within
    one ledger, or split over two consecutive ledgers at the rollover boundary."""
    if first.ledger_id == last.ledger_id:
        positions = [Position(first.ledger_id, e) for e in range(first.entry_id, last.entry_id + 1)]
    else:
        positions = [
            Position(first.ledger_id, e) for e in range(first.entry_id, MAX_ENTRIES_PER_LEDGER)
        ]
        positions += [Position(last.ledger_id, e) for e in range(last.entry_id + 1)]
    if len(positions) != count:
        raise AssertionError(f"cannot place {count} entries between {first} and {last}")
    return positions


def _produce_up_to(off: Offloader, seed: int, target: int, rng: random.Random, emit: Emit) -> None:
    seq = off.topic_info(TOPIC).entries
    while seq < target:
        n = min(rng.randint(1, 3), target - seq)
        batch = [payload(seed, s) for s in range(seq, seq + n)]
        result = off.produce(TOPIC, batch)
        assert result.entries == n and result.first is not None and result.last is not None
        for offset, position in enumerate(_positions(result.first, result.last, n)):
            emit(f"ACK {seq + offset} {position} {sha256_hex(batch[offset])}")
        seq += n


#: the software version our lost attempts write (gc deletes only objects with our marker)
OUR_SOFTWARE = "ledger-offloader-crash-harness"
#: key parts of what :func:`_plant_foreign` leaves (the harness expects these to survive gc)
FOREIGN_DATA_LEDGER = 9_999
FOREIGN_UPLOAD_LEDGER = 9_998
FOREIGN_PREFIX = "junk/"


def _plant_lost_attempt(off: Offloader) -> None:
    """What a stalled process of this home leaves (only gc can find it): attempt A recorded,
    then superseded by attempt B and cleaned (marked CLEANED) while A's process was stalled;
    then A's process wakes up and writes its data and index objects (our marker) and starts
    another upload of its data. The per-topic sweep skips cleaned attempts and the offload
    cleans only B."""
    ledger = off.topic_info(TOPIC).ledgers[-2]  # closed by the roll-over, not yet offloaded
    meta, store = off.runtime.meta, off.runtime.store
    driver = DriverMetadata("stalled-process", {})
    now = off.runtime.now_ms()
    lid = ledger.ledger_id
    lost, later = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        for attempt in (lost, later):
            meta.begin_offload(
                lid,
                attempt,
                driver,
                now,
                data_key=data_key(attempt, lid),
                index_key=index_key(attempt, lid),
            )
    except OffloadAlreadyComplete:  # a restarted worker: this round's ledger is offloaded
        return
    meta.mark_attempt_cleaned(lost, now)
    for role, key in (("data", data_key(lost, lid)), ("index", index_key(lost, lid))):
        metadata = object_user_metadata(role, software_version=OUR_SOFTWARE)
        store.put(key, f"stalled attempt's {role}".encode(), metadata)
    upload_id = store.create_multipart_upload(data_key(lost, lid), {})
    part = b"half a second try of the data"
    store.upload_part(data_key(lost, lid), upload_id, 1, part, crc32c(part))


def _plant_foreign(off: Offloader, seed: int) -> None:
    """What others sharing the store leave: an object under a UUID nobody recorded here, an
    object that is no offload key at all, and an abandoned multipart upload (one part)."""
    store = off.runtime.store
    stray = str(uuid.uuid4())
    store.put(data_key(stray, FOREIGN_DATA_LEDGER), b"lost data object", {})
    store.put(f"{FOREIGN_PREFIX}seed-{seed}-{stray[:8]}", b"not an offload key", {})
    abandoned = data_key(str(uuid.uuid4()), FOREIGN_UPLOAD_LEDGER)
    upload_id = store.create_multipart_upload(abandoned, {})
    part = b"half an upload"
    store.upload_part(abandoned, upload_id, 1, part, crc32c(part))


def _current_ledger(off: Offloader) -> int:
    return off.topic_info(TOPIC).ledgers[-1].ledger_id


def run(off: Offloader, seed: int, emit: Emit) -> None:
    """The whole workload from the top (see the module docstring); idempotent."""
    rng = random.Random(seed)
    with contextlib.suppress(AlreadyExists):
        off.create_namespace(NS)
    off.produce(TOPIC, [])  # recovers the current ledger: its stats now match the file
    for number, target in enumerate(ROUND_TARGETS):
        _produce_up_to(off, seed, target, rng, emit)
        off.roll_over(TOPIC)
        if number == 1:
            _plant_lost_attempt(off)
        if number % 2 == 0:
            off.offload_prefix(TOPIC, position=Position(_current_ledger(off), 0))
        else:
            off.offload_prefix(TOPIC, size_threshold=0)
        if number == 1:
            _plant_foreign(off, seed)
        off.set_offload_deletion_lag(NS, 0)
        time.sleep(0.002)  # the lag is "now - offloaded > lag": let a millisecond pass
        off.service_tick()
        off.gc(min_age_seconds=0)
    _produce_up_to(off, seed, TOTAL_ENTRIES, rng, emit)


def main(argv: list[str]) -> None:
    home, store_url, seed = argv[0], argv[1], int(argv[2])
    configure(level=logging.CRITICAL)

    def emit(line: str) -> None:
        print(line, flush=True)

    with open_offloader(home, store_url) as off:
        emit("READY")
        run(off, seed, emit)
    emit("DONE")


if __name__ == "__main__":
    main(sys.argv[1:])
