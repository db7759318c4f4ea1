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
    "offloader.lazy": 1,  # PEP 562 lazy re-exports of a package's names
    "offloader.crashpoints": 1,
    "offloader.config": 1,
    "offloader.location": 1,  # the parsed store URL and the S3 endpoint rule
    "offloader.naming": 1,
    "offloader.selection": 1,  # the one form of a topic selection (names, namespace, regex)
    "offloader.policies": 1,
    "offloader.metrics": 1,  # the metrics set the flows record into, lag computations
    "offloader": 1,  # the package's own __init__
    # backends, each behind its Protocol
    "offloader.store": 2,
    "offloader.metadata": 2,
    "offloader.ledgers": 2,
    "offloader.pulsar_cluster": 2,  # a real Pulsar cluster's metadata store, read only
    "offloader.kafka_cluster": 2,  # a Kafka cluster's metadata (ZooKeeper or KRaft), read only
    "offloader.zk": 2,  # ZooKeeper addresses and the read-only session both cluster readers use
    "offloader.keyring": 1,
    "offloader.metrics.prometheus": 2,  # the exporter: a backend of the metrics set
    # what every flow shares
    "offloader.api_types": 3,
    "offloader.runtime": 3,
    # flows
    "offloader.read": 4,
    "offloader.offload": 5,
    "offloader.kafka": 5,  # the Kafka tier (uses the ledger orphan audit's types)
    "offloader.rebuild": 5,  # metadata rebuilt from the store's listing (bucket manifests)
    "offloader.topics": 6,
    "offloader.export": 6,  # the export's driver side (plan, names, watermark; no pyspark)
    "offloader.spark": 7,
    "offloader.service": 7,
    # the facade, then the front end
    "offloader.api": 8,
    "offloader.facade": 8,  # the parts the facade is made of
    "cli": 9,
}

#: pairs that must not import each other although the layers allow it (importer prefix, imported
#: prefix): same-layer neighbours, and the lower flows ARCHITECTURE.md keeps out of spark/
SIDEWAYS: set[tuple[str, str]] = {
    ("offloader.store", "offloader.metadata"),
    ("offloader.store", "offloader.ledgers"),
    ("offloader.metadata", "offloader.store"),
    ("offloader.metadata", "offloader.ledgers"),
    ("offloader.ledgers", "offloader.store"),
    ("offloader.ledgers", "offloader.metadata"),
    ("offloader.pulsar_cluster", "offloader.store"),
    ("offloader.pulsar_cluster", "offloader.metadata"),
    ("offloader.pulsar_cluster", "offloader.ledgers"),
    ("offloader.kafka_cluster", "offloader.store"),
    ("offloader.kafka_cluster", "offloader.metadata"),
    ("offloader.kafka_cluster", "offloader.ledgers"),
    # the shared ZooKeeper session knows neither reader
    ("offloader.zk", "offloader.pulsar_cluster"),
    ("offloader.zk", "offloader.kafka_cluster"),
    ("offloader.pulsar_cluster", "offloader.kafka_cluster"),
    ("offloader.kafka_cluster", "offloader.pulsar_cluster"),
    ("offloader.spark", "offloader.service"),
    ("offloader.service", "offloader.spark"),
    ("offloader.spark", "offloader.offload"),
    ("offloader.spark", "offloader.topics"),
    ("offloader.export", "offloader.topics"),
    ("offloader.topics", "offloader.export"),
    # the rebuild reads the bucket's manifests through formats/, never the flows that wrote them
    ("offloader.rebuild", "offloader.offload"),
    ("offloader.rebuild", "offloader.kafka"),
    ("offloader.offload", "offloader.rebuild"),
    ("offloader.kafka", "offloader.rebuild"),
}

#: what the front end may import of the engine: the facade and value modules only
CLI_ALLOWED = (
    "offloader.api",
    "offloader.api_types",
    "offloader.errors",
    "offloader.units",
    "offloader.logs",
    "offloader.config",
    "offloader.location",
    "offloader.naming",
    "offloader.policies",
    "offloader.metadata.base",
    "formats",
    "cli",
)

#: third-party SDKs and the one place each may be imported (formats/ may import none of them)
_S3_MODULES = ("offloader.store.s3", "offloader.store.s3_client", "offloader.store.s3_errors")
SDK_OWNERS: dict[str, tuple[str, ...]] = {
    "boto3": _S3_MODULES,
    "botocore": _S3_MODULES,
    # gs:// and az:// stores: one module per SDK (its errors translated there)
    "google": ("offloader.store.gcs",),
    "azure": ("offloader.store.azure",),
    "sqlite3": ("offloader.metadata",),
    "psycopg": ("offloader.metadata",),
    "pyspark": ("offloader.spark",),
    "click": ("cli",),
    "prometheus_client": ("offloader.metrics.prometheus",),
    # the one read-only ZooKeeper session, shared by the Pulsar and Kafka cluster readers
    "kazoo": ("offloader.zk.reader",),
    # the catalog and table calls (errors translated there), the FileIO pyiceberg loads, and
    # the DataFiles of a run's files built from their footers with pyiceberg's helpers
    "pyiceberg": (
        "offloader.export.iceberg_catalog",
        "offloader.export.iceberg_fileio",
        "offloader.export.iceberg_files",
    ),
}

