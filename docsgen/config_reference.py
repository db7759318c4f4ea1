"""The configuration reference, generated from the settings tables of the code.

The keys of ``offloader.toml`` come from the sets :mod:`cli.config_file` and
:mod:`cli.config_transform` check the file against; the defaults from
:class:`~offloader.api.BrokerSettings` (and its :class:`~offloader.config.OffloadSettings`);
each ``[broker]`` key's description from the help of the command-line option that sets it
(:mod:`cli.settings`), or from :data:`DESCRIPTIONS` for the keys no option sets. The
environment variables come from the click tree's options and :data:`ENVIRONMENT`.
``tests/docs/test_docsgen.py`` checks that every key the code accepts is described here, and
nothing else: a key added to the code without a line here fails the build.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator

import click

from cli import config_file, config_transform, settings
from docsgen.cli_reference import escape
from offloader.api import BrokerSettings

#: the ``[broker]`` keys' defaults, as read from BrokerSettings (raw: bytes, seconds, ...)
BROKER_DEFAULTS: dict[str, Callable[[BrokerSettings], object]] = {
    "max_entries_per_ledger": lambda b: b.max_entries_per_ledger,
    "max_ledger_size": lambda b: b.max_ledger_size,
    "max_block_size": lambda b: b.offload.max_block_size,
    "read_buffer_size": lambda b: b.offload.read_buffer_size,
    "offload_concurrency": lambda b: b.offload.offload_concurrency,
    "one_request_upload_max": lambda b: b.offload.one_request_upload_max,
    "min_rollover_time": lambda b: b.min_rollover_seconds,
    "max_rollover_time": lambda b: b.max_rollover_seconds,
    "offload_deletion_lag": lambda b: b.default_deletion_lag_ms // 1000,
    "orphan_min_age": lambda b: b.orphan_min_age_seconds,
    "cluster_lease": lambda b: b.cluster_lease_seconds,
    "fsync": lambda b: b.fsync,
}

#: descriptions of the keys no command-line option describes: (table, key) -> text
DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("", "store"): "Object store: `s3://bucket[/prefix]`, `file:///abs/path` or a directory "
    "(`--store` and `$OFFLOADER_STORE` win; default `file://<home>/objects`).",
    ("", "metadata"): "Metadata store shared by several brokers, `postgresql://user@host:port/db` "
    "(`--metadata` and `$OFFLOADER_METADATA` win; default SQLite in `<home>/metadata.db`).",
    ("", "pulsar_metadata"): "A real Pulsar cluster's metadata store, "
    "`zk:host:port[,host:port][/chroot]`: `topics list|info|read`, `export run` and "
    "`objects orphans|gc` then work on that cluster's topics (`--pulsar-metadata` and "
    "`$OFFLOADER_PULSAR_METADATA` win).",
    ("", "kafka_metadata"): "A Kafka cluster's metadata, read-only, "
    "`zk://host:port[,host:port][/chroot]` (or `zk:...`) or `kraft:<metadata log dir>`: "
    "`kafka upload`, `kafka status` and `service run` then upload only the partitions this "
    "broker leads, of topics with `remote.storage.enable=true` (`--kafka-metadata` wins).",
    ("", "endpoint_url"): "S3 endpoint (MinIO, Ceph RGW, moto); `--endpoint-url` wins, "
    "`$AWS_ENDPOINT_URL_S3` / `$AWS_ENDPOINT_URL` apply when unset.",
    ("", "region"): "S3 region.",
    ("", "metrics_addr"): "`HOST:PORT` where `service run` serves Prometheus metrics "
    "(`--metrics-addr` wins; port 0 picks a free port).",
    ("", "broker"): "The `[broker]` table: rollover, offload, reads and the service (below).",
    ("", "transform"): "The `[transform]` table: chunking, and the compression and encryption "
    "of namespaces and Kafka topics that set none themselves (below).",
    ("", "kafka"): "The `[kafka]` table: the log directories `service run` uploads (below).",
    ("", "export"): "`[[export]]` tables: exports `service run` runs after each pass (below).",
    ("broker", "offload_deletion_lag"): "Delete the local copy of an offloaded ledger this "
    "long after its offload, when its namespace sets no deletion lag (`-1`: never).",
    ("broker", "one_request_upload_max"): "On `gs://` and `az://` stores: a ledger's data "
    "object of at most this size is sent in one request (framed whole in memory first) in "
    "place of parts composed (GCS) or blocks staged (Azure); `0`: always in parts (at most "
    "`256M`).",
    ("broker", "orphan_min_age"): "Objects younger than this are never treated as orphans "
    "(they may belong to a running offload).",
    ("broker", "cluster_lease"): "On a shared metadata store: how long a `service run`'s "
    "lease on cluster-wide work lasts without renewal.",
    ("broker", "fsync"): "Durability of local ledger appends: fsync every batch (`always`), "
    "`batch`, or `never`.",
    ("kafka", "log_dirs"): "Kafka log directories whose closed segments `service run` "
    "uploads on every pass (a list of paths).",
    ("kafka", "topics"): "Only these Kafka topics (default: all), in the one topic selection "
    "form: names or a regular expression (see the CLI reference, *Selecting topics*).",
    ("transform", "chunk_size"): "Original bytes per chunk of a transformed object "
    "(`64K`..`64M`, default `1M`).",
    ("transform", "chunk_cache_size"): "Cache of decoded chunks for repeated reads, per "
    "process (default `0`: off).",
    ("transform", "namespaces"): '`[transform.namespaces."tenant/ns"]`: the transform of a '
    "namespace that sets none with `namespaces set-offload-transform`.",
    ("transform", "kafka_topics"): '`[transform.kafka_topics."topic"]`: the transform of a '
    "Kafka topic that sets none with `kafka set-offload-transform`.",
    ("policy", "compression"): "`zstd` or `none` (default).",
    ("policy", "level"): "zstd level (default 3).",
    ("policy", "encryption"): "`aes-256-gcm` or `none` (default).",
    ("policy", "key_id"): "Key of the key ring (default: the ring's active key at offload time).",
    ("export", "topics"): "The topics to export: a list, each item in the one topic selection "
    "form (names, a namespace or a regular expression; see the CLI reference).",
    ("export", "to"): "A directory, `s3://bucket/prefix` or `iceberg://NAMESPACE.TABLE`.",
    ("export", "catalog"): "Iceberg catalog: `postgresql://...` or a REST catalog's URL "
    "(default: a SQLite catalog in the home).",
    ("export", "warehouse"): "Iceberg warehouse location (a directory or `s3://...`).",
    ("export", "partition_by"): "`dt,hr` (default for Parquet) or `dt` (default for Iceberg).",
    ("export", "time_field"): "`publish_time` (default), `event_time` or a field of the value.",
    ("export", "max_file_size"): "Cut files between entries past this size (default `128M`).",
    ("export", "generation"): "Output generation (default 1); changed settings need a new one.",
    ("export", "engine"): "`local` (default here: no JVM) or `spark`.",
    ("export", "value_format"): "`binary` (default), `json` or `avro`.",
    ("export", "schema"): 'With `value_format = "json"`: the value\'s schema as a DDL.',
    ("export", "avro_schema"): 'With `value_format = "avro"`: the writer schema (JSON).',
    ("export", "flatten"): "Decoded value fields as `value_<field>` columns (default false).",
    ("export", "endpoint_url"): "S3 endpoint of the target (default: the file's `endpoint_url`).",
}

#: environment variables read outside the click options' own `envvar`s: name -> text
ENVIRONMENT: dict[str, str] = {
    "OFFLOADER_KEY_RING": "The key ring file of the transforms (default `<home>/keys`).",
    "AWS_ENDPOINT_URL_S3": "S3 endpoint when neither `--endpoint-url` nor `endpoint_url` is set.",
    "AWS_ENDPOINT_URL": "The same, when `AWS_ENDPOINT_URL_S3` is not set.",
    "AWS_DEFAULT_REGION": "S3 region when none is configured.",
    "AWS_ACCESS_KEY_ID": "S3 credentials (with `AWS_SECRET_ACCESS_KEY`; or profiles, roles: "
    "the standard AWS chain). Credentials in a URL are refused.",
    "LEDGER_OFFLOADER_PURE_PYTHON": "`1`: use the pure-Python twins of the C loops.",
}


def broker_keys() -> set[str]:
    """Every ``[broker]`` key :mod:`cli.config_file` accepts."""
    return set(config_file._INT_KEYS | config_file._SIZE_KEYS | config_file._TIME_KEYS) | {"fsync"}


def accepted_keys() -> set[tuple[str, str]]:
    """Every ``(table, key)`` the code accepts in ``offloader.toml``."""
    keys = {("", key) for key in config_file._TOP_KEYS}
    keys |= {("broker", key) for key in broker_keys()}
    keys |= {("kafka", key) for key in ("log_dirs", "topics")}
    keys |= {("transform", key) for key in config_transform._KEYS}
    keys |= {("policy", key) for key in config_transform._POLICY_KEYS}
    keys |= {("export", key) for key in config_file._EXPORT_KEYS}
    return keys


def option_help() -> dict[str, str]:
    """``[broker]`` key -> the help of the option that sets it (``--max-block-size``)."""
    found: dict[str, str] = {}
    for name, decorator in (
        *settings._ROLLOVER_OPTIONS,
        *settings._OFFLOAD_OPTIONS,
        *settings._READ_OPTIONS,
    ):
        command = decorator(click.Command("x"))
        for param in command.params:
            if isinstance(param, click.Option) and param.help:
                found[name] = f"{param.help} Option: `{param.opts[0]}`."
    return found


def _kind(key: str) -> str:
    if key in config_file._INT_KEYS:
        return "integer"
    if key in config_file._SIZE_KEYS:
        return "size"
    if key in config_file._TIME_KEYS:
        return "time"
    if key == "fsync":
        return " \\| ".join(f'`"{v}"`' for v in config_file._FSYNC_VALUES)
    return "string"


def _default(key: str, value: object) -> str:
    if key in config_file._SIZE_KEYS and isinstance(value, int):
        return f'`"{_size(value)}"`'
    if key in config_file._TIME_KEYS and isinstance(value, int):
        return f'`"{_time(value)}"`'
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _size(n: int) -> str:
    for unit, factor in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % factor == 0 and n >= factor:
            return f"{n // factor}{unit}"
    return str(n)


def _time(seconds: int) -> str:
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % factor == 0 and seconds >= factor:
            return f"{seconds // factor}{unit}"
    return f"{seconds}s"


def _describe(table: str, key: str) -> str:
    return " ".join(DESCRIPTIONS[(table, key)].split()).replace("|", "\\|")


def _rows(table: str, keys: Iterator[str] | list[str]) -> list[str]:
    out = ["| key | description |", "| --- | --- |"]
    out += [f"| `{key}` | {_describe(table, key)} |" for key in keys]
    return out


def environment_variables(root: click.Command) -> dict[str, str]:
    """Every environment variable: the click options' (``--home`` ...) and :data:`ENVIRONMENT`."""
    from docsgen.cli_reference import walk

    found: dict[str, str] = {}
    for path in walk(root):
        command = root
        for name in path:
            assert isinstance(command, click.Group)
            sub = command.get_command(click.Context(command), name)
            assert sub is not None
            command = sub
        for param in command.params:
            if isinstance(param, click.Option) and param.envvar:
                names = [param.envvar] if isinstance(param.envvar, str) else param.envvar
                for env in names:
                    where = " ".join(("offloader", *path, param.opts[0]))
                    found.setdefault(env, f"The default of `{where}`: {param.help or ''}")
    found.update(ENVIRONMENT)
    return dict(sorted(found.items()))


