"""A topic's effective configuration: its overrides, over the broker defaults, over
:data:`~offloader.kafka_cluster.base.KAFKA_DEFAULTS` (pure; both backends build it here).

Broker defaults (ZooKeeper's ``/config/brokers/<default>``, KRaft's ``ConfigRecord`` on the
default broker resource) name a topic config by its broker synonym, as Kafka's ``LogConfig``
does: ``log.retention.ms`` (or ``log.retention.minutes``, ``log.retention.hours``) for
``retention.ms``, ``log.retention.bytes``, ``log.cleanup.policy``, ``log.local.retention.ms``
and ``log.local.retention.bytes``. A default given under the topic config's own name counts too
(the synonym wins when both are set). Configs with no broker synonym (``remote.storage.enable``,
``remote.log.copy.disable``) come from the topic or Kafka's default only.
"""

from __future__ import annotations

from collections.abc import Mapping

from offloader.kafka_cluster.base import KAFKA_DEFAULTS, TopicConfig

#: topic config -> its broker synonyms, highest priority first, with a factor to milliseconds
BROKER_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "retention.bytes": (("log.retention.bytes", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}

#: broker config name -> the topic config it is the default of
TOPIC_OF_SYNONYM: Mapping[str, str] = {
    name: topic for topic, names in BROKER_SYNONYMS.items() for name, _f in names
}


def broker_defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """The topic configs that ``broker`` (a default broker resource's configs) sets."""
    out: dict[str, str] = {
        key: value for key, value in broker.items() if key not in TOPIC_OF_SYNONYM
    }
    for topic_key, names in BROKER_SYNONYMS.items():
        for name, factor in names:
            raw = broker.get(name)
            if raw is None:
                continue
            if factor == 1:
                out[topic_key] = raw
            else:
                try:
                    out[topic_key] = str(int(raw.strip()) * factor)
                except ValueError:
                    continue
            break
    return out


def effective_config(broker: Mapping[str, str], overrides: Mapping[str, str]) -> TopicConfig:
    """The topic's overrides over ``broker``'s defaults over Kafka's."""
    values = dict(KAFKA_DEFAULTS)
    values.update(broker_defaults(broker))
    values.update(overrides)
    return TopicConfig(values=values, overrides=frozenset(overrides))