#: modules inside a backend package that decide without I/O: they import no SDK (sqlite3,
#: psycopg, ...), and none of their backend's SQL modules (ARCHITECTURE.md, metadata/)
PURE: dict[str, tuple[str, ...]] = {
    "offloader.metadata.rules": ("offloader.metadata.sqlite", "offloader.metadata.postgres"),
    "offloader.metadata.kafka_rules": ("offloader.metadata.sqlite", "offloader.metadata.postgres"),
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


def test_pure_modules_import_no_sdk_and_no_sql_module() -> None:
    for module, banned in PURE.items():
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        for imported, line in imports_of(path.read_text(), module, False):
            top = imported.split(".")[0]
            assert top not in SDK_OWNERS, f"{module}:{line} imports {imported}"
            assert not imported.startswith(banned), f"{module}:{line} imports {imported}"


def test_every_module_has_a_layer_and_a_docstring() -> None:
    for module, path, _ in project_modules():
        assert _prefix(module, LAYERS) is not None, module
        if path.stat().st_size:
            assert ast.get_docstring(ast.parse(path.read_text())), f"{module} has no docstring"


def test_packages_declare_their_public_surface() -> None:
    """Every package's ``__init__`` has a docstring and ``__all__`` (ARCHITECTURE.md)."""
    packages = [path for module, path, is_package in project_modules() if is_package]
    assert len(packages) > 10
    for init in packages:
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring"
        names = {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        assert "__all__" in names, f"{init.relative_to(ROOT)} has no __all__"


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("formats.block", "import boto3\n", "only offloader.store.s3, "),
        ("offloader.store.local", "import botocore\n", "only offloader.store.s3, "),
        ("formats.index", "from offloader.errors import X\n", "formats/ is pure"),
        ("offloader.read.handle", "from offloader.offload.writer import x\n", "upward"),
        ("offloader.read.tiered", "from offloader.topics import ManagedLedger\n", "upward"),
        ("offloader.store.s3", "from offloader.metadata import open_metadata_store\n", "may not"),
        ("offloader.offload.commit", "import pyspark\n", "only offloader.spark may import"),
        ("offloader.topics.tasks", "def f():\n    import sqlite3\n", "only offloader.metadata"),
        ("cli.topics", "from offloader.read.handle import ReadHandle\n", "facade"),
        ("offloader.spark.plan", "from ..service import tick\n", "may not import"),
        ("offloader.metadata.sqlite", "from ..api import Offloader\n", "upward"),
        ("offloader.service", "import prometheus_client\n", "only offloader.metrics.prometheus"),
        ("offloader.metrics.lag", "from offloader.store import open_store\n", "upward"),
        ("offloader.spark.messages", "from offloader.topics.messages import x\n", "may not"),
        ("offloader.spark.tasks", "from offloader.offload.writer import x\n", "may not"),
    ],
)
def test_a_planted_violation_is_caught(module: str, source: str, rule: str) -> None:
    found = check_module(module, source)
    assert found and rule in found[0].rule, found


def test_allowed_imports_pass() -> None:
    assert check_module("offloader.offload.verification", "from offloader.read import x\n") == []
    assert check_module("cli.main", "from offloader.api import Offloader\nimport click\n") == []
    assert check_module("offloader.spark.rdd", "from pyspark import RDD\n") == []


