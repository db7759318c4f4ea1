"""The C twins of the Pulsar decoder's hot loops (``formats/_pulsar_speedups.c``), or None.

None when the extension was not built (no compiler) or ``LEDGER_OFFLOADER_PURE_PYTHON`` is set,
as for :mod:`formats.framing`: then the pure-Python twins run, with the same results.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["C_MODULE"]


def _load() -> Any | None:
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from formats import _pulsar_speedups  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - built without a compiler
        return None
    return _pulsar_speedups


#: the extension module (``split_batch_columns``, ``message_metadata_values``), or None
C_MODULE = _load()
