"""kill -9 of the broker around the one-request upload of a data object on GCS and Azure
(issue 39): before its PUT, after it (no index yet) and after the index. After each kill the
harness checks every acknowledged entry; the restart retries the offload, gc removes what the
dead attempt left, and the strict check finds nothing a reader would take for a finished
offload that is not one (:mod:`tests.crash.harness`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.crash.harness import SUMMARIES, Kill, run_scenario
from tests.crash.test_kill9 import SEED, summarize

KILLS = [
    Kill("writer.before_complete_upload", 1),
    Kill("writer.after_complete_upload", 2),
    Kill("writer.after_index_put", 1),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "cloud",
    [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)],
)
def test_kill9_around_the_one_request_upload(
    cloud: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cloud == "gcs":
        gcs = request.getfixturevalue("gcs_emulator")
        env, url = gcs.env(), f"gs://{gcs.new_bucket()}/crash"
    else:
        azurite = request.getfixturevalue("azurite")
        env, url = azurite.env(), f"az://{azurite.new_container()}/crash"
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the harness's own restarts talk to the emulator too
    started = time.monotonic()
    results = []
    for i, kill in enumerate(KILLS):
        store_url = f"{url}{i}"
        results.append(
            run_scenario(
                tmp_path / f"s{i}", store_url, SEED + i, [kill], f"{cloud} {kill}", env=env
            )
        )
    summary = summarize(results, time.monotonic() - started)
    print(f"\n{cloud}: {summary}")
    SUMMARIES.append(f"{cloud} one-request: {summary}")
    assert all(r.kills for r in results), [r.missed for r in results]
