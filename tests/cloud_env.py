"""A new bucket or container on the GCS or Azure emulator for one test, with the emulator's
endpoint and credentials set in that test's environment (as each cloud's own tools take them)."""

from __future__ import annotations

import pytest

from devservers.cloud import AzuriteEmulator, GcsEmulator


def cloud_root(cloud: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``gs://<new bucket>`` (cloud ``gcs``) or ``az://<new container>`` (``azure``); the
    environment (``STORAGE_EMULATOR_HOST``, ``AZURE_STORAGE_CONNECTION_STRING``) set for the
    test, so child processes and Spark's local executors inherit it too."""
    if cloud == "gcs":
        gcs: GcsEmulator = request.getfixturevalue("gcs_emulator")
        env, root = gcs.env(), f"gs://{gcs.new_bucket()}"
    else:
        azurite: AzuriteEmulator = request.getfixturevalue("azurite")
        env, root = azurite.env(), f"az://{azurite.new_container()}"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return root
