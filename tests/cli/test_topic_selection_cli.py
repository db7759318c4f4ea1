"""Issue 35, "list options take one form everywhere": ``kafka upload --topics``, ``metadata
rebuild --topics`` and ``export run TOPICS...`` take the same selection (comma-separated
names, a namespace, or a full-match regex), show the same metavar and help sentence, and refuse
bad text with the same one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offloader.selection import TOPICS_HELP, TOPICS_METAVAR
from tests.cli.helpers import json_lines, ok, one_line_error, run
from tests.cli.test_metadata_rebuild_cli import populated
from tests.kafka.logdir import write_partition
from tests.spark.export_helpers import Clock, new_home, produce_ledger


def _flat(text: str) -> str:
    return "".join(text.split())  # click wraps lines, at hyphens too


@pytest.mark.parametrize(
    "command",
    [("kafka", "upload"), ("metadata", "rebuild"), ("service", "run"), ("export", "run")],
)
def test_one_metavar_and_one_help_sentence(tmp_path: Path, command: tuple[str, ...]) -> None:
    shown = _flat(ok(tmp_path, *command, "--help").stdout)
    assert _flat(TOPICS_HELP) in shown
    assert TOPICS_METAVAR in shown and "REGEX" not in shown


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for topic in ("orders", "orders.v1", "ordersXv1", "clicks"):
        write_partition(root, topic, 0, records=60, segment_bytes=2048)
    return root


def _uploaded(tmp_path: Path, log_dir: Path, topics: str) -> set[str]:
    home = tmp_path / f"home-{abs(hash(topics))}"
    lines = json_lines(
        ok(home, "--json", "kafka", "upload", "--log-dir", str(log_dir), "--once",
           "--part-size", "5M", "--topics", topics)
    )  # fmt: skip
    return {line["topic"] for line in lines if line.get("outcome") == "uploaded"}


def test_kafka_upload_names_regex_and_errors(tmp_path: Path, log_dir: Path) -> None:
    assert _uploaded(tmp_path, log_dir, "orders, clicks") == {"orders", "clicks"}
    # '.' is a name character: an exact name, not "any character"
    assert _uploaded(tmp_path, log_dir, "orders.v1") == {"orders.v1"}
    # a regex (full match), as --topics REGEX was
    assert _uploaded(tmp_path, log_dir, "orders.*") == {"orders", "orders.v1", "ordersXv1"}
    assert _uploaded(tmp_path, log_dir, "regex:orders.v1") == {"orders.v1", "ordersXv1"}
    upload = ("kafka", "upload", "--log-dir", str(log_dir), "--once", "--topics")
    line = one_line_error(run(tmp_path / "h", *upload, "public/default"))
    assert "public/default is a Pulsar namespace" in line
    line = one_line_error(run(tmp_path / "h", *upload, "orders["))
    assert line.startswith("error: topics 'orders[' is not a regular expression")


def test_metadata_rebuild_names_in_every_form_a_namespace_and_a_regex(tmp_path: Path) -> None:
    home, store, _ = populated(tmp_path)

    def recorded(topics: str) -> str:
        out = ok(home, "--store", store, "metadata", "rebuild", "--dry-run", "--topics", topics)
        return out.stdout.splitlines()[-1]

    one, two = "in 1 topic(s)", "in 2 topic(s)"
    assert one in recorded("tenant/ns/t2")
    assert one in recorded("persistent://tenant/ns/t1")
    assert two in recorded("tenant/ns/t1, persistent://tenant/ns/t2")
    assert two in recorded("tenant/ns")
    assert one in recorded("tenant/ns/t[2-9]")  # a regex over the t/ns/x form
    assert "in 0 topic(s)" in recorded("other/ns")
    line = one_line_error(run(home, "--store", store, "metadata", "rebuild", "--topics", "a/b/c/d"))
    assert "invalid short topic name 'a/b/c/d'" in line


def test_export_run_takes_a_namespace_and_a_regex(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    topics = ["persistent://public/default/orders", "persistent://public/default/clicks"]
    with new_home(home, clock) as off:
        for topic in topics:
            produce_ledger(off, clock, topic, 0, 20)
    export = ("--json", "export", "run", "--engine", "local")

    def exported(*args: str) -> list[str]:
        out = ok(home, *export, *args, "--to", str(tmp_path / f"lake-{len(args)}-{args[0]}"))
        return [json.loads(line)["topic"] for line in out.stdout.splitlines()]

    assert sorted(exported("public/default")) == sorted(topics)
    assert exported("clicks") == [topics[1]]
    line = one_line_error(run(home, *export, "c.*", "--to", str(tmp_path / "x")))
    assert line == "error: export run: no topic matches 'c.*'"  # matched in full
    assert sorted(exported(".*/(orders|clicks)")) == sorted(topics)
    assert sorted(exported("orders,clicks")) == sorted(topics)
    line = one_line_error(run(home, "export", "run", "(", "--to", str(tmp_path / "x")))
    assert "not a regular expression" in line


def test_service_run_checks_kafka_topics_before_the_first_pass(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ok(home, "namespaces", "create", "a/b")
    line = one_line_error(run(home, "service", "run", "--once", "--kafka-topics", "("))
    assert "not a regular expression" in line
    (home / "offloader.toml").write_text('[kafka]\ntopics = "public/default"\n')
    line = one_line_error(run(home, "service", "run", "--once"))
    assert line.endswith(
        "offloader.toml: [kafka] topics 'public/default': public/default is a Pulsar namespace; "
        "Kafka topics have none (give names or a regular expression)"
    )
