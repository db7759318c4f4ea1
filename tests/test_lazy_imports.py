"""The heavy optional libraries (pyarrow, pyiceberg, pyspark, the cloud SDKs) load only where
they are used: importing the library's API, ``offloader --help`` and a Kafka upload's command
line do not pay for them (pyarrow alone: about 50 MB of RSS at start-up). A Kafka upload's
worker does not load what only Pulsar's offload and read paths use, nor ``rich`` (which
structlog's console renderer would import: about 4 MB of RSS, issue 40's memory goal). The
facade (``offloader.api``) loads its exports, the Pulsar cluster view, rebuild, the orphan audit,
verification and Pulsar's topics on first use, so an Offloader that only uploads Kafka segments
holds none of them (about 3 MB of RSS, the rest of issue 40's memory goal)."""

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

#: what a Kafka upload does not load, from its modules or through the facade
NOT_ON_KAFKA_UPLOAD = (
    "rich",
    "offloader.offload.writer",
    "offloader.offload.commit",
    "offloader.offload.verification",
    "offloader.read.handle",
    "offloader.read.tiered",
    "offloader.offload.job",
    "formats.pulsar",
    # the facade's parts a Kafka upload does not use (issue 40: loaded on first use)
    "offloader.export",
    "offloader.export.run",
    "offloader.export.iceberg",
    "offloader.export.manage",
    "offloader.facade.cluster",
    "offloader.pulsar_cluster",
    "offloader.read.cluster",
    "offloader.offload.cluster_orphans",
    "offloader.offload.orphans",
    "offloader.kafka.orphans",
    "offloader.rebuild",
    "offloader.service",
    "offloader.topics",
    "offloader.topics.managed_ledger",
    "offloader.topics.messages",
    "offloader.topics.tasks",
    "lz4.block",
)
_PROBE = """
import sys
{body}
print("LOADED:" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def _loaded(body: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    code = _PROBE.format(body=body, heavy=heavy)
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


def test_the_probe_sees_rich_and_the_pulsar_writer() -> None:
    body = "import rich, offloader.offload.writer"
    loaded = _loaded(body, NOT_ON_KAFKA_UPLOAD)
    assert {"rich", "offloader.offload.writer", "formats.pulsar"} <= set(loaded)


def test_the_kafka_upload_modules_load_neither_rich_nor_the_pulsar_paths() -> None:
    body = "import offloader.kafka.upload, offloader.kafka.tier"
    assert _loaded(body, NOT_ON_KAFKA_UPLOAD) == []


def test_importing_the_api_loads_none_of_the_parts_a_kafka_upload_does_not_use() -> None:
    assert _loaded("import offloader.api", NOT_ON_KAFKA_UPLOAD) == []


def test_the_api_loads_its_lazy_names_on_first_use() -> None:
    body = (
        "import offloader.api as api\n"
        "assert 'offloader.export.settings' not in sys.modules\n"
        "assert api.ExportSpec.__module__ == 'offloader.export.settings'\n"
        "assert api.PulsarCluster.__module__ == 'offloader.facade.cluster'\n"
        "assert [n for n in api.__all__ if not hasattr(api, n)] == []\n"
        "assert set(api.__all__) <= set(dir(api))\n"
        "try:\n    api.NoSuchName\nexcept AttributeError as exc:\n"
        "    assert 'NoSuchName' in str(exc)\nelse:\n    raise AssertionError('no error')"
    )
    loaded = _loaded(body, NOT_ON_KAFKA_UPLOAD)
    assert {"offloader.export", "offloader.facade.cluster", "offloader.pulsar_cluster"} <= set(
        loaded
    )


def test_an_offloader_and_its_kafka_tier_load_no_pulsar_or_export_part(tmp_path: Path) -> None:
    body = (
        "from offloader.api import KafkaSettings, Offloader\n"
        "import offloader.kafka.upload, offloader.kafka.tier\n"
        f"off = Offloader.from_settings({str(tmp_path)!r}, 's3://bucket/k',"
        " endpoint_url='http://127.0.0.1:9')\n"
        "off.kafka(KafkaSettings())\n"
        "off.close()"
    )
    assert _loaded(body, NOT_ON_KAFKA_UPLOAD) == []


def test_a_kafka_upload_through_the_facade_loads_no_pulsar_or_export_part(tmp_path: Path) -> None:
    from tests.kafka.logdir import write_log_dir

    logs = tmp_path / "logs"
    write_log_dir(logs)
    body = (
        "from pathlib import Path\n"
        "from offloader.api import KafkaSettings, Offloader\n"
        f"with Offloader.from_settings({str(tmp_path / 'home')!r}) as off:\n"
        f"    report = off.kafka(KafkaSettings()).upload(Path({str(logs)!r}))\n"
        "assert report.ok and report.of('uploaded'), report"
    )
    assert _loaded(body, NOT_ON_KAFKA_UPLOAD) == []


def test_an_offloader_and_its_kafka_tier_do_not_load_rich(tmp_path: Path) -> None:
    body = (
        "from offloader.api import KafkaSettings, Offloader\n"
        "import offloader.kafka.upload, offloader.kafka.tier\n"
        f"off = Offloader.from_settings({str(tmp_path)!r}, 's3://bucket/k',"
        " endpoint_url='http://127.0.0.1:9')\n"
        "off.kafka(KafkaSettings())\n"
        "from offloader.logs import configure, get_logger\n"
        "configure()\n"
        "get_logger('probe').warning('probe line')"
    )
    assert _loaded(body, ("rich",)) == []


def test_structlog_without_rich_still_renders_exceptions() -> None:
    body = (
        "import io\n"
        "from offloader.logs import configure, get_logger\n"
        "out = io.StringIO()\n"
        "configure(file=out)\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    get_logger('probe').exception('failed')\n"
        "assert 'ZeroDivisionError' in out.getvalue(), out.getvalue()\n"
        "import rich\n"  # still importable by whoever wants it afterwards
    )
    assert _loaded(body, ("rich",)) == ["rich"]
