"""Issue 21 item 1: the data object's format version (its user metadata, from the GET's own
response: no extra request) is checked on the first GET of each read, as Pulsar's
``VERSION_CHECK`` does on every ranged GET; the error names the object and the version."""

from __future__ import annotations

from pathlib import Path

import pytest

from formats.keys import FORMAT_VERSION_KEY
from offloader.errors import ForeignObjectError
from offloader.read.handle import ReadHandle
from offloader.read.objects import block_refs, load_index, read_block
from offloader.store.faulty import FaultyObjectStore
from tests.cli.helpers import json_lines, one_line_error, run
from tests.hardening.helpers import file_store, ledger_keys, offloaded_topic


@pytest.mark.parametrize("version", ["12345", "-12345"])
def test_a_data_object_of_another_version_is_refused(tmp_path: Path, version: str) -> None:
    ledgers = offloaded_topic(tmp_path, entries=300, per_ledger=300)
    data_key, _ = ledger_keys(ledgers, 0)
    store = file_store(tmp_path)
    got = store.get(data_key)
    store.put(data_key, got.data, {**got.metadata, FORMAT_VERSION_KEY: version})
    uuid = data_key.split("-ledger-")[0]
    counted = FaultyObjectStore(store)
    with ReadHandle.open(counted, 0, uuid) as handle:
        for first, last in ((5, 5), (0, 299)):  # one ranged GET; one streamed GET
            with pytest.raises(
                ForeignObjectError, match=f"Invalid object version {version} for {data_key}"
            ):
                handle.read(first, last)
    assert counted.calls["head"] == 0  # the GETs' own responses carried the metadata
    line = one_line_error(run(tmp_path, "--json", "topics", "read", "t", "-n", "1"))
    assert f"Invalid object version {version} for {data_key}" in line and "ledger 0" in line
    result = run(tmp_path, "--json", "objects", "verify", "--verify-checksums")
    assert result.exit_code == 1
    assert any(version in (r.get("problem") or "") for r in json_lines(result))
    # the block reader of Spark tasks and verification
    (ref,) = block_refs(load_index(store, 0, uuid), 0, uuid)
    with pytest.raises(ForeignObjectError, match=f"version {version}"):
        list(read_block(store, ref))
