"""The key layout of multipart uploads on stores that have no S3-style upload ids (GCS, Azure).

Google Cloud Storage and Azure Blob Storage have no ``ListMultipartUploads``: an upload that a
crash abandoned would be invisible, and gc could never find it. So each upload started through
:meth:`~offloader.store.base.ObjectStore.create_multipart_upload` is recorded as a small *marker*
object under the store's reserved ``.uploads/`` key space:

- ``.uploads/k/<key>/<upload id>``: the marker (empty; its user metadata is the metadata the
  finished object gets; its creation time is the upload's initiation time). Listing
  ``.uploads/k/<prefix>`` is ``list_multipart_uploads(prefix)``; deleting it is the abort.
- ``.uploads/p/<upload id>/<part number, 5 digits>``: a GCS part (a temporary object, composed
  into the target at completion). Azure parts are staged blocks of the target blob itself.

Keys whose first segment is ``.uploads`` are refused on these stores (``InvalidStoreKey``), and
listings never show the reserved space; :func:`uploads_from_markers` turns a listing of markers
into the answer of ``list_multipart_uploads``. This module is pure (no SDK).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from offloader.errors import InvalidStoreKey
from offloader.store.base import MultipartUploadInfo
from offloader.store.keycheck import check_key

__all__ = [
    "RESERVED",
    "check_user_key",
    "could_be_ours",
    "is_reserved",
    "marker_name",
    "marker_prefix",
    "new_upload_id",
    "parse_marker",
    "part_name",
    "part_prefix",
    "uploads_from_markers",
    "valid_upload_id",
]

RESERVED = ".uploads"
_MARKERS = f"{RESERVED}/k/"
_PARTS = f"{RESERVED}/p/"


def check_user_key(key: str) -> str:
    """:func:`check_key`, and the reserved ``.uploads`` first segment refused."""
    check_key(key)
    if key == RESERVED or key.startswith(RESERVED + "/"):
        raise InvalidStoreKey(f"object key {key[:200]!r} is in the reserved {RESERVED}/ space")
    return key


def is_reserved(relative: str) -> bool:
    return relative.startswith(RESERVED + "/")


def new_upload_id() -> str:
    return uuid.uuid4().hex


def _check_upload_id(upload_id: str) -> bool:
    return len(upload_id) == 32 and all(c in "0123456789abcdef" for c in upload_id)


def valid_upload_id(upload_id: str) -> bool:
    """Whether ``upload_id`` can be one of ours (32 lower-case hex digits)."""
    return isinstance(upload_id, str) and _check_upload_id(upload_id)


def could_be_ours(key: str, upload_id: str) -> bool:
    """Whether ``(key, upload_id)`` can name an upload of ours: an abort of anything else is a
    no-op, as S3's abort of an unknown upload is for the offloader."""
    if not valid_upload_id(upload_id):
        return False
    try:
        check_user_key(key)
    except InvalidStoreKey:
        return False
    return True


def marker_name(key: str, upload_id: str) -> str:
    return f"{_MARKERS}{key}/{upload_id}"


def marker_prefix(prefix: str) -> str:
    return _MARKERS + prefix


def parse_marker(relative: str) -> tuple[str, str] | None:
    """``(key, upload id)`` of a marker's relative name, or None for anything else."""
    if not relative.startswith(_MARKERS):
        return None
    key, _, upload_id = relative[len(_MARKERS) :].rpartition("/")
    if not key or not valid_upload_id(upload_id):
        return None
    return key, upload_id


def part_prefix(upload_id: str) -> str:
    return f"{_PARTS}{upload_id}/"


def part_name(upload_id: str, part_number: int) -> str:
    return f"{part_prefix(upload_id)}{part_number:05d}"


def uploads_from_markers(
    markers: Iterable[tuple[str, datetime | None]],
) -> list[MultipartUploadInfo]:
    """``list_multipart_uploads``' answer from the listed markers (each its relative name and
    creation time; anything that is no marker is skipped), by key then initiation time."""
    uploads = []
    for relative, initiated in markers:
        parsed = parse_marker(relative)
        if parsed is not None:
            uploads.append(MultipartUploadInfo(parsed[0], parsed[1], initiated))
    uploads.sort(key=lambda u: (u.key, u.initiated.timestamp() if u.initiated else 0.0))
    return uploads
