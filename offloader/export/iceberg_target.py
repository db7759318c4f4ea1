"""An Iceberg export target as values: ``iceberg://NAMESPACE.TABLE``, its catalog and warehouse,
and the watermarks a table carries. Pure: no pyiceberg, no I/O.

The catalog is a URI: ``sqlite:///path`` (the default: ``<home>/iceberg/catalog.db``, with the
warehouse beside it in ``<home>/iceberg/warehouse``), ``postgresql://...`` (the cluster's
PostgreSQL), or ``http(s)://...`` (a REST catalog, passed through to pyiceberg). The warehouse
is a local directory, ``s3://bucket/prefix`` on the store's S3 endpoint settings,
``gs://bucket/prefix`` or ``az://container/prefix`` (each cloud's own environment).

Each commit of an export run carries, in its snapshot summary and in the table's properties
(one atomic metadata commit), every topic's watermark: ``ledger-offloader.watermark.<topic>`` =
``<ledger>:<entry>`` and ``ledger-offloader.publish-time.<topic>`` = epoch ms. The next run
reads them back from the table, so the rows and the watermark never disagree.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from offloader.errors import ConfigError, IcebergError

__all__ = [
    "PUBLISH_PREFIX",
    "RESET_KEY",
    "RUN_KEY",
    "SCHEME",
    "SETTINGS_KEY",
    "SORT_COLUMNS",
    "WATERMARK_PREFIX",
    "IcebergTarget",
    "TableWatermark",
    "is_iceberg_url",
    "metadata_version",
    "newest_metadata",
    "parse_table_name",
    "resolve_target",
    "watermark_properties",
    "watermarks_from",
]

SCHEME = "iceberg://"
#: the sort order of a Pulsar topic's table (a Kafka topic's: ``partition, offset``)
SORT_COLUMNS = ("ledger_id", "entry_id", "batch_index")
WATERMARK_PREFIX = "ledger-offloader.watermark."
PUBLISH_PREFIX = "ledger-offloader.publish-time."
#: in the summary of the snapshot ``export reset`` commits: the watermark key it moved back
RESET_KEY = "ledger-offloader.reset"
#: in the summary of every snapshot an export run commits: the run's id
RUN_KEY = "ledger-offloader.run"
#: a table property: the settings that shape the table (partitioning, time field, value columns)
SETTINGS_KEY = "ledger-offloader.settings"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: a table metadata file's name: pyiceberg's and Java's ``00003-<uuid>.metadata.json``, or
#: the Hadoop tables' ``v3.metadata.json`` (compressed: ``.gz.metadata.json``)
_METADATA_FILE = re.compile(r"^(?:(\d+)-[^/]+|v(\d+))(?:\.gz)?\.metadata\.json$")
_CATALOG_SCHEMES = ("sqlite", "postgresql", "postgres", "http", "https")

Position = tuple[int, int]


def is_iceberg_url(text: str) -> bool:
    return str(text).strip().lower().startswith(SCHEME)


def parse_table_name(text: str) -> tuple[tuple[str, ...], str]:
    """``(namespace levels, table)`` of ``iceberg://NS.TABLE`` or ``NS.TABLE`` (``a.b.t``: the
    namespace ``a.b``). Names are letters, digits and ``_``."""
    raw = str(text).strip()
    name = raw[len(SCHEME) :] if raw.lower().startswith(SCHEME) else raw
    parts = name.split(".")
    if len(parts) < 2 or not all(_NAME.match(p) for p in parts):
        raise ConfigError(
            f"Iceberg table {raw!r}: expected iceberg://NAMESPACE.TABLE "
            "(letters, digits and _; e.g. iceberg://pulsar.orders)"
        )
    return tuple(parts[:-1]), parts[-1]


def normalize_catalog(uri: str) -> str:
    """A catalog URI pyiceberg's SQL or REST catalog takes; a plain path is a SQLite file."""
    text = str(uri).strip()
    scheme = urlsplit(text).scheme.lower()
    if "://" not in text:
        return "sqlite:///" + os.path.abspath(os.path.expanduser(text))
    if scheme.split("+")[0] not in _CATALOG_SCHEMES:
        raise ConfigError(
            f"--catalog {text!r}: give sqlite:///PATH, postgresql://HOST/DB or a REST "
            "catalog's http(s):// URL"
        )
    return text


def normalize_warehouse(url: str) -> str:
    """``s3://bucket/prefix``, ``gs://bucket/prefix``, ``az://container/prefix`` (no trailing
    slash) or ``file:///absolute/dir``."""
    text = str(url).strip()
    parts = urlsplit(text)
    if parts.scheme in ("s3", "s3a", "gs", "az"):
        scheme = "s3" if parts.scheme == "s3a" else parts.scheme
        if not parts.netloc or "@" in parts.netloc:
            raise ConfigError(
                f"--warehouse {text!r}: expected {scheme}://bucket/prefix (no credentials)"
            )
        prefix = parts.path.strip("/")
        return f"{scheme}://{parts.netloc}" + (f"/{prefix}" if prefix else "")
    if parts.scheme == "file":
        text = parts.path
    elif parts.scheme and len(parts.scheme) > 1:
        raise ConfigError(
            f"--warehouse {text!r}: give a local directory, s3://bucket/prefix, "
            "gs://bucket/prefix or az://container/prefix"
        )
    return "file://" + os.path.abspath(os.path.expanduser(text))


def catalog_kind(uri: str) -> str:
    """``sql`` or ``rest``."""
    return "rest" if urlsplit(uri).scheme.lower() in ("http", "https") else "sql"


