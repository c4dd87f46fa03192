"""The presets, health, metrics, the OpenAPI document and what importing the app loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.presets import preset_names
from sweep_service.api import create_app
from sweep_service.settings import ServiceSettings
from sweep_service.store import Owner, create_api_key
from tests.service.api_fixtures import Api, FakeRunner, MakeApi, bearer


def test_search_spaces_list_every_preset_with_its_trial_count(api: Api) -> None:
    listed = api.client.get("/v1/search-spaces").json()
    assert [preset["name"] for preset in listed["data"]] == preset_names()
    assert listed["count"] == len(preset_names())
    smoke = next(preset for preset in listed["data"] if preset["name"] == "smoke")
    assert smoke["trial_count"] == 2 and "Smoke test" in smoke["description"]


def test_a_search_space_is_its_resolved_spec(api: Api) -> None:
    smoke = api.client.get("/v1/search-spaces/smoke").json()
    assert smoke["trial_count"] == 2
    assert smoke["spec"]["model"] == "tiny-bert"
    assert smoke["spec"]["search_space"]["losses"][0]["name"] == "ce"


def test_an_unknown_search_space_is_404_listing_the_valid_names(api: Api) -> None:
    missing = api.client.get("/v1/search-spaces/nope")
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": f"unknown preset 'nope'; valid: {', '.join(preset_names())}",
        "code": "unknown_preset",
    }


def test_a_submission_naming_an_unknown_preset_is_a_documented_422(api: Api) -> None:
    refused = api.client.post("/v1/sweeps", json={"extends": "nope"})
    assert refused.status_code == 422
    documented = api.client.get("/openapi.json").json()["paths"]["/v1/sweeps"]["post"]
    assert "404" not in documented["responses"]
    assert "an unknown preset in extends" in documented["responses"]["422"]["description"]


def test_health_checks_the_store(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}


def test_health_is_503_when_the_store_does_not_answer(
    tmp_path: Path, tracking: MlflowClient
) -> None:
    # A plain engine on a file in a folder that does not exist: every connection fails.
    broken = sessionmaker(bind=create_engine(f"sqlite:///{tmp_path / 'absent' / 'store.db'}"))
    settings = ServiceSettings(home=tmp_path, mlflow_tracking_uri=tracking.tracking_uri)
    app = create_app(settings, session_factory=broken, runner=FakeRunner(), tracking=tracking)
    with TestClient(app) as client:
        unhealthy = client.get("/healthz")
    assert unhealthy.status_code == 503
    assert unhealthy.json() == {"detail": "the store does not answer", "code": "store_unavailable"}


class UnreachableTracking(MlflowClient):
    """An MLflow client whose server never answers."""

    def get_experiment_by_name(self, name: str) -> Any:
        raise MlflowException("connection refused")

    def search_experiments(self, *args: Any, **kwargs: Any) -> Any:
        raise MlflowException("connection refused")

    def search_runs(self, *args: Any, **kwargs: Any) -> Any:
        raise MlflowException("connection refused")


def test_an_unreachable_mlflow_is_503_where_mlflow_is_read(make_api: MakeApi) -> None:
    api = make_api(tracking_client=UnreachableTracking(tracking_uri="http://mlflow:5000"))
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}).json()
    # The detail answers from the store (progress as last read), MLflow or not.
    assert api.client.get(f"/v1/sweeps/{created['id']}").status_code == 200
    for path in ("/trials", "/grid"):
        refused = api.client.get(f"/v1/sweeps/{created['id']}{path}")
        assert refused.status_code == 503, path
        assert refused.json() == {
            "detail": "MLflow did not answer: connection refused",
            "code": "tracking_unavailable",
        }


def test_metrics_count_requests_by_route_template_and_submissions(api: Api) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}).json()
    api.client.get(f"/v1/sweeps/{created['id']}")
    api.client.get("/v1/sweeps/sw-missing")
    response = api.client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    route = 'route="/v1/sweeps/{sweep_id}"'
    assert f'dicesweep_http_requests_total{{method="GET",{route},status="200"}} 1.0' in text
    assert f'dicesweep_http_requests_total{{method="GET",{route},status="404"}} 1.0' in text
    assert 'dicesweep_http_requests_total{method="POST",route="/v1/sweeps",status="201"}' in text
    assert "dicesweep_http_request_duration_seconds_bucket" in text
    assert "dicesweep_sweeps_submitted_total 1.0" in text
    assert "sw-missing" not in text


def test_metrics_answer_only_the_owners_the_operator_names(
    make_api: MakeApi, session: Session, alice: Owner, bob: Owner
) -> None:
    # Every owner's requests and submissions are counted together: an owner's key
    # alone does not show them.
    api = make_api(metrics_owners=["alice"])
    operator = bearer(create_api_key(session, alice.id).plain_key)
    other = bearer(create_api_key(session, bob.id).plain_key)
    assert (
        api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=other).status_code == 201
    )
    refused = api.client.get("/metrics", headers=other)
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "GET /metrics answers only the owners DICESWEEP_METRICS_OWNERS names",
        "code": "forbidden",
    }
    shown = api.client.get("/metrics", headers=operator)
    assert shown.status_code == 200
    assert "dicesweep_sweeps_submitted_total 1.0" in shown.text
    assert "bob" not in shown.text and "alice" not in shown.text


def test_openapi_has_an_example_body_per_preset(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    body = document["paths"]["/v1/sweeps"]["post"]["requestBody"]["content"]["application/json"]
    examples = body["examples"]
    assert set(examples) == set(preset_names())
    assert examples["table8"]["value"] == {"extends": "table8"}
    assert {"/v1/sweeps/{sweep_id}/grid", "/healthz", "/metrics"} <= set(document["paths"])
    assert api.client.get("/docs").status_code == 200


def test_unknown_paths_answer_in_the_error_body(api: Api) -> None:
    missing = api.client.get("/v2/nothing")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Not Found", "code": "not_found"}
    wrong_method = api.client.delete("/v1/sweeps")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["code"] == "method_not_allowed"


HEAVY = ("torch", "transformers", "trainables", "ray")
PROBE = f"""
import json, sys
import sweep_service.api
print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
"""


def test_importing_the_app_leaves_torch_ray_and_the_trainables_out() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []
