"""Transforming chunks: zstd compression and AES-256-GCM encryption of one block's chunks, and
the inverse for a run of stored chunks (spec/transforms.md §2).

* Compression (``zstandard``) is kept only when it saves at least :data:`MIN_SAVING` of a
  chunk's bytes; the writer can also say "do not try" for a chunk whose entries are already
  compressed. Decompression is bounded by the chunk's original length.
* Encryption (``cryptography``'s AESGCM) uses a fresh 256-bit data key per object; the 96-bit
  nonce is the chunk's position (block index u32, chunk index in the block u64), so it never
  repeats under one data key; the associated data binds the chunk to the object (uuid, ledger
  id), its position, its flags and its original length, so a chunk cannot be swapped, replayed
  or have its flags flipped without the tag failing.
* The data key is wrapped with the key-encryption key by AES key wrap (RFC 3394).

No cipher or codec is written here: only how they are applied.
"""

from __future__ import annotations

import struct
import uuid as uuid_mod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zstandard

if TYPE_CHECKING:  # cryptography is imported where a key is used (see _aesgcm)
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from formats.errors import (
    ChunkAuthenticationError,
    CorruptDataError,
    TruncatedError,
    WrongKeyError,
)
from formats.extension import crc32c
from formats.transform.section import (
    CHUNK_AES_GCM,
    CHUNK_ZSTD,
    ChunkMap,
    StoredChunk,
    chunks_in_block,
)

Buffer = bytes | bytearray | memoryview

DATA_KEY_LEN = 32
GCM_TAG_LEN = 16
#: compression is kept only when the compressed chunk is at most this fraction smaller
MIN_SAVING = 0.10
DEFAULT_ZSTD_LEVEL = 3
_NONCE = struct.Struct(">IQ")
_AAD = struct.Struct(">4s16sqIIBI")
#: the associated data's first 4 bytes: Pulsar data objects
AAD_MAGIC_PULSAR = b"LOTC"
#: ... and Kafka segments (uuid: the remote segment id, ledger_id: the base offset)
AAD_MAGIC_KAFKA = b"LOTK"


@dataclass(frozen=True)
class ObjectIdentity:
    """What a chunk's associated data binds it to: the offload attempt's uuid and the ledger
    (for a Kafka segment: its remote segment id as a UUID and its base offset, with the
    ``LOTK`` magic so that a chunk of one kind can never authenticate as the other)."""

    uuid: str
    ledger_id: int
    magic: bytes = AAD_MAGIC_PULSAR

    def uuid_bytes(self) -> bytes:
        try:
            return uuid_mod.UUID(self.uuid).bytes
        except ValueError:
            raise CorruptDataError(f"object uuid {self.uuid!r} is not a UUID") from None


