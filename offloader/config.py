"""Validated, frozen settings for offloading and reading.

Defaults are Pulsar's (``ServiceConfiguration`` and the offloader's driver settings). Memory:
an offload holds at most ``offload_concurrency`` block buffers (uploading, or being filled while
the others upload), so peak buffer memory is ``offload_concurrency * max_block_size`` (plus
about 70 MB of interpreter and client). On GCS and Azure a data object of at most
``one_request_upload_max`` bytes is framed whole and sent in one request: up to that much.
A ReadHandle reads a short window with one ranged GET; with ``read_ahead``, a long one (a bulk
read) is one streamed GET read ``read_buffer_size`` bytes at a time, at most 8 chunks ahead of
the caller; without it, ranged GETs of ``read_buffer_size`` bytes grow to 8 buffers on a
sequential streak. An open handle holds about ``10 * read_buffer_size`` bytes (10 MiB with the
1 MiB default).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from formats.layout import max_entry_size
from formats.wire import S3_MIN_PART_SIZE
from offloader.errors import ConfigError, ConfigSetting

MiB = 1024 * 1024
DEFAULT_MAX_BLOCK_SIZE = 64 * MiB
DEFAULT_READ_BUFFER_SIZE = 1 * MiB


def check_s3_part_size(size: int, what: str, setting: ConfigSetting) -> None:
    """The one check of S3's minimum part size (every part of a multipart upload but the last:
    :data:`formats.wire.S3_MIN_PART_SIZE`, 5 MiB): a ConfigError naming ``setting``, which a
    front end turns into the source of the value (an option, a key of offloader.toml)."""
    if size < S3_MIN_PART_SIZE:
        raise ConfigError(
            f"{what} {size} is below S3's minimum part size {S3_MIN_PART_SIZE} (5M)",
            setting=setting,
        )


@dataclass(frozen=True)
class OffloadSettings:
    """What the writer, the ReadHandle and the S3 client need to know."""

    max_block_size: int = DEFAULT_MAX_BLOCK_SIZE
    read_buffer_size: int = DEFAULT_READ_BUFFER_SIZE
    offload_concurrency: int = 4
    read_ahead: bool = True
    write_index_extension: bool = True
    #: with the extension: a CRC32C per fine-offset span (a tagged section), so that reads
    #: check every span before they return its entries (spec/index-format.md §4.2)
    write_span_crc32c: bool = True
    #: maximum bytes of ledger entries fetched from a LedgerReader in one read() call
    ledger_read_batch_entries: int = 100
    #: S3 client: seconds to connect / to wait for a response, and attempts per call
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_attempts: int = 5
    #: offsets-cache bound (entries) of a ReadHandle
    offsets_cache_size: int = 100_000
    #: enforce S3's 5 MiB minimum part size (off only for tests against local stores)
    enforce_min_block_size: bool = True
    software_version: str = "ledger-offloader-0.1.0"
    #: transforms (spec/transforms.md): the key ring file (None: $OFFLOADER_KEY_RING, else
    #: ./.offloader/keys), original bytes per chunk, and the decrypted-chunk cache (0 = off)
    key_ring: str | None = None
    transform_chunk_size: int = 1 * MiB
    chunk_cache_bytes: int = 0
    #: GCS and Azure: a plain data object of at most this many bytes is sent in one request
    #: (framed whole in memory, then one PUT) in place of their multipart emulation; 0 = never
    one_request_upload_max: int = 64 * MiB

    def __post_init__(self) -> None:
        if self.enforce_min_block_size:
            check_s3_part_size(self.max_block_size, "max block size", "max_block_size")
        if self.max_block_size < 256:
            raise ConfigError(f"max block size {self.max_block_size} is too small")
        if self.read_buffer_size < 1024:
            raise ConfigError(f"read buffer size {self.read_buffer_size} is below 1024 bytes")
        if not 1 <= self.offload_concurrency <= 64:
            raise ConfigError(f"offload concurrency {self.offload_concurrency} not in 1..64")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ConfigError("timeouts must be positive")
        if not 64 * 1024 <= self.transform_chunk_size <= 64 * MiB:
            raise ConfigError(
                f"transform chunk size {self.transform_chunk_size} is not in 64K..64M"
            )
        if self.chunk_cache_bytes < 0:
            raise ConfigError("chunk cache size must not be negative")
        if not 0 <= self.one_request_upload_max <= 256 * MiB:
            raise ConfigError(
                f"one_request_upload_max {self.one_request_upload_max} is not in 0..256M"
            )
        if self.ledger_read_batch_entries < 1:
            raise ConfigError("ledger_read_batch_entries must be at least 1")

    @property
    def max_entry_size(self) -> int:
        """The largest entry a block of ``max_block_size`` bytes holds (an offload refuses a
        larger one)."""
        return max_entry_size(self.max_block_size)

    def replace(self, **changes: object) -> OffloadSettings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
