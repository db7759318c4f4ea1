"""bench/moto_process.py's prefill: moto's child process fills a bucket in its own backend
before it serves, and over HTTP the bucket is what PUTs of the same keys would have made."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.s3  # starts moto's server in child processes

META = {"s3managedledgeroffloaderformatversion": "1", "managedledgername": "t/ns/persistent/x"}


def _listing(client: Any, bucket: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, MaxKeys=100):
        out += [(o["Key"], o["Size"]) for o in page.get("Contents", ())]
    return out


def _seen(client: Any, bucket: str, keys: list[str]) -> tuple[Any, ...]:
    heads = [client.head_object(Bucket=bucket, Key=k) for k in keys]
    bodies = [client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys]
    return (
        _listing(client, bucket),
        [h["Metadata"] for h in heads],
        [h["ContentLength"] for h in heads],
        bodies,
    )


def test_a_prefilled_bucket_is_what_puts_make() -> None:
    from bench.moto_process import Prefill, moto_child

    objects = [(f"{uuid.uuid4()}-ledger-{n}", n % 3 + 1) for n in range(250)]  # > a page
    objects.append(("not/an-offload-key", 0))
    sample = [k for k, _ in objects[::50]] + ["not/an-offload-key"]
    bucket = f"t-{uuid.uuid4().hex[:20]}"
    with moto_child(Prefill(bucket, objects, META)) as (endpoint, pid):
        assert pid > 0
        prefilled = _seen(endpoint.client(), bucket, sample)
    with moto_child() as (endpoint, _pid):
        client = endpoint.client()
        put_bucket = endpoint.new_bucket()
        for key, size in objects:
            client.put_object(Bucket=put_bucket, Key=key, Body=b"x" * size, Metadata=META)
        put = _seen(client, put_bucket, sample)
    assert prefilled == put
    assert prefilled[0] == sorted(objects)
    assert prefilled[1][0] == META
