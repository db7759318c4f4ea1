"""The import rules of ARCHITECTURE.md, enforced: every module's imports (walked with ``ast``,
function-level and ``TYPE_CHECKING`` imports included) are checked against the layers and the
SDK owners below. A new violation fails with the rule it broke.

Keep this table and ARCHITECTURE.md's "Invariants" section in step.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("formats", "offloader", "cli")

#: the layer of each part of the code, by longest dotted prefix; a module may import modules of
#: its own layer or below, never above (and never the pairs in SIDEWAYS)
LAYERS: dict[str, int] = {
    "formats": 0,
    # values: imported by nearly everything
    "offloader.errors": 1,
    "offloader.units": 1,
    "offloader.logs": 1,
    "offloader.crashpoints": 1,
    "offloader.config": 1,
    "offloader.naming": 1,
    "offloader.policies": 1,
    "offloader": 1,  # the package's own __init__
    # backends, each behind its Protocol
    "offloader.store": 2,
    "offloader.metadata": 2,
    "offloader.ledgers": 2,
    "offloader.keyring": 1,
    # what every flow shares
    "offloader.api_types": 3,
    "offloader.runtime": 3,
    # flows
    "offloader.read": 4,
    "offloader.offload": 5,
    "offloader.kafka": 5,  # the Kafka tier (uses the ledger orphan audit's types)
    "offloader.topics": 6,
    "offloader.export": 6,  # the export's driver side (plan, names, watermark; no pyspark)
    "offloader.spark": 7,
    "offloader.service": 7,
    # the facade, then the front end
    "offloader.api": 8,
    "cli": 9,
}

#: same-layer pairs that must not import each other (importer prefix, imported prefix)
SIDEWAYS: set[tuple[str, str]] = {
    ("offloader.store", "offloader.metadata"),
    ("offloader.store", "offloader.ledgers"),
    ("offloader.metadata", "offloader.store"),
    ("offloader.metadata", "offloader.ledgers"),
    ("offloader.ledgers", "offloader.store"),
    ("offloader.ledgers", "offloader.metadata"),
    ("offloader.spark", "offloader.service"),
    ("offloader.service", "offloader.spark"),
    ("offloader.export", "offloader.topics"),
    ("offloader.topics", "offloader.export"),
}

#: what the front end may import of the engine: the facade and value modules only
CLI_ALLOWED = (
    "offloader.api",
    "offloader.api_types",
    "offloader.errors",
    "offloader.units",
    "offloader.logs",
    "offloader.config",
    "offloader.naming",
    "offloader.policies",
    "offloader.metadata.base",
    "formats",
    "cli",
)

#: third-party SDKs and the one place each may be imported (formats/ may import none of them)
SDK_OWNERS: dict[str, tuple[str, ...]] = {
    "boto3": ("offloader.store",),
    "botocore": ("offloader.store",),
    "sqlite3": ("offloader.metadata",),
    "psycopg": ("offloader.metadata",),
    "pyspark": ("offloader.spark",),
    "click": ("cli",),
    # the catalog and table calls (errors translated there) and the FileIO pyiceberg loads
    "pyiceberg": ("offloader.export.iceberg_catalog", "offloader.export.iceberg_fileio"),
}


@dataclass(frozen=True)
class Violation:
    module: str
    imported: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imported}: {self.rule}"


def _prefix(name: str, table: dict[str, int]) -> str | None:
    best = None
    for key in table:
        # the bare package name stands for its own __init__ only, not for new modules in it
        inside = name.startswith(key + ".") and key != "offloader"
        if (name == key or inside) and (best is None or len(key) > len(best)):
            best = key
    return best


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(source: str, module: str, is_package: bool) -> list[tuple[str, int]]:
    """Every module ``source`` imports, absolute, with its line (relative imports resolved)."""
    out: list[tuple[str, int]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, node.lineno))
            # ``from offloader import api`` imports the submodule offloader.api
            out += [
                (f"{base}.{alias.name}", node.lineno)
                for alias in node.names
                if _is_module(f"{base}.{alias.name}")
            ]
    return out


def check_module(module: str, source: str, is_package: bool = False) -> list[Violation]:
    """The rules ``module`` (dotted name) breaks with ``source``."""
    found: list[Violation] = []
    mine = _prefix(module, LAYERS)
    assert mine is not None, f"{module} has no layer: add it to LAYERS and ARCHITECTURE.md"
    for imported, line in imports_of(source, module, is_package):
        top = imported.split(".")[0]
        if top in SDK_OWNERS and not _under(module, SDK_OWNERS[top]):
            owners = ", ".join(SDK_OWNERS[top])
            found.append(Violation(module, imported, line, f"only {owners} may import {top}"))
            continue
        if top not in PACKAGES:
            continue
        theirs = _prefix(imported, LAYERS)
        if theirs is None:
            # ``from offloader import X`` also yields offloader.X for plain names: not a module
            continue
        if module.startswith("formats") and not imported.startswith("formats"):
            found.append(
                Violation(module, imported, line, "formats/ is pure: it imports no engine")
            )
        elif module.startswith("cli") and not _under(imported, CLI_ALLOWED):
            found.append(
                Violation(module, imported, line, "cli/ imports only the facade and value modules")
            )
        elif LAYERS[theirs] > LAYERS[mine]:
            found.append(
                Violation(
                    module,
                    imported,
                    line,
                    f"{mine} (layer {LAYERS[mine]}) may not import upward into "
                    f"{theirs} (layer {LAYERS[theirs]})",
                )
            )
        elif (mine, theirs) in SIDEWAYS:
            found.append(Violation(module, imported, line, f"{mine} may not import {theirs}"))
    return found


def project_modules() -> list[tuple[str, Path, bool]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            out.append((".".join(parts), path, is_package))
    return out


def test_the_tree_keeps_the_import_rules() -> None:
    violations = [
        str(v)
        for module, path, is_package in project_modules()
        for v in check_module(module, path.read_text(), is_package)
    ]
    assert violations == [], "\n".join(violations)


def test_every_module_has_a_layer_and_a_docstring() -> None:
    for module, path, _ in project_modules():
        assert _prefix(module, LAYERS) is not None, module
        if path.stat().st_size:
            assert ast.get_docstring(ast.parse(path.read_text())), f"{module} has no docstring"


def test_packages_declare_their_public_surface() -> None:
    for package in ("offload", "read", "topics", "spark", "store", "metadata", "ledgers"):
        tree = ast.parse((ROOT / "offloader" / package / "__init__.py").read_text())
        names = {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        assert "__all__" in names, f"offloader/{package}/__init__.py has no __all__"


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("formats.block", "import boto3\n", "only offloader.store may import boto3"),
        ("formats.index", "from offloader.errors import X\n", "formats/ is pure"),
        ("offloader.read.handle", "from offloader.offload.writer import x\n", "upward"),
        ("offloader.read.tiered", "from offloader.topics import ManagedLedger\n", "upward"),
        ("offloader.store.s3", "from offloader.metadata import open_metadata_store\n", "may not"),
        ("offloader.offload.commit", "import pyspark\n", "only offloader.spark may import"),
        ("offloader.topics.tasks", "def f():\n    import sqlite3\n", "only offloader.metadata"),
        ("cli.topics", "from offloader.read.handle import ReadHandle\n", "facade"),
        ("offloader.spark.plan", "from ..service import tick\n", "may not import"),
        ("offloader.metadata.sqlite", "from ..api import Offloader\n", "upward"),
    ],
)
def test_a_planted_violation_is_caught(module: str, source: str, rule: str) -> None:
    found = check_module(module, source)
    assert found and rule in found[0].rule, found


def test_allowed_imports_pass() -> None:
    assert check_module("offloader.offload.verification", "from offloader.read import x\n") == []
    assert check_module("cli.main", "from offloader.api import Offloader\nimport click\n") == []
    assert check_module("offloader.spark.rdd", "from pyspark import RDD\n") == []
