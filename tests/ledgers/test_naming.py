"""Pulsar naming: parsing, canonical spellings, validation, and filesystem-safe encoding."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloader.errors import InvalidName
from offloader.ledgers.paths import MAX_COMPONENT, encode_component, ledger_file, topic_dir
from offloader.naming import NamespaceName, TopicName, java_url_encode


@pytest.mark.parametrize(
    ("text", "full", "ml_name"),
    [
        ("persistent://acme/orders/t1", "persistent://acme/orders/t1", "acme/orders/persistent/t1"),
        ("acme/orders/t1", "persistent://acme/orders/t1", "acme/orders/persistent/t1"),
        ("t1", "persistent://public/default/t1", "public/default/persistent/t1"),
        (
            "persistent://a-b/c=d:e.f/x y",
            "persistent://a-b/c=d:e.f/x y",
            "a-b/c=d:e.f/persistent/x+y",
        ),
        ("persistent://t/n/ü~*", "persistent://t/n/ü~*", "t/n/persistent/%C3%BC%7E*"),
        ("persistent://t/n/a%2Fb", "persistent://t/n/a%2Fb", "t/n/persistent/a%252Fb"),
        (
            "persistent://t/n/t-partition-3",
            "persistent://t/n/t-partition-3",
            "t/n/persistent/t-partition-3",
        ),
    ],
)
def test_parse_valid(text: str, full: str, ml_name: str) -> None:
    topic = TopicName.parse(text)
    assert str(topic) == full
    assert topic.managed_ledger_name == ml_name
    assert TopicName.parse(str(topic)) == topic
    assert TopicName.of(topic) is topic


def test_parts() -> None:
    topic = TopicName.parse("persistent://acme/orders/t1")
    assert (topic.tenant, topic.namespace, topic.local_name) == ("acme", "acme/orders", "t1")
    assert topic.namespace_name == NamespaceName.parse("acme/orders")
    assert topic.domain == "persistent"
    assert str(NamespaceName.parse("acme/orders")) == "acme/orders"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("non-persistent://t/n/x", "non-persistent topics"),
        ("http://t/n/x", "unknown domain"),
        ("persistent://t/n", "expected persistent://"),
        ("persistent://t/c/n/x", "may not contain '/'"),
        ("t/n", "short topic name"),
        ("a/b/c/d", "short topic name"),
        ("persistent://t/n/", "local name is empty"),
        ("persistent:///n/x", "tenant name is empty"),
        ("persistent://t//x", "namespace name is empty"),
        ("persistent://t t/n/x", "NamedEntity"),
        ("persistent://tü/n/x", "NamedEntity"),
        ("persistent://t/n%/x", "NamedEntity"),
        ("persistent://../n/x", "reserved"),
        ("persistent://t/./x", "reserved"),
        ("persistent://t/n/..", "start with '.'"),
        ("persistent://t/n/.hidden", "start with '.'"),
        ("persistent://t/n/a\x00b", "NUL"),
        ("persistent://t/n/a\nb", "control character U+000A"),
        ("persistent://t/n/a\x7fb", "control character U+007F"),
        ("persistent://t/n/a\\b", "'\\'"),
        ("persistent://t/n/..\\..\\etc", "'\\'"),
        ("../../etc", "reserved"),
        ("../../../etc", "short topic name"),
        ("persistent://t/n/../../etc/passwd", "may not contain '/'"),
        ("persistent://t/n/" + "x" * 256, "over the 255-byte limit"),
        ("persistent://t/n/" + "é" * 128, "256 UTF-8 bytes"),
        ("persistent://t/n/a\ud800", "UTF-8"),
        ("persistent://" + "t" * 256 + "/n/x", "255-byte limit"),
    ],
)
def test_parse_invalid(text: str, rule: str) -> None:
    with pytest.raises(InvalidName, match=None) as info:
        TopicName.parse(text)
    assert rule in str(info.value)


@pytest.mark.parametrize("text", ["t", "t/n/x", "/n", "t/", "t/n/"])
def test_namespace_invalid(text: str) -> None:
    with pytest.raises(InvalidName):
        NamespaceName.parse(text)


def test_constructor_validates() -> None:
    with pytest.raises(InvalidName):
        TopicName(NamespaceName("t", "n"), "a/b")
    with pytest.raises(InvalidName):
        NamespaceName("t", "")


def test_java_url_encode() -> None:
    assert java_url_encode("a b+c&d/é.-*_~") == "a+b%2Bc%26d%2F%C3%A9.-*_%7E"


def test_255_bytes_is_allowed() -> None:
    assert TopicName.parse("persistent://t/n/" + "x" * 255).local_name == "x" * 255


@pytest.mark.parametrize(
    ("name", "encoded"),
    [
        ("orders", "orders"),
        ("a.b", "a.b"),
        (".x", "%2Ex"),
        ("..", "%2E."),
        ("a/b", "a%2Fb"),
        ("a%2Fb", "a%252Fb"),
        ("x:y=z", "x%3Ay%3Dz"),
        ("ü", "%C3%BC"),
        ("a\x00", "a%00"),
    ],
)
def test_encode_component(name: str, encoded: str) -> None:
    assert encode_component(name) == encoded


def _check_component(component: str) -> None:
    assert component and component not in (".", "..")
    assert "/" not in component and "\\" not in component and "\x00" not in component
    assert len(component.encode()) <= 255
    assert component.isascii()


@given(st.text(min_size=1, max_size=300))
def test_any_valid_topic_maps_inside_root(local: str) -> None:
    root = Path("/srv/home/ledgers")
    try:
        topic = TopicName(NamespaceName("t", "n"), local)
    except InvalidName:
        return
    path = ledger_file(root, topic, 7)
    assert path.parent.parent.parent.parent == root
    for part in path.relative_to(root).parts:
        _check_component(part)


@given(st.text(max_size=300), st.text(max_size=300))
def test_encoding_is_injective(a: str, b: str) -> None:
    if a != b:
        assert encode_component(a) != encode_component(b)


def test_long_names_are_hashed() -> None:
    root = Path("/srv/home/ledgers")
    long_a = TopicName.parse("persistent://t/n/" + "é" * 127)
    long_b = TopicName.parse("persistent://t/n/" + "é" * 126 + "è")
    dir_a, dir_b = topic_dir(root, long_a), topic_dir(root, long_b)
    assert dir_a != dir_b
    assert len(dir_a.name) <= MAX_COMPONENT and "~" in dir_a.name
    _check_component(dir_a.name)


def test_escape_attempts_refused(tmp_path: Path) -> None:
    from offloader.ledgers import LedgerStore

    store = LedgerStore(tmp_path)
    for bad in [
        "../../etc",
        "persistent://t/n/../x",
        "persistent://../n/x",
        "a\x00b",
        "persistent://t/n/" + "a" * 1000,
        "persistent://t/n/..\\x",
    ]:
        with pytest.raises(InvalidName):
            store.create_ledger(bad, 1)
    with pytest.raises(InvalidName):
        store.ledger_path("t", -1)
    assert not (tmp_path / "ledgers").exists() or not any((tmp_path / "ledgers").rglob("*.log"))