def docstring_example(module: object) -> str:
    """The TOML example of a module's docstring: the block after its first ``::`` (indented
    lines, or everything to the end when the block is not indented)."""
    doc = getattr(module, "__doc__", None) or ""
    lines = doc.split("::", 1)[1].split("\n")[1:]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith((" ", "\t")):
        block = []
        for line in lines:
            if line.strip() and not line.startswith((" ", "\t")):
                break
            block.append(line)
        lines = block
    return textwrap.dedent("\n".join(lines)).strip("\n")


def render(root: click.Command) -> str:
    """The whole reference as Markdown."""
    base = BrokerSettings()
    helps = option_help()
    lines = [
        "# Configuration reference",
        "",
        "Generated from the code by `docsgen/config_reference.py` when the site is built. "
        "Settings come from, highest first: the command's options, `<home>/offloader.toml`, "
        "Pulsar's defaults. Every key of the file is optional; an unknown key or a bad value "
        "is an error naming the file and the key (exit 1). Sizes and times are strings "
        '(`"64M"`, `"10m"`) or whole numbers (bytes, seconds).',
        "",
        "## Example",
        "",
        "From the code's own documentation (`cli/settings.py`, `cli/config_transform.py`):",
        "",
        "```toml",
        docstring_example(settings),
        "",
        docstring_example(config_transform),
        "```",
        "",
        "## Top-level keys",
        "",
        *_rows("", sorted(config_file._TOP_KEYS)),
        "",
        "## `[broker]`",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for key in sorted(broker_keys()):
        text = helps.get(key) or DESCRIPTIONS[("broker", key)]
        text = escape(" ".join(text.split())).replace("|", "\\|")
        default = _default(key, BROKER_DEFAULTS[key](base))
        lines.append(f"| `{key}` | {_kind(key)} | {default} | {text} |")
    lines += [
        "",
        "## `[kafka]`",
        "",
        *_rows("kafka", ["log_dirs", "topics"]),
        "",
        "## `[transform]`",
        "",
        *_rows("transform", sorted(config_transform._KEYS)),
        "",
        'Each `[transform.namespaces."..."]` and `[transform.kafka_topics."..."]` table '
        "takes these keys:",
        "",
        *_rows("policy", sorted(config_transform._POLICY_KEYS)),
        "",
        "## `[[export]]`",
        "",
        *_rows("export", sorted(config_file._EXPORT_KEYS)),
        "",
        "## Environment variables",
        "",
        "| variable | meaning |",
        "| --- | --- |",
    ]
    for name, text in environment_variables(root).items():
        lines.append(f"| `{name}` | {' '.join(text.split()).replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"
