"""One ledger's offload job, and the Protocol of the ways its data object is uploaded.

:class:`OffloadJob` is one attempt at offloading one closed ledger under one UUID: its reader,
store, keys and settings, the entry lengths and the block plan, and what the attempt has
created so far (the multipart upload, whether the data object was completed, whether the index
PUT was attempted or refused), so that :meth:`OffloadJob.clean_up` removes exactly that. The
steps shared by every upload are its methods: starting the multipart upload, completing it once
every entry planned was read, the per-block zone maps, and the index PUT
(:meth:`OffloadJob.put_index`, with the extension built from what the upload reports).

How the data object's bytes are produced and sent is an :class:`UploadStrategy`: the plain
Pulsar object (:class:`offloader.offload.writer.PlainUpload`) or the chunked, compressed and/or
encrypted one (:class:`offloader.offload.transformed.TransformedUpload`). Both take the job and
return :class:`UploadedData`; neither module imports the other, and this one imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from formats.block import iter_block_entries
from formats.encode import metadata_for_entries
from formats.extension import IndexExtension, fine_offsets_for
from formats.index import encode_index, index_from_plans
from formats.keys import (
    FORMAT_VERSION_KEY,
    ROLE_INDEX,
    data_key,
    index_key,
    object_user_metadata,
)
from formats.layout import BlockPlan
from formats.pulsar.zone_maps import BlockZone, zone_maps_section, zone_of_entries
from formats.span_crc import encode_span_crcs
from formats.transform import CHUNKED_FORMAT_VERSION, TransformSection, transform_extension_section
from offloader.config import OffloadSettings
from offloader.crashpoints import crash_point
from offloader.errors import IndexInconsistentError, PreconditionFailed
from offloader.ledgers.base import LedgerReader
from offloader.logs import get_logger
from offloader.offload.entry_batches import LedgerEntries
from offloader.store.base import ObjectStore, UploadedPart

__all__ = ["OffloadJob", "ProgressCallback", "UploadStrategy", "UploadedData"]

#: the writer's logger: a failed offload's clean-up is logged beside its "offload failed"
log = get_logger("offloader.offload.writer")

#: ``progress(bytes_done, bytes_total)`` of the data object, called on the caller's thread
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class UploadedData:
    """What an upload strategy wrote: the blocks' CRC32Cs (of their original bytes, in block
    order), the entries it read, the data object's stored size, the span CRC32Cs of a plain
    object (in object order; empty when none were computed) and the transform section of a
    transformed one (None: a plain object)."""

    block_crc32c: list[int]
    entries: LedgerEntries
    stored_size: int
    span_crc32c: list[int]
    section: TransformSection | None = None


class UploadStrategy(Protocol):
    """A way of writing a job's data object: read its entries (``job.start_upload``), frame
    its blocks as planned, record their zone maps (``job.record_zone``), upload and complete
    (``job.complete_upload``). Everything it creates is recorded on the job, so that the job's
    ``clean_up`` removes it on failure."""

    def upload(self, job: OffloadJob, managed_ledger_name: str | None) -> UploadedData: ...


class OffloadJob:
    """One attempt at offloading one ledger; records what exists so that :meth:`clean_up`
    knows what to remove."""

    def __init__(
        self,
        reader: LedgerReader,
        store: ObjectStore,
        uuid: str,
        settings: OffloadSettings,
        lengths: Sequence[int],
        plans: Sequence[BlockPlan],
        progress: ProgressCallback | None,
    ) -> None:
        self.reader = reader
        self.store = store
        self.uuid = uuid
        self.dkey = data_key(uuid, reader.ledger_id)
        self.ikey = index_key(uuid, reader.ledger_id)
        self.settings = settings
        self.lengths = lengths
        self.plans = plans
        self.progress = progress
        self.upload_id: str | None = None
        self.completed = False
        self.complete_attempted = False
        self.index_attempted = False
        self.index_refused = False
        #: the strategy's thread pool while it runs (drained by :meth:`clean_up`)
        self.pool: ThreadPoolExecutor | None = None
        #: the index object (for which data, its body, its metadata), built ahead of its PUT
        self.prepared_index: tuple[UploadedData, bytes, dict[str, str]] | None = None
        #: per-block zone maps while the entries look like Pulsar messages (None: not written)
        self.zones: list[BlockZone | None] | None = [] if settings.write_index_extension else None

    @property
    def total(self) -> int:
        """The data object's original size: the end of its last block."""
        return self.plans[-1].offset + self.plans[-1].size

    def start_upload(self, metadata: dict[str, str]) -> tuple[str, LedgerEntries]:
        """Create the data object's multipart upload with ``metadata``; its upload id and the
        reader of the ledger's entries in the planned batches."""
        self.upload_id = self.store.create_multipart_upload(self.dkey, metadata)
        crash_point("writer.after_create_upload")
        entries = LedgerEntries(self.reader, self.lengths, self.settings.ledger_read_batch_entries)
        return self.upload_id, entries

    def read_entries(self) -> LedgerEntries:
        """The reader of the ledger's entries in the planned batches, with no multipart upload
        (a strategy that sends the data object in one request: :meth:`put_data`)."""
        return LedgerEntries(self.reader, self.lengths, self.settings.ledger_read_batch_entries)

    def put_data(
        self,
        entries: LedgerEntries,
        blocks: Sequence[memoryview],
        metadata: dict[str, str],
        *,
        checked_by_body: bool = False,
    ) -> None:
        """The whole data object, its blocks in order, in one PUT (atomic: a crash before its
        answer leaves no object, or the whole one), once every planned entry was read. A
        store with ``put_parts`` sends the blocks as they are; else they are joined.
        ``checked_by_body``: ``blocks`` are still being framed, and the framing checks that
        every planned entry was read before it hands over the last block (so the request's
        body can never be complete, and the object can never exist, without that check)."""
        if not checked_by_body:
            self.check_all_read(entries)
        self.complete_attempted = True  # from here on the object may exist
        crash_point("writer.before_complete_upload")
        put_parts = getattr(self.store, "put_parts", None)
        if callable(put_parts):
            put_parts(self.dkey, blocks, metadata)
        else:
            self.store.put(self.dkey, b"".join(blocks), metadata)
        crash_point("writer.after_complete_upload")
        self.completed = True

    def check_all_read(self, entries: LedgerEntries) -> None:
        """Every planned entry was read (else the ledger changed under us)."""
        if entries.next_id != len(self.lengths):
            raise IndexInconsistentError(
                f"ledger {self.reader.ledger_id}: {entries.next_id} entries read, "
                f"{len(self.lengths)} planned"
            )

    def complete_upload(
        self, upload_id: str, entries: LedgerEntries, parts: list[UploadedPart]
    ) -> None:
        """Once every part is uploaded: drain the pool, check that every planned entry was
        read (else the ledger changed under us), complete the multipart upload."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        self.check_all_read(entries)
        parts.sort(key=lambda p: p.part_number)
        self.complete_attempted = True  # from here on the object may exist
        crash_point("writer.before_complete_upload")
        self.store.complete_multipart_upload(self.dkey, upload_id, parts)
        crash_point("writer.after_complete_upload")
        self.completed = True

    def record_zone(self, block: memoryview, plan: BlockPlan) -> None:
        """The block's zone map (min/max publish and event time of its Pulsar messages); the
        ledger gets none when its first block's entries are not Pulsar message entries."""
        if self.zones is None:
            return
        entries = iter_block_entries(block, expected_first_entry_id=plan.first_entry_id)
        zone = zone_of_entries(e.payload for e in entries)
        if zone is None and not self.zones:
            self.zones = None
            return
        self.zones.append(zone)

    def put_index(self, data: UploadedData, managed_ledger_name: str | None) -> int:
        """PUT the index object (``if_none_match``) for the data object ``data`` describes
        (the one :meth:`prepare_index` built, when it was built while the data was sent); its
        size. Only ever after the data object exists: a reader never sees an index without
        its data."""
        prepared = self.prepared_index
        if prepared is None or prepared[0] is not data:
            prepared = (data, *self.index_object(data, managed_ledger_name))
        _, body, metadata = prepared
        self.index_attempted = True
        try:
            self.store.put(self.ikey, body, metadata, if_none_match=True)
            crash_point("writer.after_index_put")
        except PreconditionFailed:
            self.index_refused = True  # someone else's object: never delete it
            raise
        return len(body)

    def prepare_index(self, data: UploadedData, managed_ledger_name: str | None) -> None:
        """Build the index object of ``data`` now (while the data object is still being
        sent or stored), for :meth:`put_index` to PUT once the data object exists."""
        self.prepared_index = (data, *self.index_object(data, managed_ledger_name))

    def index_object(
        self, data: UploadedData, managed_ledger_name: str | None
    ) -> tuple[bytes, dict[str, str]]:
        """The index object's body and user metadata for the data object ``data`` describes."""
        settings = self.settings
        transform = data.section
        extension = None
        with_extension = settings.write_index_extension or transform is not None
        if with_extension:
            extension = IndexExtension(
                tuple(data.block_crc32c), tuple(fine_offsets_for(self.plans, self.lengths))
            )
            if self.zones is not None and len(self.zones) == len(self.plans):
                extension = extension.with_section(zone_maps_section(self.zones))
            # a transformed object's chunks carry their own CRC32Cs (and GCM tags), checked
            # before any of their bytes are used: span CRC32Cs are for plain objects
            if settings.write_span_crc32c and transform is None:
                extension = extension.with_section(encode_span_crcs(data.span_crc32c))
            if transform is not None:
                extension = extension.with_section(transform_extension_section(transform))
        index = index_from_plans(
            metadata_for_entries(self.reader.metadata, self.lengths), self.plans, extension
        )
        body = encode_index(index, with_extension=with_extension)
        metadata = object_user_metadata(
            ROLE_INDEX,
            managed_ledger_name=managed_ledger_name,
            software_version=settings.software_version,
        )
        if transform is not None:
            metadata[FORMAT_VERSION_KEY] = CHUNKED_FORMAT_VERSION
        return body, metadata

    def clean_up(self) -> None:
        """Remove everything this attempt created; log (never raise) failures."""
        if self.pool is not None:
            try:
                self.pool.shutdown(wait=True, cancel_futures=True)
            except BaseException as exc:  # pragma: no cover - interrupted while draining
                log.error(
                    "offload cleanup: upload threads not drained",
                    key=self.dkey,
                    error=type(exc).__name__,
                )
            self.pool = None
        store = self.store
        if self.upload_id is not None and not self.completed:
            try:
                store.abort_multipart_upload(self.dkey, self.upload_id)
            except BaseException as exc:
                log.error(
                    "offload cleanup: abort of the multipart upload failed; an "
                    "incomplete upload may remain",
                    key=self.dkey,
                    upload_id=self.upload_id,
                    error=f"{type(exc).__name__}: {exc}",
                )
        if self.complete_attempted:  # a lost answer to complete may have created it
            self._delete(self.dkey)
        if self.index_attempted and not self.index_refused:
            self._delete(self.ikey)

    def _delete(self, key: str) -> None:
        try:
            self.store.delete(key)
        except BaseException as exc:
            log.error(
                "offload cleanup: delete failed; the object may remain",
                key=key,
                error=f"{type(exc).__name__}: {exc}",
            )
