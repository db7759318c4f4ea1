"""The PostgreSQL backend of the metadata store: what differs from SQLite only.

:mod:`~offloader.metadata.postgres.db` (connection, transactions, advisory locks, error
translation, migrations), :mod:`~offloader.metadata.postgres.schema` (the PostgreSQL DDL),
:mod:`~offloader.metadata.postgres.cluster` (brokers, topic ownership, leases: shared stores
only) and the stores over them (:mod:`~offloader.metadata.postgres.store`,
:mod:`~offloader.metadata.postgres.export`, :mod:`~offloader.metadata.postgres.kafka`), whose
methods are the shared ones of :mod:`offloader.metadata`.
"""

from __future__ import annotations

#: import the modules themselves; the stores are opened through :mod:`offloader.metadata`
__all__: list[str] = []
