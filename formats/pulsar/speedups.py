"""The C twins of the Pulsar decoder's hot loops (``formats/_pulsar_speedups.c``), or None.

None when the extension was not built (no compiler), was built from an older source (it lacks
a function the decoder calls: a warning says so), or ``LEDGER_OFFLOADER_PURE_PYTHON`` is set, as
for :mod:`formats.framing`: then the pure-Python twins run, with the same results.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

__all__ = ["C_MODULE"]

#: what the decoder calls; an extension built from an older source lacks some of them
REQUIRED = (
    "split_batch_columns",
    "split_batch_into",
    "message_metadata_values",
    "decode_entries_into",
    "message_ids_into",
    "crc32c",
)


def _load() -> Any | None:
    if os.environ.get("LEDGER_OFFLOADER_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from formats import _pulsar_speedups  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - built without a compiler
        return None
    missing = [name for name in REQUIRED if not hasattr(_pulsar_speedups, name)]
    if missing:  # a stale build (the source changed, the extension was not rebuilt)
        warnings.warn(
            f"formats._pulsar_speedups lacks {', '.join(missing)} (built from an older "
            "source; run `make install`): using the pure-Python decoder",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _pulsar_speedups


#: the extension module (the functions of :data:`REQUIRED`), or None
C_MODULE = _load()
