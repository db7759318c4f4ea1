"""Remote Kafka objects checked against their segment's record before a byte of them is used
(spec/kafka-segments.md §6).

A segment finished since checks were recorded pins, in its record, the size and the span
CRC32Cs of every object it uploaded and the transform of its ``.log``
(:class:`~offloader.metadata.kafka_base.SegmentChecks`). This module owns the checks every read
path makes with them:

* :func:`verified_object` (:func:`check_object`): a whole small object (``.index``,
  ``.timeindex``, ``.chunks``...), its size and every span checked; a ``.chunks`` may also be
  the one a re-key is writing;
* :class:`VerifiedLog`: ranges of a plain ``.log`` fetched as whole spans (one ranged GET),
  each span checked, then sliced; the last spans fetched are kept for the next read; or
  (``read_exact``, the batch fetch) about the bytes asked for, the spans wholly inside checked
  and the batches at the partial edges cross-checked by the caller;
* :func:`check_transform`: the ``.chunks`` section's transform is the pinned one, and a plain
  segment has no ``.chunks`` (a forged "no encryption" table is refused, key ring or not);
* :func:`check_binding`: an object's user metadata (``kafka-segment-id``, topic, partition,
  base offset) names this segment, and a ``.log``'s size is the record's (rows without checks
  too);
* :class:`BatchGuard`: every batch read lies inside the segment's offsets, after the previous
  one, and the first batch found through the ``.index`` can hold the wanted offset.

A mismatch is :class:`~offloader.errors.RemoteSegmentMismatch` naming topic, partition, base
offset and key. Rows from before checks were recorded (``checks`` None) are read as before,
verified only by Kafka's batch CRC32Cs and the batch guard.
"""

from __future__ import annotations

from formats.kafka.batch import BatchHeader
from formats.kafka.errors import KafkaCorruptError
from formats.kafka.spans import ObjectChecksums
from formats.transform import TransformSection
from offloader.errors import RemoteSegmentMismatch
from offloader.metadata.kafka_base import PLAIN_TRANSFORM, RemoteSegmentRecord
from offloader.store.base import GetResult, ObjectStore

__all__ = [
    "BatchGuard",
    "VerifiedLog",
    "check_binding",
    "check_object",
    "check_transform",
    "mismatch",
    "verified_object",
]

CHUNKS = "chunks"


def mismatch(record: RemoteSegmentRecord, key: str, why: str) -> RemoteSegmentMismatch:
    """The error for an object of ``record`` that does not match it."""
    return RemoteSegmentMismatch(
        f"remote segment of {record.topic}-{record.partition} at base offset "
        f"{record.base_offset} (segment {record.segment_id}), object {key}: {why}; "
        "nothing of it is returned"
    )


def _accepted(record: RemoteSegmentRecord, kind: str) -> list[ObjectChecksums]:
    checks = record.checks
    assert checks is not None
    found = [checks.objects[kind]] if kind in checks.objects else []
    if kind == CHUNKS and checks.next_chunks is not None:
        found.append(checks.next_chunks)
    return found


def verified_object(store: ObjectStore, record: RemoteSegmentRecord, kind: str) -> bytes:
    """The whole ``kind`` object of the segment, checked against the record's checks."""
    got = store.get(record.keys[kind])
    check_binding(record, record.keys[kind], got)
    check_object(record, kind, got.data)
    return got.data


def check_binding(record: RemoteSegmentRecord, key: str, got: GetResult) -> None:
    """The object's user metadata names this segment (when it names one): an object of
    another segment or partition put under this key is refused, on rows without checks too."""
    for field, want in (
        ("kafka-segment-id", record.segment_id),
        ("kafka-topic", record.topic),
        ("kafka-partition", str(record.partition)),
        ("kafka-base-offset", str(record.base_offset)),
    ):
        found = got.metadata.get(field)
        if found is not None and found != want:
            raise mismatch(record, key, f"the object's {field} is {found}, not {want}")


def check_object(record: RemoteSegmentRecord, kind: str, data: bytes) -> None:
    """``data`` is the segment's whole ``kind`` object as the record pins it."""
    key = record.keys[kind]
    if record.checks is None:
        return
    accepted = _accepted(record, kind)
    if not accepted:
        raise mismatch(record, key, f"its record pins no checksum of a {kind} object")
    for checks in accepted:
        if len(data) == checks.size and checks.first_bad_span(data, 0) is None:
            return
    pinned = accepted[0]
    if len(data) != pinned.size:
        why = f"{len(data)} bytes, the record pins {pinned.size}"
    else:
        why = f"span {pinned.first_bad_span(data, 0)}'s CRC32C is not the recorded one"
    raise mismatch(record, key, why)


def check_transform(record: RemoteSegmentRecord, section: TransformSection | None) -> None:
    """The ``.log``'s transform (``section``: its chunk table, None for a plain ``.log``) is the
    one pinned in the record."""
    checks = record.checks
    if checks is None:
        return
    found = PLAIN_TRANSFORM if section is None else section.describe()
    if found != checks.transform:
        key = record.keys.get(CHUNKS, record.keys["log"])
        raise mismatch(
            record, key, f"the .log is stored as {found!r}, the record pins {checks.transform!r}"
        )


