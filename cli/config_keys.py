"""The one check of ``offloader.toml`` table keys: an unknown key is refused by name, with the
nearest known key when one is close, so a typo says what was meant."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Set

from offloader.errors import ConfigError


def refuse_unknown_keys(table: Mapping[str, object], known: Set[str], what: str) -> None:
    """ConfigError ``<what> a, b`` for the keys of ``table`` outside ``known``; each is followed
    by ``(did you mean 'endpoint_url'?)`` when a known key is close to it."""
    unknown = sorted(set(table) - known)
    if not unknown:
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        named.append(f"{key} (did you mean {close[0]!r}?)" if close else key)
    raise ConfigError(f"{what} {', '.join(named)}")
