"""The API against its own OpenAPI document: schemathesis generates requests for every
operation (valid and invalid ones, with an API key) and checks each answer: no 5xx,
every status documented, every body as the schema says. The app runs over the real
store and an MLflow store; a few sweeps and trial runs exist so that generated ids
sometimes hit."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import hypothesis
import hypothesis.errors
import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis.strategies import SearchStrategy
from mlflow.tracking import MlflowClient
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from schemathesis.specs.openapi.schemas import OpenApiSchema
from sqlalchemy.orm import Session

from sweep_service.store import create_api_key, create_owner
from tests.service.api_fixtures import FakeTrial, MakeApi, bearer, write_parent, write_trials

EXAMPLES_PER_OPERATION = 40
# A schema-valid spec may still break a rule JSON Schema cannot state (variants not
# repeated, a catalogue data set's files present, a metric the task reports, a grid
# under the trial cap): a 422 naming the field, not a broken contract.
NOT_EXPRESSIBLE = [positive_data_acceptance]


@pytest.fixture
def api_key(session: Session) -> str:
    owner = create_owner(session, "contract", max_concurrent_sweeps=10_000)
    return create_api_key(session, owner.id).plain_key


@dataclass(frozen=True)
class Served:
    schema: OpenApiSchema
    sweep_id: str  # a sweep of the key's owner, with a finished trial


@pytest.fixture
def served(make_api: MakeApi, api_key: str, tracking: MlflowClient) -> Served:
    api = make_api(host="0.0.0.0", max_trials=64)  # off loopback: every route needs the key
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}, headers=bearer(api_key))
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    write_parent(tracking, sweep_id)
    write_trials(tracking, sweep_id, [FakeTrial({"name": "ce"}, eval_f1=80.0)])
    return Served(schemathesis.openapi.from_asgi("/openapi.json", api.client.app), sweep_id)


def cases(operation: APIOperation, mode: GenerationMode, sweep_id: str) -> SearchStrategy[Case]:
    """Generated requests for ``operation``; half of those naming a sweep name the
    existing one, so that they reach the route's own answers, not only 404."""
    generated = operation.as_strategy(generation_mode=mode)
    if "{sweep_id}" not in operation.path:
        return generated
    existing = operation.as_strategy(generation_mode=mode, path_parameters={"sweep_id": sweep_id})
    return st.one_of(generated, existing)


@pytest.mark.parametrize("mode", list(GenerationMode))
def test_every_operation_keeps_its_documented_contract(
    served: Served, api_key: str, mode: GenerationMode
) -> None:
    operations = [result.ok() for result in served.schema.get_all_operations()]
    assert len(operations) == 12  # every /v1 route, /healthz and /metrics
    statuses: Counter[int] = Counter()
    nothing_to_break = []
    for operation in operations:

        @hypothesis.given(case=cases(operation, mode, served.sweep_id))
        @hypothesis.settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            database=None,
            derandomize=True,  # the same requests on every run: CI never flakes on a new one
        )
        def keeps_contract(case: Case) -> None:
            response = case.call_and_validate(
                headers=bearer(api_key), excluded_checks=NOT_EXPRESSIBLE
            )
            statuses[response.status_code] += 1

        try:
            keeps_contract()
        except hypothesis.errors.Unsatisfiable:
            # No parameter or body to make invalid (e.g. GET /healthz).
            assert mode is GenerationMode.NEGATIVE, operation.label
            nothing_to_break.append(operation.label)
    print(
        f"{mode}: {sum(statuses.values())} requests, by status {sorted(statuses.items())}; "
        f"no invalid request exists for {nothing_to_break}"
    )
    assert not [status for status in statuses if status >= 500]
    # The generated requests reach the routes' own answers, not only the refusals.
    assert statuses[200] > 0 and statuses[404] > 0 and statuses[422] > 0
    if mode is GenerationMode.POSITIVE:
        assert statuses[201] > 0
