"""The guides' examples run as written, like the README's quickstart (tests/test_readme.py).

In each page under ``docs/``, these fenced blocks are examples that run, in the order they
appear, in one fresh directory per page (so the default home ``./.offloader`` and its file
store are used, and a page's later blocks see what its earlier ones did):

* ```` ```console ```` (any title): every ``$ offloader ...`` line is run in-process through
  click's CliRunner; the lines after it are its expected output, compared line by line, where a
  line ``...`` stands for any number of lines. Every command must exit 0.
* ```` ```python title=run ````: executed as a script; when the next block is
  ```` ```text title=output ````, what the script printed must equal it (``...`` allowed).

Every other block is not run: ```` ```shell ````, plain ```` ```python ````, ```` ```toml ````,
```` ```yaml ````, ```` ```text ```` and indented blocks. Write an example that needs S3,
Kafka, PostgreSQL, Spark or more than a few seconds that way, and one that runs quickly and
offline on the file store as ```` ```console ````.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.test_readme import matches

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w+)[ \t]*([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    kind: str  # "console" or "python"
    body: str
    #: the python block's expected output (None: not compared)
    output: str | None = None


def _title(info: str) -> str:
    match = re.search(r'title="?([^"\s]+)"?', info)
    return match.group(1) if match else ""


def runnable_blocks(text: str) -> list[Block]:
    """The blocks of a page that run, in order."""
    fences = [(m.group(1), _title(m.group(2)), m.group(3)) for m in FENCE.finditer(text)]
    blocks = []
    for i, (lang, title, body) in enumerate(fences):
        if lang == "console":
            blocks.append(Block("console", body))
        elif lang == "python" and title == "run":
            following = fences[i + 1] if i + 1 < len(fences) else None
            output = None
            if following and following[0] == "text" and following[1] == "output":
                output = following[2]
            blocks.append(Block("python", body, output))
    return blocks


def console_steps(body: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line.rstrip())
        else:
            raise AssertionError(f"a console block must start with a $ line: {line!r}")
    return steps


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if runnable_blocks(p.read_text()))


def test_the_guides_have_examples_that_run() -> None:
    names = {str(p.relative_to(DOCS)) for p in pages()}
    assert {"guides/offload-and-read.md", "guides/export.md", "guides/transforms.md"} <= names


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_doc_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("OFFLOADER_HOME", "OFFLOADER_STORE", "OFFLOADER_METADATA", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for block in runnable_blocks(page.read_text()):
        if block.kind == "console":
            for command, expected in console_steps(block.body):
                argv = shlex.split(command)
                assert argv[0] == "offloader", (page.name, command)
                result = CliRunner().invoke(cli, argv[1:])
                assert result.exit_code == 0, (command, result.output, result.exception)
                actual = [line.rstrip() for line in result.stdout.splitlines()]
                assert matches(expected, actual), (command, expected, actual)
        else:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(block.body, f"{page.name}:python", "exec"), {"__name__": "__doc__"})
            if block.output is not None:
                expected = [line.rstrip() for line in block.output.splitlines()]
                actual = [line.rstrip() for line in printed.getvalue().splitlines()]
                assert matches(expected, actual), (page.name, expected, actual)


def test_blocks_are_found_as_documented() -> None:
    text = (
        "```console\n$ offloader topics list\n```\n"
        "```shell\noffloader topics list\n```\n"
        '```python title="run"\nprint(1)\n```\n'
        "```text title=output\n1\n```\n"
        "```python\nprint(2)\n```\n"
    )
    blocks = runnable_blocks(text)
    assert [(b.kind, b.output) for b in blocks] == [("console", None), ("python", "1\n")]
    with pytest.raises(AssertionError):
        console_steps("no dollar\n")
