"""The parts of the facade :class:`offloader.api.Offloader` is made of (it is the public
surface; import from :mod:`offloader.api`): :class:`FacadeBase` (the runtime, closing, the
Kafka tier, managed ledgers by name), :class:`AdminFacade` (policies, transforms, key rotation,
verification, orphans and gc), :class:`ServiceFacade` (the cluster view and the service pass),
:class:`ExportFacade` (Parquet and Iceberg exports, and the service loop that runs them) and
:func:`build_runtime` (everything opened from settings)."""

from offloader.facade.admin import AdminFacade
from offloader.facade.base import FacadeBase
from offloader.facade.build import build_runtime
from offloader.facade.export import ExportFacade
from offloader.facade.service import ServiceFacade

__all__ = ["AdminFacade", "ExportFacade", "FacadeBase", "ServiceFacade", "build_runtime"]
