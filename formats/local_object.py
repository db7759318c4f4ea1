"""The container of a ``file://`` store's object file (spec/local-store.md): the magic
``LOFFOBJ1``, a big-endian u32 length, that many bytes of the user metadata as JSON (one object
of strings, keys lower-case, sorted, compact), then the object's bytes.

Pure: the header encoded from a metadata mapping, and decoded from the bytes at the start of a
file. The store (``offloader.store.local_files``) reads and writes the files; ``objects
inspect`` unwraps a file it is given when the file is a stored object rather than a bare copy.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping

from formats.errors import (
    BadMagicError,
    CorruptDataError,
    MetadataTooLargeError,
    TruncatedError,
)

LOCAL_OBJECT_MAGIC = b"LOFFOBJ1"
LOCAL_HEADER = struct.Struct(">8sI")
#: the largest metadata JSON a header may hold
MAX_LOCAL_METADATA_BYTES = 64 * 1024


def encode_local_header(metadata: Mapping[str, str]) -> bytes:
    """The header that precedes an object's bytes in its file."""
    meta = json.dumps(
        {str(k).lower(): str(v) for k, v in metadata.items()},
        sort_keys=True,
        separators=(",", ":"),
    ).encode("utf-8")
    if len(meta) > MAX_LOCAL_METADATA_BYTES:
        raise MetadataTooLargeError(f"user metadata of {len(meta)} bytes is too large")
    return LOCAL_HEADER.pack(LOCAL_OBJECT_MAGIC, len(meta)) + meta


def is_local_object(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a local object's magic."""
    return bytes(data[: len(LOCAL_OBJECT_MAGIC)]) == LOCAL_OBJECT_MAGIC


def local_metadata_length(head: bytes | memoryview) -> int:
    """The metadata length a header's first :data:`LOCAL_HEADER` bytes announce."""
    if len(head) < LOCAL_HEADER.size:
        raise TruncatedError("short header")
    magic, n = LOCAL_HEADER.unpack_from(head)
    if magic != LOCAL_OBJECT_MAGIC or n > MAX_LOCAL_METADATA_BYTES:
        raise BadMagicError("bad header")
    return int(n)


def decode_local_metadata(raw: bytes | memoryview, expected: int) -> dict[str, str]:
    """The user metadata from the ``expected`` JSON bytes after the fixed header."""
    try:
        meta = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptDataError("corrupt metadata header") from None
    if len(raw) != expected or not isinstance(meta, dict):
        raise CorruptDataError("corrupt metadata header")
    return {str(k): str(v) for k, v in meta.items()}


def decode_local_object(data: bytes | memoryview) -> tuple[dict[str, str], memoryview]:
    """A whole object file: its user metadata and a view of the object's bytes."""
    view = memoryview(data)
    n = local_metadata_length(view)
    meta = decode_local_metadata(view[LOCAL_HEADER.size : LOCAL_HEADER.size + n], n)
    return meta, view[LOCAL_HEADER.size + n :]


def object_bytes(data: bytes) -> bytes:
    """The object's bytes whether ``data`` is a local store's file (header stripped) or a bare
    copy of the object (as downloaded from S3): what ``objects inspect`` reads."""
    if not is_local_object(data):
        return data
    return bytes(decode_local_object(data)[1])
