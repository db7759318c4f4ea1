"""The MkDocs hook of the documentation site (``hooks:`` in ``mkdocs.yml``).

At build time it adds to the site, as generated files (nothing is written into ``docs/``):
the command-line reference (:mod:`docsgen.cli_reference`), the configuration reference
(:mod:`docsgen.config_reference`), the performance page (:mod:`docsgen.performance`), and the
repository's own ``spec/*.md``, ``ARCHITECTURE.md`` and ``CHANGELOG.md``, whose relative links
are mapped to their pages in the site (a link to a source file becomes its path as code).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
#: a fence's unquoted title (```` ```hex title=NAME ````, the tests' marker), which
#: pymdownx.superfences only reads quoted
_FENCE_TITLE = re.compile(r"^(\s*```+\s*[\w-]+\s+title=)([^\s\"]+)\s*$", re.MULTILINE)


def quote_fence_titles(markdown: str) -> str:
    """```` ```hex title=NAME ```` as ```` ```hex title="NAME" ```` (the same fence)."""
    return _FENCE_TITLE.sub(r'\1"\2"', markdown)


def included() -> dict[str, str]:
    """Repository file (relative to the root) -> its page in the site."""
    pages = {f"spec/{p.name}": f"spec/{p.name}" for p in sorted((ROOT / "spec").glob("*.md"))}
    pages["ARCHITECTURE.md"] = "architecture.md"
    pages["CHANGELOG.md"] = "changelog.md"
    return pages


def rewrite_links(text: str, source: str, pages: dict[str, str]) -> str:
    """``text`` of repository file ``source`` with its relative links pointing at the site's
    pages (relative to where ``source`` lands); a link to any other file becomes its path."""
    here = PurePosixPath(pages[source]).parent

    def replace(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = _normalize(PurePosixPath(source).parent / path)
        if resolved in pages:
            new = _relative(PurePosixPath(pages[resolved]), here)
            return f"[{label}]({new}{'#' + anchor if anchor else ''})"
        return label if label.startswith("`") else f"{label} (`{resolved}`)"

    return _LINK.sub(replace, text)


def _normalize(path: PurePosixPath) -> str:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def _relative(target: PurePosixPath, here: PurePosixPath) -> str:
    up = len(here.parts)
    return "/".join([".."] * up + list(target.parts)) if up else str(target)


def generated_pages() -> dict[str, str]:
    """Site path -> Markdown of every page made at build time."""
    if str(ROOT) not in sys.path:  # mkdocs loads this file by path, and restores sys.path
        sys.path.insert(0, str(ROOT))
    from cli.main import cli
    from docsgen import cli_reference, config_reference, performance

    pages = {
        "reference/cli.md": cli_reference.render(cli),
        "reference/configuration.md": config_reference.render(cli),
        "performance.md": performance.render(ROOT / "bench" / "results"),
    }
    table = included()
    for source, page in table.items():
        pages[page] = rewrite_links((ROOT / source).read_text(), source, table)
    return pages


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for path, content in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            raise ValueError(f"docs/{path} would hide the generated page: remove it")
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return quote_fence_titles(markdown)
