"""Typed errors of the Pulsar message codec (all in the one tree rooted at OffloaderError).

Every error raised while decoding an entry names the ledger and entry it came from (when the
caller said) and the byte offset inside the entry where the problem was found.
"""

from __future__ import annotations

from formats.errors import (
    ChecksumMismatchError,
    CorruptDataError,
    FormatError,
    TruncatedError,
)


class PulsarMessageError(FormatError):
    """An entry that is not a well-formed Pulsar message entry (or a request the encoder
    cannot express)."""

    def __init__(
        self,
        message: str,
        *,
        ledger_id: int | None = None,
        entry_id: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.reason = message
        where = ""
        if ledger_id is not None or entry_id is not None:
            where = f"ledger {ledger_id} entry {entry_id}: "
        super().__init__(where + message, offset=offset)

    def located(self, ledger_id: int | None, entry_id: int | None) -> PulsarMessageError:
        """The same error, naming ``ledger_id``/``entry_id`` (when it did not already)."""
        if self.ledger_id is not None or self.entry_id is not None:
            return self
        err = type(self)(self.reason, ledger_id=ledger_id, entry_id=entry_id, offset=self.offset)
        err.__cause__ = self.__cause__
        return err


class NotPulsarMessagesError(PulsarMessageError):
    """A ledger whose entries are not Pulsar message entries at all (raw bytes written by
    something other than a Pulsar producer: ``topics produce`` of plain payloads, Pulsar's
    golden objects of raw entries). The message names the ledger, the entry, where the ledger
    comes from (its managed ledger or topic, its object) and what to do instead."""

    def __init__(
        self,
        message: str,
        *,
        ledger_id: int | None = None,
        entry_id: int | None = None,
        offset: int | None = None,
        source: str = "",
        hint: str = "",
    ) -> None:
        #: where the ledger comes from ("managed ledger a/b/persistent/t, object <key>")
        self.source = source
        self.hint = hint
        super().__init__(message, ledger_id=ledger_id, entry_id=entry_id, offset=offset)
        where = f"ledger {ledger_id}" if ledger_id is not None else "an entry"
        if source:
            where += f" ({source})"
        if entry_id is not None:
            where += f" entry {entry_id}"
        text = f"{where} is not in Pulsar message format: {message}"
        self.args = (f"{text}; {hint}" if hint else text,)

    def located(self, ledger_id: int | None, entry_id: int | None) -> PulsarMessageError:
        if self.ledger_id is not None or self.entry_id is not None:
            return self
        return NotPulsarMessagesError(
            self.reason, ledger_id=ledger_id, entry_id=entry_id, source=self.source, hint=self.hint
        )


class MessageTruncatedError(PulsarMessageError, TruncatedError):
    """The entry ended before a size field said it would."""


class MalformedMessageError(PulsarMessageError, CorruptDataError):
    """A field, a protobuf or a batch layout that cannot be right."""


class MessageChecksumError(PulsarMessageError, ChecksumMismatchError):
    """The CRC32C after magic 0x0e01 does not match the bytes after it."""


class UnsupportedCompressionError(PulsarMessageError):
    """A compression codec this decoder does not know."""


class DecompressionError(PulsarMessageError, CorruptDataError):
    """Compressed data that does not decompress to exactly ``uncompressed_size`` bytes (this
    includes a decompression bomb: more output than announced)."""


class ChunkError(PulsarMessageError, CorruptDataError):
    """Chunks of a message that cannot be put together (wrong order, sizes that disagree)."""


class DecryptionError(PulsarMessageError):
    """An encrypted message the given private key cannot decrypt."""


class MessageEncodeError(PulsarMessageError):
    """Values the encoder cannot write (an out-of-range field, a bad codec name)."""
