"""The release notes' fragments: ``changes/<issue>.<slug>.<type>.md``, one user-facing sentence
each (docs/development.md, "Release notes"), and towncrier compiles them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHANGES = ROOT / "changes"
NAME = re.compile(
    r"^(?P<issue>[0-9]+)\.(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)"
    r"\.(?P<type>added|changed|fixed|removed)\.md$"
)
KEEP = {".gitignore", ".gitkeep"}


def fragments() -> list[Path]:
    return sorted(p for p in CHANGES.iterdir() if p.name not in KEEP)


def test_changes_directory_exists() -> None:
    assert CHANGES.is_dir()


def test_every_fragment_is_well_formed() -> None:
    """Every file of changes/ (none between a release and the next change is fine)."""
    for path in fragments():
        check_fragment(path)


def check_fragment(path: Path) -> None:
    assert path.is_file(), f"{path.name}: only fragment files belong in changes/"
    assert NAME.match(path.name), (
        f"{path.name}: name it <issue>.<slug>.<type>.md, type one of added, changed, fixed, "
        "removed, the slug in lowercase letters, digits and dashes"
    )
    text = path.read_text().strip()
    assert text, f"{path.name} is empty"
    assert "\n" not in text, f"{path.name}: one line (one user-facing sentence)"


def test_a_malformed_fragment_is_refused(tmp_path: Path) -> None:
    for name, text in (
        ("34.fix.md", "text"),
        ("34.slug.fixed.md", ""),
        ("34.slug.fixed.md", "two\nlines"),
    ):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(AssertionError):
            check_fragment(path)
        path.unlink()


def test_the_name_rule() -> None:
    assert NAME.match("34.kafka-span-checksums.fixed.md")
    for bad in (
        "34.fixed.md",
        "x.slug.fixed.md",
        "34.Slug.fixed.md",
        "34.slug.fix.md",
        "34.slug.fixed",
    ):
        assert not NAME.match(bad), bad


def test_towncrier_compiles_the_fragments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "towncrier", "build", "--draft", "--version", "0.0.0-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for path in fragments():
        assert path.read_text().strip() in result.stdout, path.name
