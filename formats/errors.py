"""The root of ledger-offloader's one exception tree, and the format errors.

Every error the project raises derives from :class:`OffloaderError`. This module lives in
``formats`` (the bottom layer) so that the pure codecs can raise typed errors without importing
the engine; :mod:`offloader.errors` re-exports everything here and adds the I/O errors.

:func:`quoted_name` quotes a name in a message (as ``repr`` does, but showing the bytes a
command line could not decode as ``\\xNN``).

Format errors carry the byte ``offset`` (within the object or buffer being decoded) where the
problem was found, when there is one, so that a message always says *where*.
"""

from __future__ import annotations


class OffloaderError(Exception):
    """Root of every error raised by ledger-offloader."""


class FormatError(OffloaderError):
    """Bytes that do not follow the tiered-storage format (or a request it cannot express)."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message if offset is None else f"{message} (at offset {offset})")


class TruncatedError(FormatError):
    """The input ended before a structure it announced was complete."""


class BadMagicError(FormatError):
    """A magic number is not the one the structure requires."""


class CorruptDataError(FormatError):
    """A field holds a value that cannot be right (negative length, wrong entry id, ...)."""


class UnsupportedVersionError(FormatError):
    """A structure of a version this code does not read (or not write)."""


class ChecksumMismatchError(FormatError):
    """A CRC32C recorded for some bytes does not match the bytes."""


class IndexInconsistentError(FormatError):
    """The index and the data object (or the ledger metadata) contradict each other."""


class EntryTooLargeError(FormatError):
    """An entry cannot fit in one block of the configured maximum block size."""


class EmptyLedgerError(FormatError):
    """A ledger with no entries: nothing to encode (see spec/block-format.md)."""


class InvalidKeyError(FormatError):
    """A string that is not an offloaded-ledger object key."""


class MetadataTooLargeError(FormatError):
    """User metadata too large for its container (a file store object's header)."""


class ProtobufError(FormatError):
    """Malformed protobuf wire data (ledger metadata)."""


class ManagedLedgerInfoError(ProtobufError):
    """A value that is not a Pulsar ``ManagedLedgerInfo`` (the managed ledger's node in the
    cluster's metadata store): bad protobuf, a bad compression header, a missing required
    field."""


class TransformError(FormatError):
    """A transformed (chunked, compressed and/or encrypted) object that cannot be read back."""


class ChunkAuthenticationError(TransformError):
    """A chunk's bytes, position or flags were changed: its checksum or its AES-GCM tag fails
    (a tampered, swapped or replayed chunk)."""


class WrongKeyError(TransformError):
    """The key-encryption key does not unwrap the object's data key (the wrong key under the
    right id, or a tampered wrapped key)."""


def quoted_name(text: str) -> str:
    """``text`` in single quotes, as ``repr`` would show it, except that the bytes a command
    line could not decode (Python's surrogate escapes) are shown as the bytes they were
    (``\\xff``), not as ``\\udcff``."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char in "\\'":
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(repr(char)[1:-1])
    return "'" + "".join(out) + "'"
