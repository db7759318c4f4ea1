"""How S3ObjectStore translates botocore exceptions into the project's error tree (no server)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from offloader.errors import (
    AccessDenied,
    ConfigError,
    ObjectNotFound,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
    UploadNotFound,
)
from offloader.store.s3 import S3ObjectStore, crc32c_header
from offloader.store.s3_errors import translate


def client_error(
    code: str, status: int, message: str = "server says no", **extra: Any
) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message, **extra},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "SomeOperation",
    )


@pytest.mark.parametrize(
    ("op", "code", "status", "expected"),
    [
        ("get", "NoSuchKey", 404, ObjectNotFound),
        ("head", "404", 404, ObjectNotFound),
        ("get", "NoSuchBucket", 404, ObjectNotFound),
        ("upload_part", "NoSuchUpload", 404, UploadNotFound),
        ("complete_multipart_upload", "NoSuchUpload", 404, UploadNotFound),
        ("complete_multipart_upload", "NoSuchKey", 404, UploadNotFound),  # RGW
        ("upload_part", "NoSuchKey", 404, UploadNotFound),  # RGW
        ("put", "PreconditionFailed", 412, PreconditionFailed),
        ("complete_multipart_upload", "PreconditionFailed", 412, PreconditionFailed),
        ("put", "AccessDenied", 403, AccessDenied),
        ("get", "InvalidAccessKeyId", 403, AccessDenied),
        ("get", "SignatureDoesNotMatch", 403, AccessDenied),
        ("get", "403", 403, AccessDenied),
        ("put", "SlowDown", 503, StoreUnavailable),
        ("put", "ServiceUnavailable", 503, StoreUnavailable),
        ("put", "InternalError", 500, StoreError),
        ("get_range", "InvalidRange", 416, StoreError),
        ("complete_multipart_upload", "EntityTooSmall", 400, StoreError),
        ("complete_multipart_upload", "InvalidPart", 400, StoreError),
    ],
)
def test_client_errors(op: str, code: str, status: int, expected: type[StoreError]) -> None:
    exc = translate(op, "s3://b/p/k", "b", client_error(code, status))
    assert type(exc) is expected
    assert op in str(exc) and "s3://b/p/k" in str(exc)


def test_missing_bucket_message_names_the_bucket() -> None:
    exc = translate("get", "s3://my-bucket/k", "my-bucket", client_error("NoSuchBucket", 404))
    assert "bucket 'my-bucket' does not exist" in str(exc)


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1/"),
        ConnectTimeoutError(endpoint_url="http://127.0.0.1:1/"),
        ReadTimeoutError(endpoint_url="http://127.0.0.1:1/"),
        ConnectionClosedError(endpoint_url="http://127.0.0.1:1/"),
        ResponseStreamingError(error="connection reset"),
    ],
)
def test_transport_errors_are_unavailable(error: Exception) -> None:
    exc = translate("get", "s3://b/k", "b", error)  # type: ignore[arg-type]
    assert type(exc) is StoreUnavailable


def test_other_sdk_errors() -> None:
    assert type(translate("get", "s3://b/k", "b", NoCredentialsError())) is AccessDenied
    exc = translate("put", "s3://b/k", "b", ParamValidationError(report="bad"))
    assert type(exc) is StoreError


def test_message_never_carries_request_details() -> None:
    """Only the server's Code and Message are used, never other fields of the error."""
    error = client_error(
        "SignatureDoesNotMatch",
        403,
        "signature mismatch",
        AWSAccessKeyId="AKIAEXAMPLE",
        StringToSign="AWS4-HMAC-SHA256 ...",
        SignatureProvided="abcdef0123",
    )
    text = str(translate("put", "s3://b/k", "b", error))
    assert "AKIAEXAMPLE" not in text and "abcdef0123" not in text
    assert "SignatureDoesNotMatch: signature mismatch" in text


def test_crc32c_header() -> None:
    # CRC32C("123456789") = 0xE3069283, base64 of its big-endian bytes
    assert crc32c_header(0xE3069283) == "4waSgw=="
    assert crc32c_header(0) == "AAAAAA=="


@pytest.mark.parametrize(
    "endpoint", ["not-a-url", "http://", "http://exa mple", "ftp://host", "localhost:9000"]
)
def test_an_invalid_endpoint_is_a_config_error(endpoint: str) -> None:
    with pytest.raises(ConfigError, match="invalid S3 endpoint URL") as info:
        S3ObjectStore("mybucket", endpoint_url=endpoint)
    assert repr(endpoint) in str(info.value)
    assert info.value.setting == "endpoint_url"


def test_an_invalid_endpoint_never_shows_credentials() -> None:
    with pytest.raises(ConfigError) as info:
        S3ObjectStore("mybucket", endpoint_url="ftp://key:topsecret@host")
    assert "topsecret" not in str(info.value)
