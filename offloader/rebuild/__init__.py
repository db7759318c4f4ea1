"""``offloader metadata rebuild``: the metadata store's records recreated from the object
store's listing (spec/bucket-manifests.md): one :class:`Rebuilder` per kind of record."""

from offloader.rebuild.base import Rebuilder, RebuildItem, RebuildReport, StoreListing
from offloader.rebuild.kafka_segments import KafkaSegments
from offloader.rebuild.ledgers import PulsarLedgers
from offloader.rebuild.run import default_rebuilders, list_store, rebuild, topic_selector

__all__ = [
    "KafkaSegments",
    "PulsarLedgers",
    "RebuildItem",
    "RebuildReport",
    "Rebuilder",
    "StoreListing",
    "default_rebuilders",
    "list_store",
    "rebuild",
    "topic_selector",
]
