"""Kafka format errors: the typed errors of :mod:`formats.kafka`, in the project's one tree.

Each class derives from the matching :mod:`formats.errors` class (so a caller that catches
``FormatError`` or ``ChecksumMismatchError`` catches these too) and from
:class:`KafkaFormatError`, so a caller can tell Kafka bytes from Pulsar bytes. Messages name the
segment (``source``) and the byte offset within it when they are known.
"""

from __future__ import annotations

from formats.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    FormatError,
    InvalidKeyError,
    TruncatedError,
    UnsupportedVersionError,
)


def _where(message: str, source: str | None) -> str:
    return message if source is None else f"{source}: {message}"


class KafkaFormatError(FormatError):
    """Bytes that are not valid Kafka log data (record batches, indexes, checkpoints)."""

    def __init__(
        self, message: str, *, offset: int | None = None, source: str | None = None
    ) -> None:
        self.source = source
        super().__init__(_where(message, source), offset=offset)


class KafkaTruncatedError(KafkaFormatError, TruncatedError):
    """A batch, record or index entry ends before its announced length."""


class KafkaCorruptError(KafkaFormatError, CorruptDataError):
    """A field that cannot be right (negative length, bad varint, records past the batch)."""


class KafkaChecksumError(KafkaFormatError, ChecksumMismatchError):
    """A record batch whose CRC32C does not match its bytes."""


class UnsupportedMagicError(KafkaFormatError, UnsupportedVersionError):
    """A real message set of magic 0 or 1 (pre-0.11 formats: its layout and CRC32 check out):
    not read."""

    def __init__(self, magic: int, *, offset: int | None = None, source: str | None = None) -> None:
        self.magic = magic
        super().__init__(
            f"record batch magic {magic} is not supported (only magic 2, Kafka >= 0.11, is read;"
            " convert the segment with a newer broker first)",
            offset=offset,
            source=source,
        )


class CorruptBatchError(KafkaCorruptError):
    """Bytes where a record batch should start that are neither a magic 2 batch nor a magic 0/1
    message (a flipped magic byte, garbage): corruption, not an old format."""

    def __init__(self, magic: int, *, offset: int, source: str | None = None) -> None:
        self.magic = magic
        where = f" in {source}" if source is not None else ""
        super().__init__(
            f"corrupt record batch at position {offset}{where}: magic byte {magic} is not 2, "
            "and the bytes are not a magic 0/1 message either"
        )
        self.source = source
        self.offset = offset


class UnsupportedCodecError(KafkaFormatError, UnsupportedVersionError):
    """A compression type this code does not know (attributes & 7 above 4)."""


class CompressionError(KafkaCorruptError):
    """Compressed records that the codec cannot decompress."""


class KafkaIndexError(KafkaCorruptError):
    """An ``.index`` or ``.timeindex`` file that breaks Kafka's rules."""


class KafkaNameError(KafkaFormatError, InvalidKeyError):
    """A file, directory or object key name that is not a Kafka segment name."""


class UnsupportedMetadataRecordError(KafkaFormatError, UnsupportedVersionError):
    """A KRaft metadata record this code cannot read safely: a frame version other than 1, or
    a version of a known record type newer than the schemas it was written from (a record type
    it does not know at all is skipped, not refused)."""
