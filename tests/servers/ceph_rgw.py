"""Placeholder: the Ceph RGW helper is being written (see issue 8)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers.endpoint import S3Endpoint


def unavailable_reason() -> str | None:
    if shutil.which("radosgw") is None:
        return "radosgw is not installed"
    return "the RGW fixture is not written yet"


@contextmanager
def start_rgw(base: Path) -> Iterator[S3Endpoint]:
    raise RuntimeError("not implemented yet")
    yield  # pragma: no cover
