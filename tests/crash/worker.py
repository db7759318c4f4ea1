"""The process the kill -9 harness kills: a scripted, resumable workload on one topic.

Run as ``python -m tests.crash.worker HOME STORE_URL SEED``. The workload (:func:`run`) goes
through :class:`offloader.api.Offloader` only, in rounds::

    produce (1-3 entries per call) until the topic holds the round's target count
    roll over
    [round 1: record an attempt superseded as by an offload killed right after it began]
    offload-prefix (by position, or by size threshold 0)
    [round 1: plant objects this installation did not write: an object under an unknown UUID,
     a key that is no offload key, another client's multipart upload; gc must leave them]
    deletion lag 0; service tick (verify, mark local_deleted, delete the local copy)
    [round 1: plant a late write of a cleaned attempt: an object and an upload gc deletes]
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
import os
import random
import sys
import time
import uuid
from collections.abc import Callable

from formats.extension import crc32c
from formats.keys import ROLE_DATA, data_key, index_key, object_user_metadata
from offloader.api import BrokerSettings, Offloader, Position
from offloader.config import OffloadSettings
from offloader.errors import AlreadyExists
from offloader.logs import configure

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


#: a PostgreSQL metadata URL for the worker (else SQLite in the home)
METADATA_ENV = "LEDGER_OFFLOADER_CRASH_METADATA"


def open_offloader(home: str, store_url: str, metadata_url: str | None = None) -> Offloader:
    """The Offloader of the worker (and of the harness's restarts). On S3 the endpoint and
    credentials come from the environment (``AWS_ENDPOINT_URL``...); the metadata store is
    ``metadata_url``, else :data:`METADATA_ENV`'s, else SQLite in the home."""
    return Offloader.from_settings(
        home,
        store_url,
        metadata_url=metadata_url or os.environ.get(METADATA_ENV) or None,
        broker=broker_settings(store_url),
    )


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


def _record_lost_attempt(off: Offloader) -> None:
    """What an offload of this installation killed right after recording its attempt leaves: a
    superseded attempt of the last closed ledger not yet offloaded (its objects, if any, are
    the service's leftover sweep's to delete)."""
    rt = off.runtime
    pending = [
        r.ledger_id
        for r in off.topic_info(TOPIC).ledgers
        if r.state == "CLOSED" and not r.offload_complete
    ]
    if not pending:
        return
    ledger_id = pending[-1]
    for attempt in (str(uuid.uuid4()), str(uuid.uuid4())):  # the second supersedes the first
        rt.meta.begin_offload(
            ledger_id,
            attempt,
            rt.driver,
            rt.now_ms(),
            data_key=data_key(attempt, ledger_id),
            index_key=index_key(attempt, ledger_id),
        )


def _plant_late_write(off: Offloader) -> None:
    """A write of a dead attempt of this installation that landed after its attempt was
    cleaned: a data object with our marker in its metadata and a multipart upload (one part).
    Provably ours (its UUID is in the attempt history), so gc deletes them, reaching its crash
    points."""
    rt = off.runtime
    cleaned = rt.meta.list_attempts(topic=TOPIC, states=("CLEANED",))
    if not cleaned:
        return
    key = cleaned[0].data_key
    ours = object_user_metadata(ROLE_DATA, software_version=rt.broker.offload.software_version)
    rt.store.put(key, b"a late write of a dead attempt", ours)
    upload_id = rt.store.create_multipart_upload(key, ours)
    part = b"half an upload"
    rt.store.upload_part(key, upload_id, 1, part, crc32c(part))


def _plant_orphans(off: Offloader, seed: int) -> None:
    """What another writer sharing the store leaves, which this installation never wrote: an
    object under a UUID nobody recorded here, an object that is no offload key at all, and
    another client's multipart upload (one part). gc reports them and leaves them alone."""
    store = off.runtime.store
    stray = str(uuid.uuid4())
    store.put(data_key(stray, 9_999), b"lost data object", {})
    store.put(f"junk/seed-{seed}-{stray[:8]}", b"not an offload key", {})
    abandoned = data_key(str(uuid.uuid4()), 9_998)
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
            _record_lost_attempt(off)
        if number % 2 == 0:
            off.offload_prefix(TOPIC, position=Position(_current_ledger(off), 0))
        else:
            off.offload_prefix(TOPIC, size_threshold=0)
        if number == 1:
            _plant_orphans(off, seed)
        off.set_offload_deletion_lag(NS, 0)
        time.sleep(0.002)  # the lag is "now - offloaded > lag": let a millisecond pass
        off.service_tick()
        if number == 1:
            _plant_late_write(off)
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
