"""``kafka status`` shows the remote ``.log`` bytes twice: original (``remote_bytes``, as
before, = ``remote_original_bytes``) and stored (``remote_stored_bytes``: a transformed
segment's chunked size, from a HEAD of its ``.log`` on moto); a plain topic's are equal."""

from __future__ import annotations

import pytest

from offloader.kafka.transform_read import is_transformed
from tests.cli.helpers import json_lines, ok
from tests.kafka.conftest import TransformedTier

pytestmark = pytest.mark.s3


def test_status_shows_original_and_stored_bytes(transformed_moto_tier: TransformedTier) -> None:
    t = transformed_moto_tier
    store = t.tier.ctx.store
    expected = {}
    for topic in ("secret", "plain"):
        segments = t.tier.ctx.meta.list_segments(topic, 0)
        assert segments and all(is_transformed(s) == (topic == "secret") for s in segments)
        original = sum(s.size_bytes for s in segments)
        stored = sum(store.head(s.keys["log"]).size for s in segments)
        expected[topic] = (original, stored)
    assert expected["secret"][0] != expected["secret"][1]  # chunked: not the original size
    assert expected["plain"][0] == expected["plain"][1]

    rows = {s.topic: s for s in t.tier.status()}
    for topic, (original, stored) in expected.items():
        assert (rows[topic].remote_bytes, rows[topic].remote_stored_bytes) == (original, stored)

    args = ("--store", t.url, "--endpoint-url", t.endpoint.url, "kafka", "status")
    records = {r["topic"]: r for r in json_lines(ok(t.home, "--json", *args))}
    for topic, (original, stored) in expected.items():
        r = records[topic]
        assert r["remote_bytes"] == r["remote_original_bytes"] == original
        assert r["remote_stored_bytes"] == stored
    text = ok(t.home, *args).stdout
    assert "BYTES" in text.splitlines()[0]
    (secret_line,) = [line for line in text.splitlines() if line.startswith("secret-0")]
    assert "stored)" in secret_line
    (plain_line,) = [line for line in text.splitlines() if line.startswith("plain-0")]
    assert "stored" not in plain_line


def test_status_stored_bytes_unknown_when_a_log_is_missing(
    transformed_moto_tier: TransformedTier,
) -> None:
    t = transformed_moto_tier
    seg = t.tier.ctx.meta.list_segments("secret", 0)[0]
    t.tier.ctx.store.delete(seg.keys["log"])
    (row,) = t.tier.status("secret")
    assert row.remote_bytes == sum(s.size_bytes for s in t.tier.ctx.meta.list_segments("secret", 0))
    assert row.remote_stored_bytes is None
    args = ("--store", t.url, "--endpoint-url", t.endpoint.url, "kafka", "status", "secret")
    assert "(? stored)" in ok(t.home, *args).stdout
    (record,) = json_lines(ok(t.home, "--json", *args))
    assert record["remote_stored_bytes"] is None
