"""The MetadataStore backends the contract suite runs against, by name.

A backend is a name, a way to pick a fresh location under a temporary directory, and a way to
open a store at a location. Locations are strings so worker processes (spawned, not forked) can
open their own store. A new backend (PostgreSQL, ...) plugs in by adding an entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from offloader.metadata.base import MetadataStore
from offloader.metadata.sqlite import SqliteMetadataStore


@dataclass(frozen=True)
class Backend:
    name: str
    new_location: Callable[[Path], str]
    open: Callable[[str], MetadataStore]


def _sqlite_location(tmp_path: Path) -> str:
    return str(tmp_path / "metadata.db")


def _sqlite_open(location: str) -> MetadataStore:
    return SqliteMetadataStore(location)


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend("sqlite", _sqlite_location, _sqlite_open),
}


def open_backend(name: str, location: str) -> MetadataStore:
    return BACKENDS[name].open(location)
