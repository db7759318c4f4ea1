"""Pulsar message entries: decode what producers stored in a ledger, encode the same format.

Pure (no I/O). See spec/pulsar-messages.md. Entry points: :func:`decode_entry` (one entry),
:func:`iter_messages` (a stream of entries, chunks reassembled), :func:`encode_entry` and
:func:`encode_chunks` (the producer side).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from formats.pulsar.chunks import ChunkAssembler, iter_messages
    from formats.pulsar.compression import CODEC_NAMES, CODECS_BY_NAME, codec_number
    from formats.pulsar.crypto import Decryptor, Encryptor, generate_rsa_pem
    from formats.pulsar.encode import OutgoingMessage, encode_chunks, encode_entry, frame_entry
    from formats.pulsar.entry import Message, ParsedEntry, decode_entry, entry_messages, parse_entry
    from formats.pulsar.errors import (
        ChunkError,
        DecompressionError,
        DecryptionError,
        MalformedMessageError,
        MessageChecksumError,
        MessageEncodeError,
        MessageTruncatedError,
        NotPulsarMessagesError,
        PulsarMessageError,
        UnsupportedCompressionError,
    )
    from formats.pulsar.metadata import BrokerEntryMetadata, MessageMetadata

_LAZY = {
    "BrokerEntryMetadata": "formats.pulsar.metadata",
    "CODECS_BY_NAME": "formats.pulsar.compression",
    "CODEC_NAMES": "formats.pulsar.compression",
    "ChunkAssembler": "formats.pulsar.chunks",
    "ChunkError": "formats.pulsar.errors",
    "DecompressionError": "formats.pulsar.errors",
    "DecryptionError": "formats.pulsar.errors",
    "Decryptor": "formats.pulsar.crypto",
    "Encryptor": "formats.pulsar.crypto",
    "MalformedMessageError": "formats.pulsar.errors",
    "Message": "formats.pulsar.entry",
    "MessageChecksumError": "formats.pulsar.errors",
    "MessageEncodeError": "formats.pulsar.errors",
    "MessageMetadata": "formats.pulsar.metadata",
    "MessageTruncatedError": "formats.pulsar.errors",
    "NotPulsarMessagesError": "formats.pulsar.errors",
    "OutgoingMessage": "formats.pulsar.encode",
    "ParsedEntry": "formats.pulsar.entry",
    "PulsarMessageError": "formats.pulsar.errors",
    "UnsupportedCompressionError": "formats.pulsar.errors",
    "codec_number": "formats.pulsar.compression",
    "decode_entry": "formats.pulsar.entry",
    "encode_chunks": "formats.pulsar.encode",
    "encode_entry": "formats.pulsar.encode",
    "entry_messages": "formats.pulsar.entry",
    "frame_entry": "formats.pulsar.encode",
    "generate_rsa_pem": "formats.pulsar.crypto",
    "iter_messages": "formats.pulsar.chunks",
    "parse_entry": "formats.pulsar.entry",
}


def __getattr__(name: str) -> Any:
    """Load the submodule of ``name`` on first use (the codecs' libraries are heavy)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "CODECS_BY_NAME",
    "CODEC_NAMES",
    "BrokerEntryMetadata",
    "ChunkAssembler",
    "ChunkError",
    "DecompressionError",
    "DecryptionError",
    "Decryptor",
    "Encryptor",
    "MalformedMessageError",
    "Message",
    "MessageChecksumError",
    "MessageEncodeError",
    "MessageMetadata",
    "MessageTruncatedError",
    "NotPulsarMessagesError",
    "OutgoingMessage",
    "ParsedEntry",
    "PulsarMessageError",
    "UnsupportedCompressionError",
    "codec_number",
    "decode_entry",
    "encode_chunks",
    "encode_entry",
    "entry_messages",
    "frame_entry",
    "generate_rsa_pem",
    "iter_messages",
    "parse_entry",
]