@dataclass(frozen=True)
class IcebergTarget:
    """Where an Iceberg export goes (picklable; no secrets: S3 credentials come from the
    ``AWS_*`` environment, a PostgreSQL password from the URI the user gave)."""

    namespace: tuple[str, ...]
    table: str
    catalog_uri: str
    warehouse: str
    endpoint_url: str | None = None
    region: str | None = None

    @property
    def identifier(self) -> str:
        return ".".join((*self.namespace, self.table))

    @property
    def url(self) -> str:
        return SCHEME + self.identifier

    @property
    def default_location(self) -> str:
        """Where the catalog puts the table by default: ``<warehouse>/<namespace>/<table>``."""
        return f"{self.warehouse}/{'.'.join(self.namespace)}/{self.table}"

    @property
    def catalog_kind(self) -> str:
        return catalog_kind(self.catalog_uri)

    @property
    def catalog_display(self) -> str:
        """The catalog URI without a password (for logs and status)."""
        parts = urlsplit(self.catalog_uri)
        if parts.password is None:
            return self.catalog_uri
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()


def default_catalog(home: Path | str) -> str:
    return "sqlite:///" + str(Path(home).resolve() / "iceberg" / "catalog.db")


def default_warehouse(home: Path | str) -> str:
    return "file://" + str(Path(home).resolve() / "iceberg" / "warehouse")


def resolve_target(
    url: str,
    home: Path | str,
    *,
    catalog: str | None = None,
    warehouse: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> IcebergTarget:
    """The target ``iceberg://NS.TABLE`` names, with the defaults of ``home``."""
    namespace, table = parse_table_name(url)
    return IcebergTarget(
        namespace,
        table,
        normalize_catalog(catalog) if catalog else default_catalog(home),
        normalize_warehouse(warehouse) if warehouse else default_warehouse(home),
        endpoint_url,
        region,
    )


def metadata_version(url: str) -> int | None:
    """The version number in a table metadata file's name (None: not a metadata file)."""
    m = _METADATA_FILE.match(url.rpartition("/")[2])
    if m is None:
        return None
    return int(m.group(1) if m.group(1) is not None else m.group(2))


def newest_metadata(table: str, urls: Sequence[str]) -> str | None:
    """Of the files in a table's ``metadata/`` directory, the metadata file with the highest
    version number (None when there is none). Two files of that version are two writers that
    raced for one commit, and which one the lost catalog held cannot be told: IcebergError
    naming both (``table`` names the table)."""
    versions: dict[int, list[str]] = {}
    for url in urls:
        version = metadata_version(url)
        if version is not None:
            versions.setdefault(version, []).append(url)
    if not versions:
        return None
    top = max(versions)
    candidates = sorted(versions[top])
    if len(candidates) > 1:
        raise IcebergError(
            f"{table}: {len(candidates)} metadata files of version {top} "
            f"({', '.join(candidates)}): two writers raced for one commit; remove the one "
            "the catalog did not hold, then rebuild again"
        )
    return candidates[0]


@dataclass(frozen=True)
class TableWatermark:
    """A topic's watermark as a table carries it: every entry up to ``position`` is in it."""

    topic: str
    position: Position
    publish_time_ms: int | None = None


def watermark_properties(marks: Mapping[str, TableWatermark]) -> dict[str, str]:
    out: dict[str, str] = {}
    for topic, mark in marks.items():
        out[WATERMARK_PREFIX + topic] = f"{mark.position[0]}:{mark.position[1]}"
        if mark.publish_time_ms is not None:
            out[PUBLISH_PREFIX + topic] = str(mark.publish_time_ms)
    return out


def watermarks_from(props: Mapping[str, str]) -> dict[str, TableWatermark]:
    """The watermarks in a snapshot summary or a table's properties (malformed ones refused:
    a watermark guessed wrong would export rows twice or skip them)."""
    out: dict[str, TableWatermark] = {}
    for key, value in props.items():
        if not key.startswith(WATERMARK_PREFIX):
            continue
        topic = key[len(WATERMARK_PREFIX) :]
        ledger, sep, entry = str(value).partition(":")
        try:
            position = (int(ledger), int(entry))
        except ValueError:
            position = None
        if not sep or position is None:
            raise ConfigError(f"table property {key}={value!r}: expected LEDGER:ENTRY")
        publish = props.get(PUBLISH_PREFIX + topic)
        out[topic] = TableWatermark(
            topic, position, int(publish) if publish and publish.lstrip("-").isdigit() else None
        )
    return out


def settings_fingerprint(
    partition_by: str, time_field: str, value_format: str, flatten: bool
) -> str:
    """The settings a table's layout depends on (a run with others is refused). The value's
    schema is not among them: a gained field evolves the table's schema by name."""
    return json.dumps(
        {
            "partition_by": partition_by,
            "time_field": time_field,
            "value_format": value_format,
            "flatten": flatten,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def time_column(time_field: str, flatten: bool) -> tuple[str, ...]:
    """The column path the time partition is computed from: ``publish_time``, ``event_time``,
    or the decoded value's field (``value_decoded.<path>``, or ``value_<field>`` flattened)."""
    if time_field in ("publish_time", "event_time"):
        return (time_field,)
    path = tuple(time_field.removeprefix("value.").split("."))
    if flatten:
        return (f"value_{path[0]}", *path[1:])
    return ("value_decoded", *path)


def path_of(uri: str) -> str:
    """A file URI as a path of pyarrow's filesystem (``bucket/key`` on S3)."""
    parts = urlsplit(uri)
    if parts.scheme in ("s3", "s3a"):
        return parts.netloc + parts.path
    return parts.path if parts.scheme == "file" else uri
