"""The examples' place in the tree: examples/, bench/ and devservers/ never import tests/
(tests may import them), devservers/ imports neither examples/ nor bench/, and every example
module runs in the test suite (``make demo`` or ``make tour`` reaches it; their tests are
tests/examples/test_demo.py and test_tour.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    """The absolute module names ``path`` imports (function-level imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def examples_run(path: Path) -> set[str]:
    """The example modules ``path`` runs as ``demo.example("NAME", ...)`` (a subprocess)."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "example"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def example_modules() -> set[str]:
    return {p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__"}


@pytest.mark.parametrize(
    ("package", "banned"),
    [
        ("examples", ("tests",)),
        ("bench", ("tests",)),
        ("devservers", ("tests", "examples", "bench")),
    ],
)
def test_package_does_not_import(package: str, banned: tuple[str, ...]) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in sorted(imported_modules(path))
        if name.split(".")[0] in banned
    ]
    assert found == []


def test_imports_are_found() -> None:
    """The walk above sees module-level and function-level imports (a planted example)."""
    source = ROOT / "examples" / "cluster_demo.py"
    assert "devservers.postgres" in imported_modules(source)
    assert "examples.harness" in imported_modules(source)


def test_every_example_is_reached_by_the_demo_or_the_tour() -> None:
    """Follow the imports and ``demo.example(...)`` runs from examples/demo.py and tour.py:
    every module of examples/ is reached, so their two tests run every example."""
    reached: set[str] = set()
    todo = ["demo", "tour"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        path = ROOT / "examples" / f"{name}.py"
        todo += [m.split(".")[1] for m in imported_modules(path) if m.startswith("examples.")]
        todo += sorted(examples_run(path))
    assert reached == example_modules()
    assert {"spark_count", "spark_messages", "spark_export", "kafka_spark"} <= reached
