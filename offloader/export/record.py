"""The watermark record of a Parquet export target: its object name and its body (pure).

The metadata store is the fast path of an export's watermark; the record is the target's own
copy of it, so that ``metadata rebuild --export-target URL`` recreates the watermark exactly
after the home is lost (spec/export.md §5a). One small JSON object per ``(topic key,
generation)``::

    <target>/_offloader/watermarks/g<generation>-<first 32 hex digits of SHA-256(key)>.json

``key`` is the watermark's topic key (a Pulsar topic, ``kafka:<topic>:<partition>``,
``pulsar-cluster:<cluster>|<topic>``), held in full in the body. The directory's leading
underscore keeps readers away: Spark's and Hive's file listings skip names that begin with
``_`` or ``.``, and ``**/*.parquet`` (DuckDB, pyarrow) never matches a ``.json`` file.
"""

from __future__ import annotations

import hashlib
import json
import re

from offloader.errors import ExportError
from offloader.metadata.export import watermark_record
from offloader.metadata.export_base import ExportWatermark

__all__ = [
    "FORMAT",
    "RECORDS_DIR",
    "decode_record",
    "encode_record",
    "is_record_path",
    "record_path",
]

#: the directory of the records, relative to the target's root
RECORDS_DIR = "_offloader/watermarks"
FORMAT = "ledger-offloader/export-watermark"
VERSION = 1
_NAME = re.compile(r"^g(\d+)-[0-9a-f]{32}\.json$")
_INTS = ("generation", "ledger_id", "entry_id", "rows", "files", "invalid_rows", "updated_ms")


def record_path(topic_key: str, generation: int) -> str:
    """The record's path relative to the target's root."""
    digest = hashlib.sha256(topic_key.encode("utf-8")).hexdigest()[:32]
    return f"{RECORDS_DIR}/g{generation}-{digest}.json"


def is_record_path(relative: str) -> bool:
    """Whether ``relative`` (to the target's root) names a record."""
    head, _, name = relative.rpartition("/")
    return head == RECORDS_DIR and _NAME.match(name) is not None


def encode_record(w: ExportWatermark) -> bytes:
    """The body: UTF-8 JSON, keys sorted, one line."""
    body = {
        "format": FORMAT,
        "version": VERSION,
        "target": w.target,
        "topic": w.topic,
        "generation": w.generation,
        "ledger_id": w.ledger_id,
        "entry_id": w.entry_id,
        "publish_time_ms": w.publish_time_ms,
        "settings": w.settings,
        "rows": w.rows,
        "files": w.files,
        "invalid_rows": w.invalid_rows,
        "updated_ms": w.updated_ms,
    }
    return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def decode_record(data: bytes, where: str) -> ExportWatermark:
    """The watermark a record holds; ExportError naming ``where`` for anything else."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ExportError(f"export watermark record {where}: not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ExportError(f"export watermark record {where}: not a {FORMAT} object")
    if body.get("version") != VERSION:
        raise ExportError(
            f"export watermark record {where}: version {body.get('version')!r} "
            f"(this ledger-offloader reads {VERSION})"
        )
    bad = [k for k in _INTS if type(body.get(k)) is not int]
    publish = body.get("publish_time_ms")
    if publish is not None and type(publish) is not int:
        bad.append("publish_time_ms")
    bad += [k for k in ("target", "topic", "settings") if not isinstance(body.get(k), str)]
    if bad:
        raise ExportError(f"export watermark record {where}: bad field(s) {', '.join(bad)}")
    mark = watermark_record(body)
    if record_path(mark.topic, mark.generation).rpartition("/")[2] != where.rpartition("/")[2]:
        raise ExportError(
            f"export watermark record {where}: holds {mark.topic} generation "
            f"{mark.generation}, which is not its name"
        )
    return mark