def _aesgcm(key: bytes) -> AESGCM:
    """AES-GCM under ``key`` (``cryptography`` is imported here, on the first encrypted
    object: a plain upload or read never loads its OpenSSL binding)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def chunk_nonce(block: int, chunk: int) -> bytes:
    return _NONCE.pack(block, chunk)


def chunk_aad(identity: ObjectIdentity, block: int, chunk: int, flags: int, length: int) -> bytes:
    return _AAD.pack(
        identity.magic, identity.uuid_bytes(), identity.ledger_id, block, chunk, flags, length
    )


def wrap_data_key(kek: bytes, data_key: bytes) -> bytes:
    """AES-KW (RFC 3394) of a 32-byte data key under a 32-byte key-encryption key: 40 bytes."""
    if len(kek) != 32 or len(data_key) != DATA_KEY_LEN:
        raise CorruptDataError("key-encryption and data keys must be 32 bytes")
    from cryptography.hazmat.primitives.keywrap import aes_key_wrap

    return aes_key_wrap(kek, data_key)


def unwrap_data_key(kek: bytes, wrapped: bytes, key_id: str) -> bytes:
    """The data key, or :class:`WrongKeyError` naming ``key_id`` (never a key byte)."""
    if len(kek) != 32:
        raise WrongKeyError(f"key {key_id!r} is not a 256-bit key")
    from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap

    try:
        return aes_key_unwrap(kek, wrapped)
    except (InvalidUnwrap, ValueError):
        raise WrongKeyError(
            f"key {key_id!r} does not unwrap this object's data key (wrong key or tampered)"
        ) from None


#: a chunk longer than twice this is first probed: its first PROBE_LEN bytes are compressed,
#: and the whole chunk only when the probe saves at least half of MIN_SAVING
PROBE_LEN = 64 * 1024


def _worth_trying(zc: zstandard.ZstdCompressor, piece: memoryview) -> bool:
    """Cheap look at incompressible data (random, encrypted, already-compressed payloads the
    metadata does not announce): compressing a 64 KiB sample costs 1/16 of a 1 MiB chunk."""
    if len(piece) <= 2 * PROBE_LEN:
        return True
    probe = zc.compress(piece[:PROBE_LEN])
    return len(probe) <= PROBE_LEN * (1 - MIN_SAVING / 2)


class ChunkEncoder:
    """Turns blocks into stored chunks for one object. Safe to share between threads: every
    call builds its own compressor and cipher context."""

    def __init__(
        self,
        identity: ObjectIdentity,
        *,
        chunk_size: int,
        zstd_level: int | None,
        data_key: bytes | None,
    ) -> None:
        if data_key is not None and len(data_key) != DATA_KEY_LEN:
            raise CorruptDataError("a data key must be 32 bytes")
        self.identity = identity
        self.chunk_size = chunk_size
        self.zstd_level = zstd_level
        self.data_key = data_key

    def encode_block(
        self, block_index: int, block: Buffer, compress: Sequence[bool] | None = None
    ) -> tuple[bytes, list[StoredChunk]]:
        """The block's stored chunks, concatenated, and their table rows. ``compress[k]``
        False means "do not try to compress chunk k" (its entries are already compressed)."""
        chunks, rows = self.encode_block_chunks(block_index, block, compress)
        return b"".join(chunks), rows

    def encode_block_chunks(
        self, block_index: int, block: Buffer, compress: Sequence[bool] | None = None
    ) -> tuple[list[bytes], list[StoredChunk]]:
        """As :meth:`encode_block`, the stored chunks as a list (joined once, into a part)."""
        view = memoryview(block).cast("B")
        size = self.chunk_size
        count = chunks_in_block(len(view), size)
        zc = (
            zstandard.ZstdCompressor(level=self.zstd_level, write_checksum=False)
            if self.zstd_level is not None
            else None
        )
        aes = _aesgcm(self.data_key) if self.data_key is not None else None
        out: list[bytes] = []
        rows: list[StoredChunk] = []
        for k in range(count):
            piece = view[k * size : (k + 1) * size]
            flags = 0
            data: Buffer = piece
            if zc is not None and (compress is None or compress[k]) and _worth_trying(zc, piece):
                packed = zc.compress(piece)
                if len(packed) <= len(piece) * (1 - MIN_SAVING):
                    data, flags = packed, CHUNK_ZSTD
            if aes is not None:
                flags |= CHUNK_AES_GCM
                aad = chunk_aad(self.identity, block_index, k, flags, len(piece))
                # AESGCM takes the buffer as it is: a copy first (bytes(piece)) cost 4x the
                # cipher's own CPU (a fresh 1 MiB allocation faults in every page)
                data = aes.encrypt(chunk_nonce(block_index, k), data, aad)
            stored = bytes(data)
            out.append(stored)
            rows.append(StoredChunk(flags, len(stored), crc32c(stored)))
        return out, rows


class ChunkDecoder:
    """Turns stored chunks back into original bytes for one object (the map, its identity and
    its unwrapped data key)."""

    def __init__(
        self, chunk_map: ChunkMap, identity: ObjectIdentity, data_key: bytes | None
    ) -> None:
        section = chunk_map.section
        if section.encrypted and data_key is None:
            raise WrongKeyError(f"object is encrypted with key {section.key_id!r}; no key given")
        self.map = chunk_map
        self.identity = identity
        self._aes = _aesgcm(data_key) if section.encrypted and data_key is not None else None
        self._zd = zstandard.ZstdDecompressor()

    def decode_chunk(self, index: int, stored: Buffer) -> bytes:
        """Chunk ``index`` (global) from its stored bytes; typed errors for a short chunk, a
        tampered one (CRC32C or GCM tag) or one that does not decompress to its length."""
        row = self.map.section.chunks[index]
        block, k, length = self.map.positions[index]
        if len(stored) != row.stored_len:
            raise TruncatedError(
                f"chunk {index} (block {block}) has {len(stored)} bytes, {row.stored_len} stored"
            )
        if crc32c(stored) != row.crc32c:
            raise ChunkAuthenticationError(
                f"chunk {index} (block {block}, chunk {k}) does not match its CRC32C: tampered"
            )
        data: bytes = bytes(stored)
        if row.flags & CHUNK_AES_GCM:
            assert self._aes is not None
            aad = chunk_aad(self.identity, block, k, row.flags, length)
            from cryptography.exceptions import InvalidTag

            try:
                data = self._aes.decrypt(chunk_nonce(block, k), data, aad)
            except InvalidTag:
                raise ChunkAuthenticationError(
                    f"chunk {index} (block {block}, chunk {k}) fails AES-GCM authentication: "
                    "tampered, moved, or read under the wrong object identity"
                ) from None
        if row.flags & CHUNK_ZSTD:
            try:
                data = self._zd.decompress(data, max_output_size=length)
            except zstandard.ZstdError as exc:
                raise CorruptDataError(f"chunk {index} does not decompress: {exc}") from None
        if len(data) != length:
            raise CorruptDataError(f"chunk {index} decodes to {len(data)} bytes, not {length}")
        return data

    def decode_run(self, first: int, stored: Buffer) -> list[bytes]:
        """Chunks ``first, first+1, ...`` from their stored bytes laid end to end."""
        view = memoryview(stored).cast("B")
        rows = self.map.section.chunks
        out: list[bytes] = []
        pos, i = 0, first
        while pos < len(view):
            if i >= len(rows):
                raise CorruptDataError("stored bytes run past the object's last chunk")
            n = rows[i].stored_len
            if pos + n > len(view):
                raise TruncatedError(f"stored chunks end inside chunk {i}")
            out.append(self.decode_chunk(i, view[pos : pos + n]))
            pos, i = pos + n, i + 1
        return out

    def read(self, start: int, end: int, stored: Buffer, first: int) -> bytes:
        """Original bytes ``[start, end)`` from the stored chunks starting at chunk ``first``."""
        plain = b"".join(self.decode_run(first, stored))
        origin = self.map.original_starts[first]
        return plain[start - origin : end - origin]
