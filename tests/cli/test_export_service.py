"""Continuous export: ``[[export]]`` tables in offloader.toml run inside ``service run`` after
each pass (the local engine: no JVM), incrementally; bad tables are refused naming the key."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli.main import cli
from tests.spark.export_helpers import TOPIC, Clock, digest, duck_digest, new_home, produce_ledger


def _invoke(home: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["--home", str(home), *args], env={"OFFLOADER_HOME": str(home)})
    return res.exit_code, res.output


def test_service_runs_the_configured_exports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = Clock()
    off = new_home(home, clock)
    values = produce_ledger(off, clock, TOPIC, 0, 40)
    off.close()
    lake = tmp_path / "lake"
    (home / "offloader.toml").write_text(
        f'[[export]]\ntopics = ["{TOPIC}"]\nto = "{lake}"\npartition_by = "dt"\n'
        'max_file_size = "4K"\n'
    )
    code, out = _invoke(home, "service", "run", "--once")
    assert code == 0, out
    assert f"export {TOPIC} -> {lake}: 40 messages" in out
    assert duck_digest(str(lake)) == (40, 40, digest(values)[1])
    from offloader.api import Offloader

    with Offloader.from_settings(home, clock_ms=clock) as off2:
        more = produce_ledger(off2, clock, TOPIC, 40, 25)
    code, out = _invoke(home, "--json", "service", "run", "--once")
    assert code == 0, out
    assert '"rows": 25' in out
    assert duck_digest(str(lake)) == (65, 65, digest(values + more)[1])
    code, out = _invoke(home, "export", "status", TOPIC, "--to", str(lake))
    assert code == 0 and "65 messages" in out


def test_bad_export_table_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "offloader.toml").write_text('[[export]]\ntopics = ["t"]\nto = "/x"\ncolour = 1\n')
    code, out = _invoke(home, "service", "run", "--once")
    assert code == 1 and "colour" in out
    (home / "offloader.toml").write_text('[[export]]\ntopics = ["t"]\nto = "/x"\nengine = "x"\n')
    code, out = _invoke(home, "service", "run", "--once")
    assert code == 1 and "engine" in out
