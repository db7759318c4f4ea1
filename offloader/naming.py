"""Pulsar names: tenants, namespaces and persistent topics, parsed and validated on entry.

This module owns the rules for what a name may contain and the canonical spellings Pulsar uses:

* tenant and namespace names match Pulsar's ``NamedEntity`` pattern ``[-=:.\\w]+`` (ASCII ``\\w``,
  as in Java), and we also refuse ``.`` and ``..`` (which the pattern allows but no path or REST
  URL survives);
* a topic is ``persistent://tenant/namespace/local-name``; the short forms ``tenant/ns/topic``
  and a bare ``topic`` (meaning ``persistent://public/default/topic``) are accepted, as
  ``pulsar-admin`` does. Only the ``persistent`` domain has ledgers, so ``non-persistent://`` is
  refused, and so are legacy (V1) names with a cluster component;
* Pulsar allows almost anything in a topic's local name; we refuse what could break a
  filesystem path or a tool: NUL and other control characters, ``/``, ``\\``, a leading ``.``
  (which covers ``.`` and ``..``), text that is not encodable as UTF-8, and more than 255 UTF-8
  bytes.

The managed-ledger name is Pulsar's ``getPersistenceNamingEncoding()``:
``tenant/namespace/persistent/<local name URL-encoded as Java's URLEncoder does>``.
Every violation raises :class:`~offloader.errors.InvalidName` saying which rule failed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote_plus

from formats.errors import quoted_name
from offloader.errors import InvalidName

PERSISTENT = "persistent"
NON_PERSISTENT = "non-persistent"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
MAX_NAME_BYTES = 255

_NAMED_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)
_JAVA_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")

__all__ = ["NamespaceName", "TopicName", "java_url_encode"]


def java_url_encode(text: str) -> str:
    """``java.net.URLEncoder.encode(text, UTF_8)``: what Pulsar's ``Codec.encode`` produces."""
    out: list[str] = []
    for byte in text.encode("utf-8"):
        if byte in _JAVA_URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _check_entity(kind: str, name: str) -> None:
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidName(f"{kind} name is empty")
    if not _NAMED_ENTITY.fullmatch(name):
        raise InvalidName(
            f"invalid {kind} name {quoted_name(name)}: only ASCII letters, digits and the "
            "characters '_', '-', '=', ':', '.' are allowed (Pulsar's NamedEntity pattern "
            "[-=:.\\w]+)"
        )
    if name in (".", ".."):
        raise InvalidName(f"invalid {kind} name {quoted_name(name)}: '.' and '..' are reserved")
    if len(name) > MAX_NAME_BYTES:
        raise InvalidName(
            f"invalid {kind} name: {len(name)} bytes long, over the {MAX_NAME_BYTES}-byte limit"
        )


def _check_local_name(name: str) -> None:
    if not isinstance(name, str):
        raise InvalidName(f"topic name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidName("topic local name is empty")
    if "\x00" in name:
        raise InvalidName(f"invalid topic name {quoted_name(name)}: contains a NUL character")
    for ch in name:
        if unicodedata.category(ch) == "Cc":
            raise InvalidName(
                f"invalid topic name {quoted_name(name)}: contains the control character "
                f"U+{ord(ch):04X}"
            )
    if "/" in name:
        raise InvalidName(
            f"invalid topic name {quoted_name(name)}: the local name may not contain '/' "
            "(legacy names with a cluster component are not supported)"
        )
    if "\\" in name:
        raise InvalidName(
            f"invalid topic name {quoted_name(name)}: the local name may not contain '\\'"
        )
    if name.startswith("."):
        raise InvalidName(
            f"invalid topic name {quoted_name(name)}: the local name may not start with '.'"
        )
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidName(
            f"invalid topic name {quoted_name(name)}: not encodable as UTF-8 (it holds bytes "
            "that are not UTF-8 text)"
        ) from None
    if size > MAX_NAME_BYTES:
        raise InvalidName(
            f"invalid topic name: local name is {size} UTF-8 bytes, over the "
            f"{MAX_NAME_BYTES}-byte limit"
        )


@dataclass(frozen=True)
class NamespaceName:
    """``tenant/namespace``, validated when constructed."""

    tenant: str
    local_name: str

    def __post_init__(self) -> None:
        _check_entity("tenant", self.tenant)
        _check_entity("namespace", self.local_name)

    @classmethod
    def parse(cls, name: str) -> NamespaceName:
        """Parse ``tenant/namespace`` (V1 names ``tenant/cluster/ns`` are not supported)."""
        if not isinstance(name, str):
            raise InvalidName(f"namespace must be a string, not {type(name).__name__}")
        parts = name.split("/")
        if len(parts) != 2:
            raise InvalidName(
                f"invalid namespace {quoted_name(name)}: expected the format <tenant>/<namespace>"
            )
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.tenant}/{self.local_name}"


