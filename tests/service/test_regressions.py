"""Failures seen in the field, each kept from coming back: a refused write that broke its
key, a poisoned body that failed other owners' submissions, a spec too large for the
cluster that was accepted. On SQLite and PostgreSQL, through a real uvicorn server
where concurrency matters."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from mlflow.tracking import MlflowClient
from sqlalchemy import URL
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.api import create_app
from sweep_service.settings import ServiceSettings
from sweep_service.store import (
    SweepStatus,
    create_api_key,
    create_engine_for,
    create_owner,
    create_session_factory,
    transition_sweep,
    upgrade,
)
from tests.service.api_fixtures import FakeRunner, MakeApi, bearer, stored_sweeps
from tests.tcp_proxy import free_port

POISONED = b'{"extends": "smoke", "description": "before \\ud800 after"}'


@pytest.fixture
def served(make_api: MakeApi) -> Iterator[str]:
    """The app behind a real uvicorn server on loopback; yields its base URL."""
    app: FastAPI = make_api().client.app  # type: ignore[assignment]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def new_key(session: Session, owner: str, **quotas: int) -> dict[str, str]:
    return bearer(create_api_key(session, create_owner(session, owner, **quotas).id).plain_key)


def test_a_refused_write_leaves_the_key_working(make_api: MakeApi, session: Session) -> None:
    # Seen: after a 409 every request with the key answered 500 until its cache entry
    # expired (the cache kept a store object the refused write had expired).
    headers = new_key(session, "carol")
    api = make_api(auth_cache_s=60)
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    sweep_id = created.json()["id"]
    transition_sweep(session, sweep_id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep_id, SweepStatus.SUCCEEDED)
    refused = api.client.post(f"/v1/sweeps/{sweep_id}/cancel", headers=headers)
    assert refused.status_code == 409, refused.text
    for _ in range(3):
        assert api.client.get(f"/v1/sweeps/{sweep_id}", headers=headers).status_code == 200
        assert api.client.get("/v1/sweeps", headers=headers).status_code == 200
    again = api.client.post(f"/v1/sweeps/{sweep_id}/cancel", headers=headers)
    assert again.status_code == 409
    more = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
    assert more.status_code == 201, more.text


def test_poisoned_bodies_fail_alone_while_another_owner_submits(
    served: str, session: Session, session_factory: sessionmaker[Session]
) -> None:
    # Seen: 219 of 300 valid submissions answered 500 while 10 poisoned ones raced them.
    poisoner = new_key(session, "mallory")
    submitter = new_key(session, "dave", max_concurrent_sweeps=100)

    def poisoned(_: int) -> httpx.Response:
        headers = {**poisoner, "content-type": "application/json"}
        return httpx.post(f"{served}/v1/sweeps", content=POISONED, headers=headers, timeout=60)

    def valid(index: int) -> httpx.Response:
        spec = {"extends": "smoke", "description": f"valid {index} — non-ASCII is fine"}
        return httpx.post(f"{served}/v1/sweeps", json=spec, headers=submitter, timeout=60)

    with ThreadPoolExecutor(max_workers=16) as pool:
        bad = [pool.submit(poisoned, i) for i in range(10)]
        good = [pool.submit(valid, i) for i in range(40)]
        answers = [f.result() for f in good], [f.result() for f in bad]
    assert [r.status_code for r in answers[0]] == [201] * 40
    for refused in answers[1]:
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["code"] == "invalid_spec"
        assert body["detail"][0]["loc"] == ["body", "description"]
        assert "lone surrogate" in body["detail"][0]["msg"]
    assert stored_sweeps(session_factory) == 40


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"extends": "smoke", "description": "\xff\xfe"}', 400),  # not UTF-8
        (b"extends: smoke", 422),  # not JSON
        (b'{"extends": "smoke", "\\udc00": 1}', 422),  # a lone surrogate in a key
    ],
)
def test_bodies_that_are_not_valid_text_get_a_json_4xx(
    served: str, session_factory: sessionmaker[Session], body: bytes, status: int
) -> None:
    headers = {"content-type": "application/json"}
    refused = httpx.post(f"{served}/v1/sweeps", content=body, headers=headers, timeout=60)
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["code"] in ("invalid_request", "invalid_spec", "unreadable_body")
    assert stored_sweeps(session_factory) == 0


def test_a_spec_over_the_limit_is_refused_at_submission(
    make_api: MakeApi, session_factory: sessionmaker[Session]
) -> None:
    # Seen: a 300 KB spec was accepted, then failed four times on the cluster.
    api = make_api()
    spec = {"extends": "smoke", "description": "x" * 300_000}
    refused = api.client.post("/v1/sweeps", json=spec)
    assert refused.status_code == 413, refused.text
    assert refused.json()["code"] == "spec_too_large"
    assert "limit is 262144" in refused.json()["detail"]
    assert stored_sweeps(session_factory) == 0
    assert api.runner.submitted == []
    fits = {"extends": "smoke", "description": "x" * 200_000}
    assert api.client.post("/v1/sweeps", json=fits).status_code == 201


def test_many_polling_clients_never_starve_the_connection_pool(
    database_url: URL, tracking: MlflowClient, installed_datasets: Path, tmp_path: Path
) -> None:
    # Seen: under 70 concurrent clients every store connection was held by a request
    # waiting for a thread, every thread waited for a connection, and requests took
    # 30 s to 180 s (pool timeouts) where they take milliseconds.
    engine = create_engine_for(database_url, pool_size=2, max_overflow=0, pool_timeout=5)
    upgrade(engine)
    settings = ServiceSettings(
        home=tmp_path / "home",
        datasets_dir=installed_datasets,
        mlflow_tracking_uri=tracking.tracking_uri,
        api_threads=2,
    )
    sessions = create_session_factory(engine)
    app = create_app(settings, session_factory=sessions, runner=FakeRunner(), tracking=tracking)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    created = httpx.post(f"{base}/v1/sweeps", json={"extends": "smoke"}, timeout=60)
    sweep = f"{base}/v1/sweeps/{created.json()['id']}"
    paths = [f"{base}/v1/sweeps", sweep, f"{base}/healthz", f"{base}/v1/search-spaces"]
    try:
        with ThreadPoolExecutor(max_workers=40) as pool:
            answers = list(pool.map(lambda i: httpx.get(paths[i % 4], timeout=60), range(400)))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.dispose()
    assert Counter(answer.status_code for answer in answers) == {200: 400}
