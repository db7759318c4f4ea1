"""Which topics a command or a Spark source works on: the one form every topic selection takes.

Every option that selects topics (``kafka upload --topics``, ``service run --kafka-topics`` and
``[kafka] topics``, ``metadata rebuild --topics``, ``export run TOPICS...`` and ``[[export]]
topics``, the Spark sources' ``topics`` option, with or without ``--pulsar-metadata``) parses its
text into one :class:`TopicSelection`, with one documented form (:data:`TOPICS_HELP`):

* **names**: comma-separated topic names, each an exact match. A Pulsar topic may be written
  ``persistent://tenant/ns/x``, ``tenant/ns/x`` or ``x`` (``public/default``), and a
  partitioned topic's name selects its partitions (``x-partition-<n>``); a Kafka topic is its
  name (``orders.v1``: ``.``, ``_`` and ``-`` are name characters, not regex operators);
* **a namespace** ``tenant/ns`` (one ``/``, no ``://``): every topic in it (Pulsar only);
  namespaces and names may be mixed in one list;
* **a regular expression**, when the text holds a regex operator (any of
  :data:`REGEX_OPERATORS`) or starts with ``regex:``: Python's ``re``, matched in full against
  the topic's name (a Pulsar topic's ``persistent://t/ns/x`` and its ``t/ns/x`` form). Commas
  are part of the expression then; use ``|`` for alternatives.

A regex that selected topics before this form existed still selects the same ones, except a
text made of name characters only (``orders.v1``), which is now an exact name. A bad regex, an
empty text or a malformed Pulsar name is a :class:`~offloader.errors.ConfigError` naming the
text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from offloader.errors import ConfigError, InvalidName
from offloader.naming import PERSISTENT, NamespaceName, TopicName

__all__ = [
    "REGEX_OPERATORS",
    "REGEX_PREFIX",
    "TOPICS_HELP",
    "TOPICS_METAVAR",
    "TopicSelection",
]

#: the metavar of every option that selects topics
TOPICS_METAVAR = "TOPICS"

#: the help sentence of every option that selects topics (``--help`` and the docs)
TOPICS_HELP = (
    "Comma-separated topic names (exact; a Pulsar topic as persistent://tenant/ns/x, "
    "tenant/ns/x or x, a partitioned topic's name selecting its partitions), a Pulsar "
    "namespace tenant/ns (all its topics), or a regular expression matched in full against "
    "topic names (text holding any of * + ? [ ] ( ) { } | ^ $ \\, or starting with regex:)."
)

#: characters that make a selection's text a regular expression (``.`` is a name character)
REGEX_OPERATORS = frozenset("*+?[](){}|^$\\")

#: a prefix that makes the rest of the text a regular expression whatever it holds
REGEX_PREFIX = "regex:"

_SCHEME = f"{PERSISTENT}://"


def _forms(name: str) -> tuple[str | None, str | None]:
    """A Pulsar topic's full name and its ``t/ns/x`` form (both None for a name with no ``/``:
    a Kafka name, or a bare Pulsar name, which a listing never holds)."""
    if "/" not in name:
        return None, None
    full = _canonical(name)
    if full is None:
        return None, None
    return full, full[len(_SCHEME) :]


def _plain(name: str) -> bool:
    """Whether ``name`` reads back as itself in a comma-separated list of names."""
    return (
        name.strip() == name
        and bool(name)
        and "," not in name
        and not name.startswith(REGEX_PREFIX)
        and not any(ch in REGEX_OPERATORS for ch in name)
        and ("://" in name or name.count("/") != 1)
    )


def _canonical(name: str) -> str | None:
    """The full Pulsar name a given name stands for, or None when it is no Pulsar name."""
    try:
        return str(TopicName.parse(name))
    except InvalidName:
        return None


@dataclass(frozen=True)
class TopicSelection:
    """A parsed topic selection (see the module): exact names, namespaces and regexes, a topic
    selected when any of them matches it. Build it with :meth:`parse` (or :meth:`parse_all`
    for several texts, e.g. ``export run``'s arguments)."""

    text: str
    names: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()
    #: the full Pulsar name of each name that is one (matching and de-duplication)
    canonical: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # --- parsing -------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> TopicSelection:
        """Parse one selection's text; :class:`~offloader.errors.ConfigError` when it is bad."""
        if not isinstance(text, str):
            raise ConfigError(f"a topics selection must be text, not {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            raise ConfigError(
                "the topics selection is empty: give topic names, a namespace or a regex"
            )
        if stripped.startswith(REGEX_PREFIX):
            return cls._regex(stripped, stripped[len(REGEX_PREFIX) :])
        if any(ch in REGEX_OPERATORS for ch in stripped):
            return cls._regex(stripped, stripped)
        names: list[str] = []
        namespaces: list[str] = []
        canonical: set[str] = set()
        for item in (part.strip() for part in stripped.split(",")):
            if not item:
                continue
            for ch in item:
                if unicodedata.category(ch) == "Cc":
                    raise ConfigError(
                        f"topics {stripped!r}: {item!r} holds the control character U+{ord(ch):04X}"
                    )
            if "://" not in item and item.count("/") == 1:
                try:
                    namespaces.append(str(NamespaceName.parse(item)))
                except InvalidName as exc:
                    raise ConfigError(f"topics {stripped!r}: {exc}") from None
                continue
            full = _canonical(item)
            if full is None and ("/" in item or "://" in item):
                try:
                    TopicName.parse(item)
                except InvalidName as exc:
                    raise ConfigError(f"topics {stripped!r}: {exc}") from None
            names.append(item)
            if full is not None:
                canonical.add(full)
        if not names and not namespaces:
            raise ConfigError(f"topics {stripped!r} names no topic")
        return cls(
            stripped,
            names=tuple(dict.fromkeys(names)),
            namespaces=tuple(dict.fromkeys(namespaces)),
            canonical=frozenset(canonical),
        )

    @classmethod
    def _regex(cls, text: str, expression: str) -> TopicSelection:
        if not expression:
            raise ConfigError(f"topics {text!r}: the regular expression is empty")
        try:
            pattern = re.compile(expression)
        except re.error as exc:
            raise ConfigError(f"topics {text!r} is not a regular expression: {exc}") from None
        return cls(text, patterns=(pattern,))

    @classmethod
    def parse_all(cls, texts: Iterable[str]) -> TopicSelection:
        """The union of several selections (a topic selected by any of them)."""
        parts = [cls.parse(t) for t in texts]
        if not parts:
            raise ConfigError(
                "the topics selection is empty: give topic names, a namespace or a regex"
            )
        if len(parts) == 1:
            return parts[0]
        return cls(
            " ".join(p.text for p in parts),
            names=tuple(dict.fromkeys(n for p in parts for n in p.names)),
            namespaces=tuple(dict.fromkeys(n for p in parts for n in p.namespaces)),
            patterns=tuple(q for p in parts for q in p.patterns),
            canonical=frozenset(c for p in parts for c in p.canonical),
        )

    @staticmethod
    def text_of(names: Iterable[str]) -> str:
        """A selection's text that selects exactly ``names`` (full names, as a listing holds
        them): their comma-separated list, or an escaped regex when a name holds a ``,`` or a
        regex operator (Pulsar allows both in a topic's local name)."""
        listed = list(dict.fromkeys(names))
        if any(not _plain(n) for n in listed):
            return REGEX_PREFIX + "|".join(re.escape(n) for n in listed)
        return ",".join(listed)

    @classmethod
    def of(cls, value: str | TopicSelection | None) -> TopicSelection | None:
        """``value`` parsed (a selection as it is; None, meaning every topic, as None)."""
        if value is None or isinstance(value, TopicSelection):
            return value
        return cls.parse(value)

    # --- what it selects -----------------------------------------------------------------------
    @property
    def names_only(self) -> bool:
        """True when the selection is a list of names (no namespace, no regex): what it selects
        is known without a listing."""
        return not self.namespaces and not self.patterns

    def matches(self, name: str) -> bool:
        """Whether the topic ``name`` (a Kafka name, or a Pulsar name in any of its forms) is
        selected."""
        full, short = _forms(name)
        if self._named(name, full) or self._partition_of_named(full):
            return True
        if short is not None and any(short.startswith(ns + "/") for ns in self.namespaces):
            return True
        return any(
            pattern.fullmatch(form)
            for pattern in self.patterns
            for form in {name, full, short}
            if form
        )

    def select(self, candidates: Iterable[str]) -> list[str]:
        """The candidates selected, in their order, each once."""
        return [c for c in dict.fromkeys(candidates) if self.matches(c)]

    def expand(self, candidates: Iterable[str]) -> list[str]:
        """The names given, as given and in order, then every candidate a namespace or a regex
        selects that is not one of them (nor a partition of one): what a command naming topics
        works on. A name given is kept even when no candidate has it, so that the command
        reports it as it always has."""
        out = list(self.names)
        if self.names_only:
            return out
        for candidate in dict.fromkeys(candidates):
            full, _ = _forms(candidate)
            if self._named(candidate, full) or self._partition_of_named(full):
                continue
            if self.matches(candidate):
                out.append(candidate)
        return out

    def require_flat(self, what: str = "Kafka topics") -> TopicSelection:
        """The selection itself, or a :class:`~offloader.errors.ConfigError` when it names a
        namespace, which ``what`` do not have."""
        if self.namespaces:
            raise ConfigError(
                f"topics {self.text!r}: {self.namespaces[0]} is a Pulsar namespace; {what} have "
                "none (give names or a regular expression)"
            )
        return self

    def _named(self, name: str, full: str | None) -> bool:
        return (
            name in self.names
            or name in self.canonical
            or (full is not None and full in self.canonical)
        )

    def _partition_of_named(self, full: str | None) -> bool:
        if full is None or not self.canonical:
            return False
        base, sep, number = full.rpartition("-partition-")
        return bool(sep) and number.isdigit() and base in self.canonical

    def __str__(self) -> str:
        return self.text
