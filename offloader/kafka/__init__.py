"""The Kafka tier: closed Kafka log segments to the object store, fetched back by offset.

:mod:`~offloader.kafka.logdir` reads a broker's log directory (read-only), :mod:`~offloader.kafka.
upload` copies closed segments through KIP-405's states, :mod:`~offloader.kafka.remote` deletes
remote segments (failed attempts, retention), :mod:`~offloader.kafka.fetch` reads records back
by offset or time, :mod:`~offloader.kafka.status` reports per partition, and
:mod:`~offloader.kafka.tier` is the facade :class:`offloader.api.Offloader` hands out. The byte
formats are in :mod:`formats.kafka`; the metadata behind
:class:`~offloader.metadata.kafka_base.KafkaMetadataStore`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offloader.kafka.settings import KafkaSettings
    from offloader.kafka.tier import KafkaTier

__all__ = ["KafkaSettings", "KafkaTier"]

_WHERE = {"KafkaSettings": "settings", "KafkaTier": "tier"}


def __getattr__(name: str) -> Any:
    """Load ``name`` from its module on first use (importing a part loads no other)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'offloader.kafka' has no attribute {name!r}")
    return getattr(importlib.import_module(f"offloader.kafka.{module}"), name)
