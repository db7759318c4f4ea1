"""The one parse of a store URL and the one S3 endpoint rule (offloader/location.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offloader.errors import ConfigError
from offloader.location import (
    ENDPOINT_VARIABLES,
    StoreLocation,
    endpoint_variable,
    is_remote_url,
    is_s3_url,
    parse_store_url,
    s3_endpoint,
)


@pytest.mark.parametrize(
    ("url", "bucket", "prefix"),
    [
        ("s3://b", "b", ""),
        ("s3://b/", "b", ""),
        ("S3://b/p/q/", "b", "p/q"),
        ("  s3://b//p%20x  ", "b", "p x"),
    ],
)
def test_s3_urls(url: str, bucket: str, prefix: str) -> None:
    location = parse_store_url(url)
    assert location == StoreLocation("s3", url.strip(), bucket=bucket, prefix=prefix)
    assert location.is_s3 and is_s3_url(url)


def test_file_urls_and_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_store_url(f"file://{tmp_path}/x").path == tmp_path / "x"
    assert parse_store_url(f"file://localhost{tmp_path}/a%20b").path == tmp_path / "a b"
    monkeypatch.chdir(tmp_path)
    plain = parse_store_url("objects")
    assert plain.scheme == "file" and plain.path == tmp_path / "objects" and not plain.is_s3
    assert not is_s3_url(f"file://{tmp_path}") and not is_s3_url(None)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("hdfs://b", "unsupported store URL scheme 'hdfs'"),
        ("gs://key:secret@b/p", "contains credentials"),
        ("az://key:secret@c/p", "contains credentials"),
        ("az:///p", "has no container"),
        ("gs://b/p?x=1", "query or fragment"),
        ("c:/x", "unsupported store URL"),
        ("s3://key:secret@b/p", "contains credentials"),
        ("s3:///p", "has no bucket"),
        ("s3://b/p?x=1", "query or fragment"),
        ("file://host/x", "host 'host' is not supported"),
        ("file://", "needs an absolute path"),
    ],
)
def test_what_no_backend_takes_is_a_config_error_naming_the_store_url(
    url: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_store_url(url)
    assert info.value.setting == "store_url" and "secret" not in str(info.value)
    assert not is_s3_url(url)


@pytest.mark.parametrize(
    ("url", "scheme", "bucket", "prefix", "account"),
    [
        ("gs://bkt/a/b/", "gs", "bkt", "a/b", ""),
        ("GS://bkt", "gs", "bkt", "", ""),
        ("az://cont/p", "az", "cont", "p", ""),
        ("abfs://cont@acct.dfs.core.windows.net/x/y", "az", "cont", "x/y", "acct"),
        ("abfss://cont@acct.dfs.core.windows.net", "az", "cont", "", "acct"),
        ("abfs://cont/p", "az", "cont", "p", ""),
    ],
)
def test_gcs_and_azure_urls(url: str, scheme: str, bucket: str, prefix: str, account: str) -> None:
    location = parse_store_url(url)
    assert (location.scheme, location.bucket, location.prefix, location.account) == (
        scheme,
        bucket,
        prefix,
        account,
    )
    assert location.is_remote and not location.is_s3
    assert location.is_gcs == (scheme == "gs") and location.is_azure == (scheme == "az")
    assert is_remote_url(url) and not is_s3_url(url)
    assert not is_remote_url("/some/dir") and not is_remote_url(None)


def test_the_endpoint_rule_given_then_s3_variable_then_the_generic_one() -> None:
    both = {"AWS_ENDPOINT_URL_S3": "http://s3-only", "AWS_ENDPOINT_URL": "http://any"}
    assert s3_endpoint("http://given", both) == "http://given"
    assert s3_endpoint(None, both) == "http://s3-only"
    assert endpoint_variable(both) == "AWS_ENDPOINT_URL_S3"
    generic = {"AWS_ENDPOINT_URL_S3": "", "AWS_ENDPOINT_URL": "http://any"}
    assert s3_endpoint(None, generic) == "http://any"
    assert endpoint_variable(generic) == "AWS_ENDPOINT_URL"
    assert s3_endpoint(None, {}) is None and endpoint_variable({}) is None
    assert ENDPOINT_VARIABLES == ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
