"""The FileIO pyiceberg uses for an export's table: pyarrow's, with whole-object S3 writes.

pyiceberg writes a table's metadata files (the metadata JSON, manifest lists and manifests)
through its FileIO. pyarrow's S3 writer, with the SDK's default flexible checksums, sends them
as multipart uploads with ``aws-chunked`` bodies, which Ceph RGW 16 refuses (411
MissingContentLength; spec/export.md, "S3 writes"), and a writer closed after an error would
complete a partial file under its final name. :class:`StoreFileIO` reads
through pyarrow as usual, and writes an ``s3://``, ``gs://`` or ``az://`` file by buffering it
and putting it whole in one PUT through :mod:`offloader.store` (our S3 client: the store's
endpoint and region, credentials from the ``AWS_*`` environment; our GCS and Azure stores:
each cloud's own environment), so a metadata file is there complete or not at all. It reads
``gs://`` and ``az://`` files through the same pyarrow GCS and Azure filesystems as the export's
Parquet targets (:func:`offloader.export.target.open_filesystem`, configured from
``STORAGE_EMULATOR_HOST`` / ``AZURE_STORAGE_CONNECTION_STRING``), where pyiceberg's own would
need the credentials in the catalog's properties. Local files are pyarrow's. pyiceberg loads
this class by name (``py-io-impl``).
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from pyarrow.fs import FileSystem
from pyiceberg.io import InputFile, OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO

from offloader.store.base import ObjectStore

__all__ = ["ENDPOINT", "REGION", "StoreFileIO"]

ENDPOINT = "s3.endpoint"
REGION = "s3.region"
#: the schemes whose writes are whole PUTs through our stores
_PUT_SCHEMES = ("s3", "s3a", "gs", "az")
#: the schemes read through the export targets' filesystems (environment-configured)
_CLOUD_SCHEMES = ("gs", "az")


class _PutStream(io.BytesIO):
    """Buffers a file; puts it whole on a clean close (an exception drops it)."""

    def __init__(self, store: ObjectStore, key: str) -> None:
        super().__init__()
        self._store = store
        self._key = key

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            super().close()
            self._store.put(self._key, data, {})

    def __exit__(self, kind: Any, exc: Any, tb: TracebackType | None) -> None:
        if kind is not None:
            super().close()  # nothing is put
            return
        self.close()


class _WholePutFile(OutputFile):
    def __init__(self, location: str, reader: InputFile, store: ObjectStore, key: str) -> None:
        super().__init__(location)
        self._reader = reader
        self._store = store
        self._key = key

    def __len__(self) -> int:
        return len(self._reader)

    def exists(self) -> bool:
        return self._reader.exists()

    def to_input_file(self) -> InputFile:
        return self._reader

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return _PutStream(self._store, self._key)  # type: ignore[return-value]


class StoreFileIO(PyArrowFileIO):
    """pyarrow's FileIO; ``s3://`` writes are whole PUTs through :mod:`offloader.store`."""

    def __init__(self, properties: Any = None) -> None:
        super().__init__(properties or {})
        self._stores: dict[str, ObjectStore] = {}

    def _store(self, scheme: str, bucket: str) -> ObjectStore:
        url = f"{'s3' if scheme == 's3a' else scheme}://{bucket}"
        store = self._stores.get(url)
        if store is None:
            from offloader.store import open_store

            if scheme in _CLOUD_SCHEMES:
                store = open_store(url)
            else:
                store = open_store(
                    url,
                    endpoint_url=self.properties.get(ENDPOINT) or None,
                    region=self.properties.get(REGION) or None,
                )
            self._stores[url] = store
        return store

    def _initialize_fs(self, scheme: str, netloc: str | None = None) -> FileSystem:
        if scheme not in _CLOUD_SCHEMES:
            return super()._initialize_fs(scheme, netloc)
        from offloader.export.target import TargetSpec, open_filesystem

        return open_filesystem(TargetSpec(f"{scheme}://{netloc}"))

    def new_output(self, location: str) -> OutputFile:  # type: ignore[override]
        parts = urlsplit(location)
        if parts.scheme not in _PUT_SCHEMES:
            return super().new_output(location)
        key = parts.path.lstrip("/")
        store = self._store(parts.scheme, parts.netloc)
        return _WholePutFile(location, self.new_input(location), store, key)

    def close(self) -> None:
        stores, self._stores = self._stores, {}
        for store in stores.values():
            store.close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_stores"] = {}
        return state