@dataclass(frozen=True)
class TopicName:
    """A persistent topic, ``persistent://tenant/namespace/local_name``."""

    namespace_name: NamespaceName
    local_name: str

    def __post_init__(self) -> None:
        _check_local_name(self.local_name)

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """Parse a full, short (``tenant/ns/topic``) or bare (``topic``) topic name."""
        if not isinstance(name, str):
            raise InvalidName(f"topic name must be a string, not {type(name).__name__}")
        if "://" in name:
            domain, _, rest = name.partition("://")
            if domain == NON_PERSISTENT:
                raise InvalidName(
                    f"unsupported topic {quoted_name(name)}: non-persistent topics have no "
                    "ledgers; only persistent:// topics are supported"
                )
            if domain != PERSISTENT:
                raise InvalidName(
                    f"invalid topic name {quoted_name(name)}: unknown domain {domain!r} "
                    "(expected persistent://)"
                )
            parts = rest.split("/", 2)
            if len(parts) != 3:
                raise InvalidName(
                    f"invalid topic name {quoted_name(name)}: expected persistent://<tenant>/<namespace>/<topic>"
                )
        else:
            parts = name.split("/")
            if len(parts) == 1:
                parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, name]
            elif len(parts) != 3:
                raise InvalidName(
                    f"invalid short topic name {quoted_name(name)}: it should be in the format "
                    "<tenant>/<namespace>/<topic> or <topic>"
                )
        return cls(NamespaceName(parts[0], parts[1]), parts[2])

    @classmethod
    def from_managed_ledger_name(cls, name: str) -> TopicName:
        """The inverse of :attr:`managed_ledger_name` (InvalidName unless it is one)."""
        parts = name.split("/")
        if len(parts) != 4 or parts[2] != PERSISTENT:
            raise InvalidName(
                f"{name!r} is not a managed-ledger name (<tenant>/<namespace>/persistent/<topic>)"
            )
        try:
            local = unquote_plus(parts[3], errors="strict")
        except UnicodeDecodeError as exc:
            raise InvalidName(f"{name!r}: its topic part is not URL-encoded UTF-8") from exc
        topic = cls.parse(f"{PERSISTENT}://{parts[0]}/{parts[1]}/{local}")
        if topic.managed_ledger_name != name:
            raise InvalidName(f"{name!r} is not in Pulsar's canonical encoding")
        return topic

    @classmethod
    def of(cls, topic: TopicName | str) -> TopicName:
        """``topic`` itself if already parsed, else :meth:`parse` it."""
        return topic if isinstance(topic, TopicName) else cls.parse(topic)

    @property
    def domain(self) -> str:
        return PERSISTENT

    @property
    def tenant(self) -> str:
        return self.namespace_name.tenant

    @property
    def namespace(self) -> str:
        """``tenant/namespace``."""
        return str(self.namespace_name)

    @property
    def encoded_local_name(self) -> str:
        """The local name as Pulsar's ``Codec.encode`` (Java ``URLEncoder``) spells it."""
        return java_url_encode(self.local_name)

    @property
    def managed_ledger_name(self) -> str:
        """``tenant/namespace/persistent/<encoded local name>`` (Pulsar's persistence naming)."""
        return f"{self.namespace}/{PERSISTENT}/{self.encoded_local_name}"

    def __str__(self) -> str:
        return f"{PERSISTENT}://{self.namespace}/{self.local_name}"
