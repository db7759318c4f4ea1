"""The ``[transform]`` table of ``offloader.toml`` (spec/transforms.md)::

[transform]
chunk_size = "1M"          # original bytes per chunk of a transformed object (64K..64M)
chunk_cache_size = "0"     # cache of decoded chunks for reads, per process (0 = off)

[transform.namespaces."public/default"]   # for namespaces with no transform set by
compression = "zstd"                       # `namespaces set-offload-transform`
level = 3
encryption = "aes-256-gcm"
key_id = "k1"              # default: the key ring's active key

[transform.kafka_topics."orders"]          # Kafka topics with no transform set by
compression = "zstd"                       # `kafka set-offload-transform`
encryption = "aes-256-gcm"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from cli.config_keys import refuse_unknown_keys
from formats.kafka.errors import KafkaFormatError
from formats.kafka.names import check_topic
from offloader.api import BrokerSettings, TransformPolicy
from offloader.errors import ConfigError
from offloader.naming import NamespaceName
from offloader.units import parse_size

_KEYS = {"chunk_size", "chunk_cache_size", "namespaces", "kafka_topics"}
_POLICY_KEYS = {"compression", "level", "encryption", "key_id"}


def apply_transform_table(table: Any, broker: BrokerSettings) -> BrokerSettings:
    """``broker`` with the ``[transform]`` table applied (ConfigError naming the key)."""
    if not isinstance(table, dict):
        raise ConfigError("[transform] must be a table")
    refuse_unknown_keys(table, _KEYS, "unknown [transform] key(s)")
    changes: dict[str, int] = {}
    for key, field_name in (
        ("chunk_size", "transform_chunk_size"),
        ("chunk_cache_size", "chunk_cache_bytes"),
    ):
        if key in table:
            try:
                changes[field_name] = parse_size(table[key])
            except ConfigError as exc:
                raise ConfigError(f"[transform] {key}: {exc}") from None
    offload = broker.offload.replace(**changes) if changes else broker.offload
    policies = _policies(table, "namespaces", lambda name: str(NamespaceName.parse(name)))
    topics = _policies(table, "kafka_topics", _kafka_topic)
    return dataclasses.replace(
        broker,
        offload=offload,
        namespace_transforms=tuple(policies),
        kafka_topic_transforms=tuple(topics),
    )


def _kafka_topic(name: str) -> str:
    try:
        return check_topic(name)
    except KafkaFormatError as exc:
        raise ConfigError(str(exc)) from None


def _policies(
    table: dict[str, Any], key: str, check: Callable[[str], str]
) -> list[tuple[str, TransformPolicy]]:
    """The policies of ``[transform.<key>]`` (namespaces or Kafka topics), names checked."""
    entries = table.get(key, {})
    if not isinstance(entries, dict):
        raise ConfigError(f"[transform.{key}] must be a table")
    policies = []
    for name, entry in entries.items():
        where = f"[transform.{key}.{name!r}]"
        if not isinstance(entry, dict) or set(entry) - _POLICY_KEYS:
            raise ConfigError(f"{where} takes only {', '.join(sorted(_POLICY_KEYS))}")
        try:
            policy = TransformPolicy(
                entry.get("compression", "none"),
                entry.get("level"),
                entry.get("encryption", "none"),
                entry.get("key_id"),
            )
            policies.append((check(name), policy))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return policies