class VerifiedLog:
    """Byte ranges of a plain segment's ``.log``, every byte from a checked span."""

    def __init__(self, store: ObjectStore, record: RemoteSegmentRecord) -> None:
        self._store = store
        self._record = record
        self._key = record.keys["log"]
        checks = record.checks
        self._spans = None if checks is None else checks.objects.get("log")
        if checks is not None and self._spans is None:
            raise mismatch(record, self._key, "its record pins no checksum of the .log")
        if self._spans is not None and self._spans.size != record.size_bytes:
            raise mismatch(
                record,
                self._key,
                f"its record pins {self._spans.size} bytes, the segment has {record.size_bytes}",
            )
        #: the last checked spans: object offset and bytes
        self._held_at = 0
        self._held = b""
        #: the ranged GETs made and the bytes they brought (what a fetch meter records)
        self.gets = 0
        self.fetched = 0

    def _get(self, start: int, end: int) -> GetResult:
        got = self._store.get_range(self._key, start, end)
        self.gets += 1
        self.fetched += len(got.data)
        return got

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the ``.log`` (shorter at its end)."""
        spans = self._spans
        if spans is None:
            got = self._get(start, end)
            self._check_whole(got)
            return got.data
        end = min(end, spans.size)
        if end <= start:
            return b""
        held_end = self._held_at + len(self._held)
        if self._held_at <= start and end <= held_end:
            return self._held[start - self._held_at : end - self._held_at]
        a, b = spans.covering(start, end)
        got = self._get(a, b)
        self._check_whole(got)
        data = got.data
        bad = spans.first_bad_span(data, a)
        if bad is not None:
            why = (
                f"{len(data)} bytes at {a}, {b - a} expected"
                if len(data) != b - a
                else f"span {bad} (bytes {bad * spans.span}.."
                f"{min(spans.size, (bad + 1) * spans.span) - 1}) does not match its recorded CRC32C"
            )
            raise mismatch(self._record, self._key, why)
        self._held_at, self._held = a, data
        return data[start - a : end - a]

    def read_exact(self, start: int, end: int, slack: int) -> tuple[bytes, int, int]:
        """Bytes ``[start, end)`` of the ``.log`` from one ranged GET of about those bytes, and
        the part ``[lo, hi)`` of them checked against the record's span CRC32Cs. The range is
        widened to whole spans (all of it checked) when that costs at most ``slack`` bytes or a
        tenth of the range; otherwise only the spans lying wholly inside it are checked, and
        the bytes of the partial spans at its edges are the caller's to cross-check (a batch's
        CRC32C covers all of its bytes but its first 21). Rows without checks: ``lo == hi``."""
        spans = self._spans
        if spans is None:
            got = self._get(start, end)
            self._check_whole(got)
            return got.data, start, start
        end = min(end, spans.size)
        a, b = spans.covering(start, end)
        if (start - a) + (b - end) <= max(slack, (end - start) // 10):
            return self.read(start, end), start, end
        got = self._get(start, end)
        self._check_whole(got)
        data = got.data
        if len(data) != end - start:
            raise mismatch(
                self._record, self._key, f"{len(data)} bytes at {start}, {end - start} expected"
            )
        lo = -(-start // spans.span) * spans.span
        hi = end if end == spans.size else end // spans.span * spans.span
        if hi > lo:
            bad = spans.first_bad_span(memoryview(data)[lo - start : hi - start], lo)
            if bad is not None:
                raise mismatch(
                    self._record,
                    self._key,
                    f"span {bad} (bytes {bad * spans.span}.."
                    f"{min(spans.size, (bad + 1) * spans.span) - 1}) does not match its "
                    "recorded CRC32C",
                )
        return data, lo, max(lo, hi)

    def _check_whole(self, got: GetResult) -> None:
        check_binding(self._record, self._key, got)
        if got.size != self._record.size_bytes:
            raise mismatch(
                self._record,
                self._key,
                f"the object has {got.size} bytes, the segment {self._record.size_bytes}",
            )


class BatchGuard:
    """Batches read from one segment, checked one by one: inside ``[base, end]`` (``end`` None:
    the active local segment), each after the one before. ``remote``: the record whose objects
    are read (errors are :class:`RemoteSegmentMismatch`), else a local file (errors are
    ``KafkaCorruptError``)."""

    def __init__(
        self, source: str, base: int, end: int | None, remote: RemoteSegmentRecord | None
    ) -> None:
        self.source = source
        self.base = base
        self.end = end
        self.remote = remote
        self.previous_last = -1

    def fail(self, why: str, position: int | None = None) -> Exception:
        if self.remote is not None:
            return mismatch(self.remote, self.source, why)
        return KafkaCorruptError(why, offset=position, source=self.source)

    def check(self, header: BatchHeader) -> None:
        if header.base_offset < self.base or (
            self.end is not None and header.last_offset > self.end
        ):
            end = "" if self.end is None else str(self.end)
            raise self.fail(
                f"batch of offsets {header.base_offset}..{header.last_offset} lies outside "
                f"the segment's offsets {self.base}..{end}",
                header.position,
            )
        if header.base_offset <= self.previous_last:
            raise self.fail(
                f"batch at offset {header.base_offset} is not after the previous batch "
                f"(which ended at {self.previous_last})",
                header.position,
            )
        self.previous_last = header.last_offset
