"""A real Pulsar cluster's ledgers offloaded by its ``google-cloud-storage`` and ``azureblob``
drivers: the offload context's driver name picks the cloud (not S3), the bucket or container
comes from its driver metadata and the credentials from the cloud's own environment; Pulsar's
golden objects, uploaded to fake-gcs-server and Azurite as Pulsar uploads them, read back entry
for entry. And the endpoint as Pulsar's tiered-storage configuration records it
(``serviceEndpoint``) or older brokers did (``endpoint``)."""

from __future__ import annotations

import pytest

from formats.keys import data_key, index_key
from formats.pulsar.managed_ledger_info import DriverMetadata
from offloader.read.cluster import BucketStores, ClusterLedger
from offloader.read.handle import ReadHandle
from tests.cloud_env import cloud_root
from tests.offload.conftest import golden_case, new_uuid, pulsar_metadata, sha256


def test_the_endpoint_under_either_name() -> None:
    new = DriverMetadata("aws-s3", (("bucket", "b"), ("serviceEndpoint", "http://s3:9000")))
    old = DriverMetadata("aws-s3", (("bucket", "b"), ("endpoint", "http://old:9000")))
    unset = DriverMetadata("aws-s3", (("serviceEndpoint", ""), ("endpoint", "http://e:1")))
    assert (new.endpoint, old.endpoint, unset.endpoint) == (
        "http://s3:9000",
        "http://old:9000",
        "http://e:1",
    )


@pytest.mark.parametrize(
    ("cloud", "driver", "scheme"),
    [
        pytest.param("gcs", "google-cloud-storage", "gs", marks=pytest.mark.gcs),
        pytest.param("azure", "azureblob", "az", marks=pytest.mark.azure),
    ],
)
def test_pulsar_offloads_on_each_cloud_are_read(
    cloud: str,
    driver: str,
    scheme: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = cloud_root(cloud, request, monkeypatch).split("://", 1)[1]
    case = golden_case("multi-block")
    uuid = new_uuid()
    ledger = ClusterLedger(
        "persistent://public/default/t",
        case.ledger_id,
        uuid,
        len(case.entry_sha256),
        len(case.data),
        bucket,
        "http://ignored-for-this-driver:1",  # a recorded endpoint applies to S3 only
        "us-east-1",
        driver,
    )
    stores = BucketStores()
    assert stores.url_for(ledger) == (f"{scheme}://{bucket}", None, None)
    store = stores(ledger)
    try:
        assert store.url == f"{scheme}://{bucket}"
        store.put(data_key(uuid, case.ledger_id), case.data, pulsar_metadata("data"))
        store.put(index_key(uuid, case.ledger_id), case.index, pulsar_metadata("index"))
        with ReadHandle.open(store, case.ledger_id, uuid) as handle:
            entries = list(handle.iter_entries(0, handle.last_add_confirmed))
        assert [sha256(e.payload) for e in entries] == list(case.entry_sha256)
        assert stores(ledger) is store  # opened once per bucket
    finally:
        stores.close()
