"""Who may call the API: the loopback exception, keys by either header, 401s."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sqlalchemy.orm import Session

from sweep_service.api import auth
from sweep_service.store import Owner, create_api_key, get_owner_by_name, revoke_api_key
from tests.service.api_fixtures import Api, MakeApi, bearer


def test_loopback_without_keys_acts_as_the_local_owner(api: Api, session: Session) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"})
    assert created.status_code == 201
    listed = api.client.get("/v1/sweeps")
    assert listed.status_code == 200
    assert [sweep["id"] for sweep in listed.json()["data"]] == [created.json()["id"]]
    assert get_owner_by_name(session, "local").max_concurrent_sweeps >= 1


def test_once_a_key_exists_every_route_but_health_needs_one(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    for method, path in [("GET", "/v1/sweeps"), ("GET", "/v1/search-spaces"), ("GET", "/metrics")]:
        refused = api.client.request(method, path)
        assert refused.status_code == 401, path
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        assert refused.json()["code"] == "authentication_failed"
    assert api.client.get("/healthz").status_code == 200
    assert api.client.get("/v1/sweeps", headers=bearer(key)).status_code == 200
    assert api.client.get("/v1/sweeps", headers={"X-API-Key": key}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer ds_000000000000_" + "A" * 43},
        {"X-API-Key": "not-a-key"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
    ],
    ids=["unknown-key", "malformed-key", "not-bearer", "empty-bearer"],
)
def test_a_wrong_key_is_refused(
    api: Api, session: Session, alice: Owner, headers: dict[str, str]
) -> None:
    create_api_key(session, alice.id)
    refused = api.client.get("/v1/sweeps", headers=headers)
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert refused.json()["code"] == "authentication_failed"


def test_a_revoked_key_is_refused(api: Api, session: Session, alice: Owner) -> None:
    issued = create_api_key(session, alice.id)
    revoke_api_key(session, issued.api_key.prefix)
    assert api.client.get("/v1/sweeps", headers=bearer(issued.plain_key)).status_code == 401


def test_a_key_revoked_while_in_use_is_refused_once_its_owner_is_forgotten(
    make_api: MakeApi, session: Session, alice: Owner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cache's clock is the test's: a slow machine once took longer than the
    # cache's lifetime between two requests.
    now = [1000.0]
    monkeypatch.setattr(auth, "time", SimpleNamespace(monotonic=lambda: now[0]))
    api = make_api(auth_cache_s=5)
    issued = create_api_key(session, alice.id)
    headers = bearer(issued.plain_key)
    assert api.client.get("/v1/sweeps", headers=headers).status_code == 200
    revoke_api_key(session, issued.api_key.prefix)
    now[0] += 4.9
    assert api.client.get("/v1/sweeps", headers=headers).status_code == 200  # remembered
    now[0] += 0.2
    assert api.client.get("/v1/sweeps", headers=headers).status_code == 401


def test_without_the_cache_a_revocation_takes_effect_at_once(
    make_api: MakeApi, session: Session, alice: Owner
) -> None:
    api = make_api(auth_cache_s=0)
    issued = create_api_key(session, alice.id)
    assert api.client.get("/v1/sweeps", headers=bearer(issued.plain_key)).status_code == 200
    revoke_api_key(session, issued.api_key.prefix)
    assert api.client.get("/v1/sweeps", headers=bearer(issued.plain_key)).status_code == 401


def test_a_wrong_key_is_never_remembered(api: Api, session: Session, alice: Owner) -> None:
    issued = create_api_key(session, alice.id)
    wrong = issued.plain_key[:-1] + ("A" if issued.plain_key[-1] != "A" else "B")
    for _ in range(2):
        assert api.client.get("/v1/sweeps", headers=bearer(wrong)).status_code == 401
    assert api.client.get("/v1/sweeps", headers=bearer(issued.plain_key)).status_code == 200


def test_a_presented_key_is_checked_even_on_loopback_without_keys(api: Api) -> None:
    assert api.client.get("/v1/sweeps", headers={"X-API-Key": "wrong"}).status_code == 401


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.org"])
def test_off_loopback_a_key_is_required_even_with_none_created(
    make_api: MakeApi, host: str
) -> None:
    api = make_api(host=host)
    refused = api.client.post("/v1/sweeps", json={"extends": "smoke"})
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert api.client.get("/healthz").status_code == 200
