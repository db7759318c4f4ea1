"""``make check``'s fast tier: the Makefile's marker expression, applied to real test files,
keeps the tests on the file store and SQLite and drops those that need an S3 server,
PostgreSQL or Spark, whether their file marks them or only their fixtures and parameters do
(``implied_marks`` in tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_MARKS, PARAM_MARKS

ROOT = Path(__file__).resolve().parents[1]


def fast_tier() -> str:
    match = re.search(r"^FAST_TIER := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile defines FAST_TIER"
    return match.group(1).strip()


def collect(*paths: str, expression: str | None = None) -> list[str]:
    """The test ids ``pytest --collect-only`` selects from ``paths`` (with ``-m expression``)."""
    marks = ["-m", expression] if expression else []
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *marks, *paths],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_the_fast_tier_keeps_file_store_and_sqlite_tests_only() -> None:
    files = (
        "tests/contract/test_open_range_contract.py",  # local, moto, rgw backends
        "tests/metadata/test_metadata_contract.py",  # sqlite, postgresql: only parameters
        "tests/spark/test_topics.py",  # spark and s3 by its pytestmark
    )
    everything = collect(*files)
    fast = collect(*files, expression=fast_tier())
    assert fast, "make check selects tests"
    assert set(fast) < set(everything)
    assert any("[local" in t for t in fast) and any("[sqlite" in t for t in fast)
    heavy = ("moto", "rgw", "postgresql", "tests/spark/")
    assert not [t for t in fast if any(word in t for word in heavy)]
    # what was dropped is exactly the heavy tests
    assert {t for t in everything if not any(word in t for word in heavy)} == set(fast)


@pytest.mark.parametrize("marks", [*FIXTURE_MARKS.values(), *PARAM_MARKS.values()])
def test_implied_marks_are_declared(marks: tuple[str, ...], pytestconfig: pytest.Config) -> None:
    declared = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(marks) <= declared