# --- import cycles ------------------------------------------------------------------------------
def _runtime_source(source: str) -> str:
    """``source`` without its ``if TYPE_CHECKING:`` blocks (imports there never run)."""
    tree = ast.parse(source)

    class _Drop(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                return node.orelse
            self.generic_visit(node)
            return node

    return ast.unparse(_Drop().visit(tree))


def import_graph(modules: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the project modules it imports when it runs (module-level and function-level
    imports, ``TYPE_CHECKING`` ones left out). A module's own parent packages are no edge: they
    are initialised before the module runs."""
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in modules.items():
        edges: set[str] = set()
        for imported, _ in imports_of(_runtime_source(source), module, is_package):
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                edges.add(target)
        graph[module] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def _tree_sources() -> dict[str, tuple[str, bool]]:
    return {m: (path.read_text(), is_pkg) for m, path, is_pkg in project_modules()}


def test_no_import_cycle_between_modules() -> None:
    cycles = import_cycles(import_graph(_tree_sources()))
    assert cycles == [], "modules that import each other: " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_import_cycle_between_packages() -> None:
    """Each layer's parts (``_prefix`` of LAYERS) as one node, ``TYPE_CHECKING`` imports too."""
    modules = _tree_sources()
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in modules.items():
        mine = _prefix(module, LAYERS)
        assert mine is not None
        for imported, _ in imports_of(source, module, is_package):
            theirs = _prefix(imported, LAYERS) if imported.split(".")[0] in PACKAGES else None
            if theirs is not None and theirs != mine:
                graph.setdefault(mine, set()).add(theirs)
    cycles = import_cycles(graph)
    assert cycles == [], "packages that import each other: " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


#: packages whose modules never import each other both ways, not even for type hints: one
#: concept per module, a shared one (``offload/job.py``'s ``OffloadJob``) below its users
#: (ARCHITECTURE.md, issue 35: the plain and transformed writers shared a private class)
NO_TYPE_CYCLES = ("offloader.offload", "offloader.read", "offloader.topics")


def typed_import_graph(modules: dict[str, tuple[str, bool]], package: str) -> dict[str, set[str]]:
    """The modules of ``package`` -> the modules of ``package`` they import, at run time or
    for type checking (``TYPE_CHECKING`` imports included); the package's ``__init__`` (which
    re-exports its modules) is left out."""
    mine = {m: v for m, v in modules.items() if m.startswith(package + ".")}
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in mine.items():
        edges: set[str] = set()
        for imported, _ in imports_of(source, module, is_package):
            target = imported
            while target and target not in mine:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


@pytest.mark.parametrize("package", NO_TYPE_CYCLES)
def test_no_cycle_inside_the_package_even_for_type_hints(package: str) -> None:
    graph = typed_import_graph(_tree_sources(), package)
    assert len(graph) > 3, graph
    cycles = import_cycles(graph)
    assert cycles == [], "modules that import each other: " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_a_planted_type_hint_cycle_is_caught() -> None:
    planted = {
        "offloader.offload.a": ("from offloader.offload.b import B\n", False),
        "offloader.offload.b": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from offloader.offload.a import A\n",
            False,
        ),
        "offloader.offload.c": ("from offloader.offload.b import B\n", False),
        "offloader.offload": ("from offloader.offload.a import A\n", True),
    }
    assert import_cycles(import_graph(planted)) == []  # the run-time rule lets it pass
    assert import_cycles(typed_import_graph(planted, "offloader.offload")) == [
        ["offloader.offload.a", "offloader.offload.b"]
    ]


def test_a_planted_cycle_is_caught() -> None:
    planted = {
        "offloader.spark.a": ("from offloader.spark.b import x\n", False),
        "offloader.spark.b": ("def f():\n    from offloader.spark.c import y\n", False),
        "offloader.spark.c": ("import offloader.spark.a\n", False),
        "offloader.spark.d": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from offloader.spark.a import x\nfrom offloader.spark import e\n",
            False,
        ),
        "offloader.spark": ("from offloader.spark.d import z\n", True),
    }
    assert import_cycles(import_graph(planted)) == [
        ["offloader.spark.a", "offloader.spark.b", "offloader.spark.c"]
    ]


# --- the one exception tree --------------------------------------------------------------------
#: the modules that define exception classes: the tree's root and codec errors, each codec
#: family's errors (subclasses of FormatError), and the engine's errors
ERROR_MODULES = (
    "formats.errors",
    "formats.pulsar.errors",
    "formats.kafka.errors",
    "offloader.errors",
)
#: internal signals raised and caught inside one flow, never seen by a caller
INTERNAL_SIGNALS = {
    "offloader.kafka.segments.SegmentGone",
    # malformed bytes inside the metadata record decoder, typed (with the source) on the way out
    "formats.kafka.metadata_records._Bad",
}


def test_exceptions_live_in_the_one_tree() -> None:
    import importlib
    import inspect

    from offloader.errors import OffloaderError

    misplaced = []
    for module, _, _ in project_modules():
        loaded = importlib.import_module(module)
        for name, cls in inspect.getmembers(loaded, inspect.isclass):
            if not issubclass(cls, BaseException) or cls.__module__ != module:
                continue
            if f"{module}.{name}" in INTERNAL_SIGNALS:
                continue
            if module not in ERROR_MODULES:
                misplaced.append(f"{module}.{name} is defined outside {', '.join(ERROR_MODULES)}")
            elif not issubclass(cls, OffloaderError):
                misplaced.append(f"{module}.{name} does not derive from OffloaderError")
    assert misplaced == [], "\n".join(misplaced)
