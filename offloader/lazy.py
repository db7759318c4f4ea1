"""Lazy re-exports (PEP 562): a package's public names, each loaded from its module on first use.

A package that re-exports names from heavy modules (the Pulsar writer, the export, Spark) keeps a
table ``name -> module`` and answers its module ``__getattr__`` with :func:`lazy_attribute`, so
importing the package loads none of them until a name is used (``tests/test_lazy_imports.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping


def lazy_attribute(
    package: str,
    where: Mapping[str, str],
    name: str,
    cache: MutableMapping[str, object] | None = None,
) -> object:
    """The value of ``name`` from the module ``where`` names for it; ``AttributeError`` (as
    Python's own) when the package does not export it. With ``cache`` (the package's
    ``globals()``), the value is kept there so later accesses skip this function."""
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(module), name)
    if cache is not None:
        cache[name] = value
    return value
