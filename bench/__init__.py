"""Benchmarks: ``python -m bench <name> [...]`` (see ``bench/__main__.py``).

Every benchmark measures our figure and a baseline in the same run, on the same machine, and
prints one JSON object per line::

    {"name": ..., "ours": ..., "baseline": ..., "ratio": ..., "units": ..., ...}

so results can be compared across machines only as ratios.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def report(
    name: str,
    ours: float,
    baseline: float,
    units: str,
    *,
    higher_is_better: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """Print one result line as JSON (and return it). ``ratio`` is ours / baseline."""
    record: dict[str, Any] = {
        "name": name,
        "ours": round(ours, 3),
        "baseline": round(baseline, 3),
        "ratio": round(ours / baseline, 4) if baseline else None,
        "units": units,
        "higher_is_better": higher_is_better,
    }
    record.update(extra)
    print(json.dumps(record), flush=True)
    return record


def note(message: str) -> None:
    """A human note on stderr (stdout stays JSON lines)."""
    print(message, file=sys.stderr, flush=True)
