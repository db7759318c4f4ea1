"""The Kafka tier's one key scheme: persisted by the first upload, used by every uploader.

``kafka upload`` (with or without ``--prefix``/``--hash-prefix``/``--cluster``/
``--entropy-bits``), ``service run --kafka-log-dir`` and any other uploader of the same metadata
store name their objects alike: :func:`resolve_key_scheme` returns the scheme the store holds,
persisting the settings' (defaults for what they leave unset) when it holds none yet, and
refuses settings that ask for another one (a ConfigError naming the persisted scheme). The
forms themselves are :class:`formats.kafka.names.KafkaKeyScheme`'s (spec/kafka-segments.md).
"""

from __future__ import annotations

from formats.kafka.errors import KafkaNameError
from formats.kafka.names import KafkaKeyScheme
from offloader.errors import ConfigError
from offloader.kafka.context import KafkaContext

#: the CLI option of each scheme field, for messages
_OPTIONS = {
    "prefix": "--prefix",
    "hash_prefix_len": "--hash-prefix",
    "cluster": "--cluster",
    "entropy_bits": "--entropy-bits",
}


def requested(ctx: KafkaContext) -> dict[str, object]:
    """The scheme fields the settings set (the others are left to the tier)."""
    s = ctx.settings
    given: dict[str, object] = {
        "prefix": None if s.prefix is None else s.prefix.strip("/"),
        "hash_prefix_len": s.hash_prefix_len,
        "cluster": s.cluster,
        "entropy_bits": s.entropy_bits,
    }
    return {name: value for name, value in given.items() if value is not None}


def resolve_key_scheme(ctx: KafkaContext) -> KafkaKeyScheme:
    """The tier's key scheme (see the module docstring)."""
    asked = requested(ctx)
    stored = ctx.meta.get_key_scheme()
    if stored is None:
        try:
            wanted = KafkaKeyScheme(**asked)  # type: ignore[arg-type]
        except KafkaNameError as exc:
            raise ConfigError(f"Kafka key scheme: {exc}") from exc
        stored = ctx.meta.claim_key_scheme(wanted)  # a concurrent first upload may win
    conflicts = [
        f"{_OPTIONS[name]} {value}"
        for name, value in asked.items()
        if getattr(stored, name) != value
    ]
    if conflicts:
        raise ConfigError(
            f"this Kafka tier names its objects with {stored.describe()} (persisted by its first "
            f"upload, used by every uploader of the store): {', '.join(conflicts)} asks for "
            "another scheme; leave the option out or give the persisted value"
        )
    return stored
