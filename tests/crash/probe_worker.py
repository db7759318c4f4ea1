"""A tiny worker for ``test_launcher.py``: ``python -m tests.crash.probe_worker CODE [SLEEP]``
prints ``READY``, its argv, its working directory and ``PROBE``, reaches the crash point
``probe.point`` twice, sleeps ``SLEEP`` seconds, prints ``DONE`` and exits with ``CODE``."""

from __future__ import annotations

import os
import sys
import time

from offloader.crashpoints import crash_point


def main(argv: list[str]) -> int:
    print("READY", flush=True)
    print(f"argv={argv} cwd={os.getcwd()} PROBE={os.environ.get('PROBE')}", flush=True)
    for n in (1, 2):
        crash_point("probe.point")
        print(f"passed {n}", flush=True)
    time.sleep(float(argv[1]) if len(argv) > 1 else 0.0)
    print("DONE", flush=True)
    print("to stderr", file=sys.stderr)
    return int(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
