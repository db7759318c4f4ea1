"""The one form of a topic selection (offloader/selection.py): names, a namespace, or a
full-match regex; properties over generated names and patterns, and the errors of bad text."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from offloader.errors import ConfigError
from offloader.selection import REGEX_OPERATORS, TOPICS_HELP, TopicSelection

#: Kafka's legal topic-name characters (also legal in a Pulsar local name)
KAFKA_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
kafka_names = st.text(KAFKA_CHARS, min_size=1, max_size=20).filter(
    lambda n: n not in (".", "..") and not n.startswith(".")
)
#: tenant and namespace names (Pulsar's NamedEntity, without '.' to keep them short and legal)
entities = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=8)


@given(st.lists(kafka_names, min_size=1, max_size=6), kafka_names)
def test_names_are_exact_matches(names: list[str], other: str) -> None:
    selection = TopicSelection.parse(",".join(names))
    assert selection.names_only and selection.names == tuple(dict.fromkeys(names))
    for name in names:
        assert selection.matches(name)
    assert selection.matches(other) == (other in names)
    # '.' is a name character: "a.b" never selects "aXb"
    assert selection.select([*names, other]) == list(
        dict.fromkeys(n for n in [*names, other] if n in names)
    )


@given(st.lists(kafka_names, min_size=1, max_size=6), kafka_names)
def test_spaces_around_names_and_empty_items_are_ignored(names: list[str], other: str) -> None:
    text = " , ".join(names) + " ,,"
    selection = TopicSelection.parse(text)
    assert set(selection.names) == set(names)
    assert selection.matches(other) == (other in names)


@given(
    entities, entities, st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)
)
def test_a_pulsar_topic_in_each_of_its_forms(tenant: str, ns: str, local: str) -> None:
    assume(not local.startswith("."))
    full = f"persistent://{tenant}/{ns}/{local}"
    for text in (full, f"{tenant}/{ns}/{local}"):
        selection = TopicSelection.parse(text)
        assert selection.matches(full)
        assert selection.matches(f"{tenant}/{ns}/{local}")
        # a partitioned topic's name selects its partitions, not other topics
        assert selection.matches(f"{full}-partition-7")
        assert not selection.matches(f"{full}-partitionX-7")
        assert not selection.matches(f"persistent://{tenant}/{ns}x/{local}")
    if tenant == "public" and ns == "default":
        assert TopicSelection.parse(local).matches(full)


@given(entities, entities, st.lists(kafka_names, min_size=1, max_size=5), entities)
def test_a_namespace_selects_every_topic_in_it(
    tenant: str, ns: str, locals_: list[str], other_ns: str
) -> None:
    assume(other_ns != ns)
    selection = TopicSelection.parse(f"{tenant}/{ns}")
    assert selection.namespaces == (f"{tenant}/{ns}",) and not selection.names
    for local in locals_:
        assert selection.matches(f"persistent://{tenant}/{ns}/{local}")
        assert not selection.matches(f"persistent://{tenant}/{other_ns}/{local}")
        assert not selection.matches(local)  # a Kafka name has no namespace
    with pytest.raises(ConfigError, match="Pulsar namespace"):
        selection.require_flat()


#: pattern texts built from name characters and regex operators
patterns = st.text("ab.-_*+?|()[]^$", min_size=1, max_size=10)


@given(patterns, st.lists(st.text("ab.-_", min_size=1, max_size=6), min_size=1, max_size=8))
def test_a_regex_matches_names_in_full_as_re_does(text: str, names: list[str]) -> None:
    """Backwards compatible: any regex with an operator selects exactly what
    ``re.fullmatch`` selected before the one form (the old options' rule)."""
    assume(any(ch in REGEX_OPERATORS for ch in text) and not text.startswith("regex:"))
    try:
        compiled = re.compile(text)
    except re.error:
        with pytest.raises(ConfigError, match="not a regular expression"):
            TopicSelection.parse(text)
        return
    assume(text.strip() == text)
    selection = TopicSelection.parse(text)
    assert selection.patterns and not selection.names_only
    for name in names:
        assert selection.matches(name) == (compiled.fullmatch(name) is not None)


@given(entities, entities, kafka_names)
def test_a_regex_that_matched_full_names_still_does(tenant: str, ns: str, local: str) -> None:
    full = f"persistent://{tenant}/{ns}/{local}"
    old = re.escape(f"persistent://{tenant}/") + ".*"
    assert TopicSelection.parse(old).matches(full)
    # ... and the t/ns/x form is matched too
    assert TopicSelection.parse(re.escape(f"{tenant}/{ns}/") + ".*").matches(full)


names_with_anything = st.one_of(
    st.text(min_size=1, max_size=12),
    st.text(min_size=1, max_size=6).map(lambda n: "regex:" + n),
    st.text(min_size=1, max_size=6).map(lambda n: n + "/" + n),
)


@given(st.lists(names_with_anything, min_size=1, max_size=6))
def test_text_of_selects_exactly_the_names_it_lists(names: list[str]) -> None:
    """What the export gives the Spark sources: exactly its topics, whatever they hold."""
    names = [n for n in names if n.isprintable() and "://" not in n and n.count("/") < 2]
    assume(names)
    selection = TopicSelection.parse(TopicSelection.text_of(names))
    for name in names:
        assert selection.matches(name)
    assert not selection.matches("".join(names) + "#")


@given(st.lists(kafka_names, min_size=1, max_size=4), st.lists(kafka_names, max_size=6))
def test_expand_keeps_the_names_given_then_adds_what_a_regex_selects(
    names: list[str], listing: list[str]
) -> None:
    selection = TopicSelection.parse_all([",".join(names), "zz.*"])
    out = selection.expand(listing)
    assert out[: len(set(names))] == list(dict.fromkeys(names))
    extra = out[len(set(names)) :]
    assert all(n.startswith("zz") and n not in names for n in extra)
    assert len(set(out)) == len(out)


def test_str_is_the_text_given() -> None:
    assert str(TopicSelection.parse(" orders,clicks ")) == "orders,clicks"
    assert str(TopicSelection.parse("regex:orders")) == "regex:orders"
    assert TopicSelection.parse("regex:orders").patterns[0].pattern == "orders"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("  ", "empty"),
        (",,", "names no topic"),
        ("(", "not a regular expression"),
        ("orders[", "not a regular expression"),
        ("regex:", "regular expression is empty"),
        ("a/b/c/d", "invalid short topic name"),
        ("non-persistent://t/n/x", "non-persistent"),
        ("bad tenant!/ns", "invalid tenant name"),
        ("t/n/\x07", "control character"),
    ],
)
def test_bad_text_is_a_config_error_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        TopicSelection.parse(text)


def test_the_help_sentence_names_every_operator() -> None:
    for ch in REGEX_OPERATORS:
        assert ch in TOPICS_HELP
