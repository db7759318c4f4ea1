"""The rules every backend applies to a multipart upload's part numbers and to the parts list a
completion is given, written once: a part number inside the store's range, and a completion
list that is not empty, has no number twice, and is put in part-number order.

:class:`PartsBody` is the request body of a whole object sent in one request from its parts
(``put_parts`` of GCS and Azure): the parts one after the other, with the total length.

Pure: no SDK; each backend keeps only what its service does with the ordered parts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from offloader.errors import StoreError
from offloader.store.base import Buffer, UploadedPart

__all__ = ["PartsBody", "check_part_number", "ordered_parts"]


def check_part_number(part_number: int, limit: int = 10000) -> None:
    """Refuse a part number outside ``1..limit`` (S3 and GCS: 10000; Azure: 50000 blocks)."""
    if not 1 <= part_number <= limit:
        raise StoreError(f"part number {part_number} not in 1..{limit}")


def ordered_parts(parts: Sequence[UploadedPart], shown: str) -> list[UploadedPart]:
    """The parts of a completion in part-number order; ``shown`` names the object in errors."""
    if not parts:
        raise StoreError(f"complete {shown}: no parts")
    ordered = sorted(parts, key=lambda p: p.part_number)
    numbers = [p.part_number for p in ordered]
    if len(set(numbers)) != len(numbers):
        raise StoreError(f"complete {shown}: duplicate part numbers {numbers}")
    return ordered


class PartsBody:
    """A request body of known length made of buffers sent one after the other: an HTTP
    client (requests, under both cloud SDKs) sends an iterable with a length as it is, with
    that Content-Length, so the parts are never joined into one copy (traced on Azure: one
    ``sendall`` per part, each the part's own memoryview, no chunked encoding). Iterable again
    (a retried request sends it whole again).

    ``parts`` whose total is known before they all exist (the offload writer's blocks, framed
    on another thread while the first ones are sent) say so with an ``nbytes`` attribute: the
    body then takes each part only when the transport asks for it."""

    def __init__(self, parts: Sequence[Buffer]) -> None:
        self._parts = parts
        known = getattr(parts, "nbytes", None)
        self._views: list[memoryview] | None = None
        if isinstance(known, int):
            self._total = known
        else:
            self._views = [memoryview(p).cast("B") for p in parts]
            self._total = sum(v.nbytes for v in self._views)

    @property
    def views(self) -> list[memoryview]:
        """Every part as a byte view (waits for all of them)."""
        if self._views is None:
            self._views = [memoryview(p).cast("B") for p in self._parts]
        return self._views

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[memoryview]:
        if self._views is not None:
            return iter(self._views)
        return (memoryview(p).cast("B") for p in self._parts)
