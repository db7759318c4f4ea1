"""The process the export-loss test kills: ``python -m tests.rebuild.export_loss_worker HOME
STORE TARGET [ENDPOINT [METADATA]]`` (an S3 endpoint, ``-`` for none; a ``postgresql://``
metadata store) runs ``export run`` (the local engine) of the crash harness's topic with the
crash harness's settings, printing ``READY`` first and ``DONE`` at the end."""

from __future__ import annotations

import sys

from offloader.api import Offloader
from tests.crash.export_worker import TOPIC, spec


def main(argv: list[str]) -> int:
    home, store, target = argv[:3]
    endpoint = argv[3] if len(argv) > 3 and argv[3] != "-" else None
    metadata = argv[4] if len(argv) > 4 else None
    print("READY", flush=True)
    with Offloader.from_settings(home, store, endpoint_url=endpoint, metadata_url=metadata) as off:
        off.export_run([TOPIC], spec(target, endpoint), engine="local")
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
