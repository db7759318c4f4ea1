"""Helpers of the hardening tests: a topic offloaded to a home's file store, and object edits
done the way a hostile or broken writer would (through the store's own API, so the same edit
works on S3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from offloader.store import LocalObjectStore, ObjectStore
from tests.cli.helpers import json_lines, ok


def offloaded_topic(
    home: Path, *, entries: int = 2000, size: int = 100, per_ledger: int = 2000, block: str = ""
) -> list[dict[str, object]]:
    """``persistent://public/default/t`` with ``entries`` entries, every closed ledger
    offloaded and its local copy deleted (reads come from the store); its ledgers (info)."""
    ok(home, "namespaces", "create", "public/default")
    ok(
        home,
        "topics", "produce", "t", "--synthetic", str(entries), "--size", str(size),
        "--max-entries-per-ledger", str(per_ledger), "--min-rollover-time", "0",
        *(("--max-block-size", block) if block else ()),
    )  # fmt: skip
    ok(
        home,
        "topics",
        "offload-prefix",
        "t",
        "-s",
        "0",
        *(("--max-block-size", block) if block else ()),
    )
    ok(home, "namespaces", "set-offload-deletion-lag", "public/default", "-l", "0")
    ok(home, "service", "run", "--once")
    (info,) = json_lines(ok(home, "--json", "topics", "info", "t"))
    ledgers: list[dict[str, object]] = info["ledgers"]  # type: ignore[assignment]
    return ledgers


def file_store(home: Path) -> LocalObjectStore:
    return LocalObjectStore(home / "objects", create=False)


def ledger_keys(ledgers: list[dict[str, object]], ledger_id: int) -> tuple[str, str]:
    """(data key, index key) of an offloaded ledger."""
    (record,) = [r for r in ledgers if r["ledger_id"] == ledger_id]
    uuid = record["uuid"]
    return f"{uuid}-ledger-{ledger_id}", f"{uuid}-ledger-{ledger_id}-index"


def rewrite(
    store: ObjectStore,
    key: str,
    edit: Callable[[bytearray], bytes | bytearray],
    metadata: dict[str, str] | None = None,
) -> None:
    """Replace ``key`` with ``edit(its bytes)``, keeping its user metadata unless given."""
    got = store.get(key)
    store.put(
        key, bytes(edit(bytearray(got.data))), dict(got.metadata) if metadata is None else metadata
    )


def flip(position: int) -> Callable[[bytearray], bytearray]:
    def edit(data: bytearray) -> bytearray:
        data[position] ^= 1
        return data

    return edit
