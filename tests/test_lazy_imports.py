"""The heavy optional libraries (pyarrow, pyiceberg, pyspark, the cloud SDKs) load only where
they are used: importing the library's API, ``offloader --help`` and a Kafka upload's command
line do not pay for them (pyarrow alone: about 50 MB of RSS at start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "pyarrow",
    "pyiceberg",
    "pyspark",
    "google.cloud.storage",
    "azure.storage.blob",
    "cryptography",  # its OpenSSL binding: only where a key wraps or a chunk is encrypted
)
ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import sys
{body}
print("LOADED:" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def _loaded(body: str) -> list[str]:
    code = _PROBE.format(body=body, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("LOADED:")]
    return [m for m in line.removeprefix("LOADED:").split(",") if m]


def test_the_probe_sees_a_heavy_import() -> None:
    assert _loaded("import pyarrow") == ["pyarrow"]


@pytest.mark.parametrize(
    "body",
    [
        "import offloader.api",
        "import offloader.facade, offloader.kafka.upload, offloader.kafka.tier",
        "from cli.main import main\n"
        "sys.argv = ['offloader', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
        "from cli.main import main\n"
        "sys.argv = ['offloader', 'kafka', 'upload', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
    ],
    ids=["api", "kafka-upload-modules", "help", "kafka-upload-help"],
)
def test_no_heavy_library_is_loaded(body: str) -> None:
    assert _loaded(body) == []
