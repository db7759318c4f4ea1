"""Issue 34 item 7, defence in depth: a name holding bytes that are not UTF-8 (a command-line
argument Python decoded with surrogate escapes) that reaches a metadata store is a
MetadataError from the driver edge, on both backends: never the driver's ``UnicodeEncodeError``.
A change is rolled back (and says so), a read says nothing was read, and the store stays usable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from offloader.errors import MetadataError
from offloader.metadata.base import MetadataStore
from offloader.metadata.kafka_base import KafkaMetadataStore, KafkaRetention
from tests.metadata.backends import BACKENDS

UNDECODABLE = b"cl\xffcks".decode("utf-8", "surrogateescape")
NS = "tenant/ns"


@pytest.fixture(params=sorted(BACKENDS))
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    return request.param, BACKENDS[request.param].new_location(request, tmp_path)


@pytest.fixture()
def store(location: tuple[str, str]) -> Iterator[MetadataStore]:
    opened = BACKENDS[location[0]].open(location[1])
    yield opened
    opened.close()


@pytest.fixture()
def kafka_store(location: tuple[str, str]) -> Iterator[KafkaMetadataStore]:
    opened = BACKENDS[location[0]].open_kafka(location[1])
    yield opened
    opened.close()


def test_a_change_with_an_unencodable_name_is_rolled_back(store: MetadataStore) -> None:
    store.create_namespace(NS, 1)
    with pytest.raises(MetadataError) as info:
        store.create_namespace(f"tenant/{UNDECODABLE}", 2)
    assert "holds bytes that are not UTF-8 text" in str(info.value)
    assert str(info.value).endswith("nothing was changed")
    assert [n.name for n in store.list_namespaces()] == [NS]  # still usable, nothing added


def test_a_read_with_an_unencodable_name_says_nothing_was_read(store: MetadataStore) -> None:
    with pytest.raises(MetadataError) as info:
        store.get_topic(f"persistent://tenant/ns/{UNDECODABLE}")
    assert "not UTF-8" in str(info.value) and str(info.value).endswith("nothing was read")
    assert "changed" not in str(info.value)
    store.create_namespace(NS, 1)  # the connection is still good for a change


def test_kafka_retention_with_an_unencodable_topic(kafka_store: KafkaMetadataStore) -> None:
    with pytest.raises(MetadataError, match="nothing was changed"):
        kafka_store.set_retention(KafkaRetention(UNDECODABLE, 1000, -1))
    with pytest.raises(MetadataError, match="nothing was read"):
        kafka_store.get_retention(UNDECODABLE)
    with pytest.raises(MetadataError, match="not UTF-8"):
        kafka_store.get_topic_transform(UNDECODABLE)
    stored = kafka_store.set_retention(KafkaRetention("clicks", 1000, -1))
    assert kafka_store.get_retention("clicks") == stored
