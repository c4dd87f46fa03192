"""PostgreSQL going away under a running service (cut at a TCP proxy in front of the
real server): requests answer 503 naming the store, quickly, with nothing
half-written, and the service recovers by itself once the server is back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient
from sqlalchemy import URL, func, select

from sweep_service.api import create_app
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep, create_engine_for, create_session_factory, upgrade
from tests.service.api_fixtures import FakeRunner
from tests.tcp_proxy import TcpProxy


@pytest.fixture
def proxy(database_url: URL) -> Iterator[TcpProxy]:
    proxy = TcpProxy((database_url.host or "127.0.0.1", database_url.port or 5432))
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_store_outage_is_a_503_with_its_reason_and_heals_by_itself(
    database_url: URL,
    proxy: TcpProxy,
    tracking: MlflowClient,
    installed_datasets: Path,
    tmp_path: Path,
) -> None:
    engine = create_engine_for(database_url.set(host="127.0.0.1", port=proxy.port))
    upgrade(engine)
    settings = ServiceSettings(
        home=tmp_path / "home",
        datasets_dir=installed_datasets,
        mlflow_tracking_uri=tracking.tracking_uri,
        host="127.0.0.1",
    )
    sessions = create_session_factory(engine)
    app = create_app(settings, session_factory=sessions, runner=FakeRunner(), tracking=tracking)
    with TestClient(app) as client:
        assert client.post("/v1/sweeps", json={"extends": "smoke"}).status_code == 201

        proxy.stop()
        for method, path in [
            ("GET", "/v1/sweeps"),
            ("POST", "/v1/sweeps"),
            ("GET", "/v1/sweeps/sw-0000000000000000"),
            ("GET", "/healthz"),
        ]:
            started = time.monotonic()
            answer = client.request(method, path, json={"extends": "smoke"})
            assert time.monotonic() - started < 10, (method, path)  # no hang
            assert answer.status_code == 503, (method, path, answer.text)
            assert answer.json()["code"] == "store_unavailable"
            assert "the store does not answer" in answer.json()["detail"]
        # What needs no store still answers: the presets (the caller is remembered).
        assert client.get("/v1/search-spaces").status_code == 200

        proxy.start()
        assert client.get("/healthz").status_code == 200
        listed = client.get("/v1/sweeps")
        assert listed.status_code == 200 and listed.json()["count"] == 1
        assert client.post("/v1/sweeps", json={"extends": "smoke"}).status_code == 201
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(Sweep)) == 2
    engine.dispose()
