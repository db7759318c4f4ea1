"""open_store(): URL dispatch to the local and S3 backends, and clear errors for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.config import OffloadSettings
from offloader.errors import ConfigError, ObjectNotFound, StoreError
from offloader.store import LocalObjectStore, ObjectStore, open_store
from offloader.store.s3 import S3ObjectStore


def test_file_url(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/objects")
    assert isinstance(store, LocalObjectStore) and isinstance(store, ObjectStore)
    assert store.root == tmp_path / "objects" and store.root.is_dir()
    assert store.url == (tmp_path / "objects").as_uri()


def test_file_url_localhost_and_escapes(tmp_path: Path) -> None:
    store = open_store(f"file://localhost{tmp_path}/with%20space")
    assert isinstance(store, LocalObjectStore)
    assert store.root == tmp_path / "with space"


def test_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_store(str(tmp_path / "abs")), LocalObjectStore)
    monkeypatch.chdir(tmp_path)
    store = open_store("rel/dir")
    assert isinstance(store, LocalObjectStore)
    assert store.root == tmp_path / "rel" / "dir"


def test_s3_url() -> None:
    settings = OffloadSettings(max_attempts=2)
    store = open_store(
        "s3://my-bucket/some/prefix/",
        endpoint_url="http://127.0.0.1:9",
        region="eu-west-1",
        settings=settings,
    )
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix) == ("my-bucket", "some/prefix/")
    assert store.url == "s3://my-bucket/some/prefix"
    assert store.endpoint_url == "http://127.0.0.1:9"
    bare = open_store("s3://my-bucket")
    assert isinstance(bare, S3ObjectStore) and bare.url == "s3://my-bucket"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "s3://",
        "s3:///prefix",
        "s3://ab",
        "s3://Bad_Bucket/x",
        "s3://b-ok/../x",
        "http://example.com/x",
        "hdfs://bucket/x",
        "gs://Bad_Bucket!/x",
        "az://ab/x",
        "az://Bad_Container/x",
        "file://host/path",
        "file://relative",
        "file:///tmp/x?y=1",
        "c:stuff",
    ],
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store(url)
    assert info.value.setting == "store_url"  # front ends name the URL's source from this


def test_credentials_in_url_are_refused_and_not_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        open_store("s3://AKIAX:topsecret@bucket/prefix")
    assert "topsecret" not in str(info.value)
    assert "credential" in str(info.value)


def test_open_store_refuses_a_missing_local_directory_without_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url, path in (
        (f"file://{tmp_path}/a%20b", tmp_path / "a b"),
        (f"file://localhost{tmp_path}/x", tmp_path / "x"),
        ("rel/dir", tmp_path / "rel" / "dir"),
    ):
        with pytest.raises(ObjectNotFound, match=f"{path} does not exist"):
            open_store(url, create=False)
        assert not path.exists()
        open_store(url).close()  # the default creates it
        assert path.is_dir()
        open_store(url, create=False).close()


def test_a_missing_root_is_refused_without_create(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    with pytest.raises(ObjectNotFound, match=f"{missing} does not exist"):
        LocalObjectStore(missing, create=False)
    assert not missing.parent.exists()
    LocalObjectStore(missing)  # the default creates it
    assert missing.is_dir()
    assert LocalObjectStore(missing, create=False).root == missing


def test_a_root_that_is_a_file_is_not_a_directory(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for create in (True, False):
        with pytest.raises(StoreError, match=f"^local store root {afile} is not a directory$"):
            LocalObjectStore(afile, create=create)
        with pytest.raises(StoreError, match=f"{afile} is not a directory"):
            LocalObjectStore(afile / "sub", create=create)
    with pytest.raises(StoreError, match="is not a directory"):
        open_store(afile.as_uri())
