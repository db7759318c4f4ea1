"""The ``[transform]`` table of ``offloader.toml`` (spec/transforms.md)::

[transform]
chunk_size = "1M"          # original bytes per chunk of a transformed object (64K..64M)
chunk_cache_size = "0"     # cache of decoded chunks for reads, per process (0 = off)

[transform.namespaces."public/default"]   # for namespaces with no transform set by
compression = "zstd"                       # `namespaces set-offload-transform`
level = 3
encryption = "aes-256-gcm"
key_id = "k1"              # default: the key ring's active key
"""

from __future__ import annotations

import dataclasses
from typing import Any

from offloader.api import BrokerSettings, TransformPolicy
from offloader.errors import ConfigError
from offloader.naming import NamespaceName
from offloader.units import parse_size

_KEYS = {"chunk_size", "chunk_cache_size", "namespaces"}
_POLICY_KEYS = {"compression", "level", "encryption", "key_id"}


def apply_transform_table(table: Any, broker: BrokerSettings) -> BrokerSettings:
    """``broker`` with the ``[transform]`` table applied (ConfigError naming the key)."""
    if not isinstance(table, dict):
        raise ConfigError("[transform] must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"unknown [transform] key(s) {', '.join(unknown)}")
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
    policies = []
    namespaces = table.get("namespaces", {})
    if not isinstance(namespaces, dict):
        raise ConfigError("[transform.namespaces] must be a table of namespaces")
    for name, entry in namespaces.items():
        where = f"[transform.namespaces.{name!r}]"
        if not isinstance(entry, dict) or set(entry) - _POLICY_KEYS:
            raise ConfigError(f"{where} takes only {', '.join(sorted(_POLICY_KEYS))}")
        try:
            policy = TransformPolicy(
                entry.get("compression", "none"),
                entry.get("level"),
                entry.get("encryption", "none"),
                entry.get("key_id"),
            )
            policies.append((str(NamespaceName.parse(name)), policy))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return dataclasses.replace(broker, offload=offload, namespace_transforms=tuple(policies))
