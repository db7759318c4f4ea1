"""The SQLite backend of the metadata store: what differs from PostgreSQL only.

:mod:`~offloader.metadata.sqlite.db` (the file, pragmas, ``BEGIN IMMEDIATE`` transactions,
error translation, the SQLite migrations) and the stores over it
(:mod:`~offloader.metadata.sqlite.store`, :mod:`~offloader.metadata.sqlite.export`,
:mod:`~offloader.metadata.sqlite.kafka`), whose methods are the shared ones of
:mod:`offloader.metadata`. With :mod:`offloader.metadata.postgres` the only code that talks to
a database driver.
"""

from __future__ import annotations

#: import the modules themselves; the stores are opened through :mod:`offloader.metadata`
__all__: list[str] = []
