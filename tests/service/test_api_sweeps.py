"""Reading and cancelling sweeps: pages, owner isolation, progress from MLflow, cancel."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from mlflow.tracking import MlflowClient
from pydantic import ValidationError
from sqlalchemy.orm import Session

from sweep_service.api.trials import trial_counts
from sweep_service.progress import read_progress
from sweep_service.settings import ServiceSettings
from sweep_service.store import (
    Owner,
    Sweep,
    SweepStatus,
    TrialProgress,
    create_api_key,
    create_sweep,
    record_progress,
    record_resubmission,
    transition_sweep,
)
from tests.service.api_fixtures import (
    Api,
    FakeTrial,
    MakeApi,
    bearer,
    experiment_id,
    write_parent,
    write_trials,
)
from tests.service.factories import make_draft


def _sweep(session: Session, owner: Owner, name: str = "sweep", trials: int = 2) -> Sweep:
    return create_sweep(session, owner.id, make_draft(name, trials=trials)).sweep


def test_sweeps_come_in_pages_newest_first(api: Api, session: Session, alice: Owner) -> None:
    key = create_api_key(session, alice.id).plain_key
    ids = [_sweep(session, alice, f"s{i}").id for i in range(5)]
    seen, token, counts = [], None, set()
    while True:
        params = {"limit": 2, **({"page_token": token} if token else {})}
        page = api.client.get("/v1/sweeps", params=params, headers=bearer(key)).json()
        assert len(page["data"]) <= 2
        seen += [sweep["id"] for sweep in page["data"]]
        counts.add(page["count"])
        token = page["next_page_token"]
        if token is None:
            break
    assert seen == ids[::-1]
    assert counts == {5}


def test_a_limit_over_the_cap_is_served_capped_and_a_bad_token_refused(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    _sweep(session, alice)
    capped = api.client.get("/v1/sweeps", params={"limit": 10_000}, headers=bearer(key))
    assert capped.status_code == 200 and capped.json()["count"] == 1
    bad = api.client.get("/v1/sweeps", params={"page_token": "garbage"}, headers=bearer(key))
    assert bad.status_code == 400
    assert bad.json() == {
        "detail": "page_token: not a token from an earlier page",
        "code": "invalid_argument",
    }
    zero = api.client.get("/v1/sweeps", params={"limit": 0}, headers=bearer(key))
    assert zero.status_code == 422 and zero.json()["detail"][0]["loc"] == ["query", "limit"]


def test_an_owner_never_sees_another_owners_sweeps(
    api: Api, session: Session, alice: Owner, bob: Owner
) -> None:
    alice_key = create_api_key(session, alice.id).plain_key
    bob_key = create_api_key(session, bob.id).plain_key
    mine = _sweep(session, alice, "mine").id
    theirs = _sweep(session, bob, "theirs").id
    listed = api.client.get("/v1/sweeps", headers=bearer(alice_key)).json()
    assert [sweep["id"] for sweep in listed["data"]] == [mine]
    assert listed["count"] == 1
    for method, path in [
        ("GET", f"/v1/sweeps/{theirs}"),
        ("GET", f"/v1/sweeps/{theirs}/trials"),
        ("GET", f"/v1/sweeps/{theirs}/grid"),
        ("POST", f"/v1/sweeps/{theirs}/cancel"),
    ]:
        hidden = api.client.request(method, path, headers=bearer(alice_key))
        assert hidden.status_code == 404, path
        assert hidden.json() == {"detail": f"no sweep {theirs!r}", "code": "not_found"}
    assert api.client.get(f"/v1/sweeps/{theirs}", headers=bearer(bob_key)).status_code == 200
    assert api.runner.stopped == []


def test_a_new_sweep_has_every_trial_pending_and_no_best(api: Api, session: Session) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}).json()
    detail = api.client.get(f"/v1/sweeps/{created['id']}").json()
    assert detail["trials"] == {"pending": 2, "running": 0, "done": 0, "failed": 0, "stopped": 0}
    assert detail["best_trial"] is None
    assert detail["links"]["mlflow_run"] is None
    assert detail["trials_as_of"] is None


def test_the_detail_counts_trials_by_run_status_and_shows_the_best(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice, trials=6)
    parent = write_parent(tracking, sweep.id)
    run_ids = write_trials(
        tracking,
        sweep.id,
        [
            FakeTrial({"name": "ce"}, seed=0, eval_f1=80.0),
            FakeTrial({"name": "dsc", "alpha": 0.1}, seed=1, eval_f1=86.5),
            FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, status="RUNNING", eval_f1=70.0),
            FakeTrial({"name": "focal", "gamma": 2}, seed=0, status="FAILED"),
            FakeTrial({"name": "focal", "gamma": 2}, seed=1, status="KILLED"),
        ],
    )
    # What the reconciler does once a pass; the GET reads only the store.
    record_progress(session, sweep.id, read_progress(tracking, sweep.id))
    detail = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()
    assert detail["trials"] == {"pending": 1, "running": 1, "done": 2, "failed": 1, "stopped": 1}
    assert detail["best_trial"] == {
        "run_id": run_ids[1],
        "loss": "dsc(alpha=0.1)",
        "seed": 1,
        "dataset": "mrpc",
        "variant": "original",
        "eval_f1": 86.5,
    }
    links = detail["links"]
    # The tracking store is SQLite: the links go to where `dicesweep ui` serves it, in
    # the UI's model-training view.
    experiment = f"http://127.0.0.1:5000/#/experiments/{experiment_id(tracking)}"
    view = "?workflowType=machine_learning"
    assert links["mlflow_experiment"] == f"{experiment}/runs{view}"
    assert links["mlflow_run"] == f"{experiment}/runs/{parent}{view}"
    # The chart view with the trials' charts first, the experiments' saved view
    assert links["mlflow_charts"] == (
        f"{experiment}/runs{view}&compareRunsMode=CHART&viewStateShareKey=dicesweep-trials-first"
    )
    assert links["page"] == f"/sweeps/{sweep.id}"
    trials = api.client.get(f"/v1/sweeps/{sweep.id}/trials", headers=bearer(key)).json()
    assert {trial["mlflow_run"] for trial in trials["data"]} == {
        f"{experiment}/runs/{run_id}{view}" for run_id in run_ids
    }


def test_mlflow_links_go_to_the_configured_ui(
    make_api: MakeApi, session: Session, alice: Owner
) -> None:
    api = make_api(mlflow_ui_url="https://mlflow.example.org/")
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice, trials=2)
    record_progress(
        session, sweep.id, TrialProgress(mlflow_experiment_id="3", mlflow_parent_run_id="p1")
    )
    links = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()["links"]
    assert links["mlflow_run"] == (
        "https://mlflow.example.org/#/experiments/3/runs/p1?workflowType=machine_learning"
    )
    served = ServiceSettings(mlflow_tracking_uri="http://mlflow:5000/")
    assert served.mlflow_ui == "http://mlflow:5000"
    with pytest.raises(ValidationError, match="DICESWEEP_MLFLOW_UI_URL is where a browser"):
        ServiceSettings(mlflow_ui_url="sqlite:///mlflow.db")


def test_the_detail_answers_from_the_store_not_from_mlflow(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice, trials=4)
    best = {
        "run_id": "r1",
        "loss": "ce",
        "seed": 0,
        "dataset": "mrpc",
        "variant": "original",
        "eval_f1": 81.0,
    }
    progress = TrialProgress(1, 1, 0, best, "7", "abc123")  # no such runs in MLflow
    record_progress(session, sweep.id, progress)
    detail = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()
    assert detail["trials"] == {"pending": 2, "running": 1, "done": 1, "failed": 0, "stopped": 0}
    assert detail["best_trial"] == best
    assert detail["trials_as_of"] is not None
    assert "/#/experiments/7/runs?" in detail["links"]["mlflow_experiment"]
    assert "/#/experiments/7/runs/abc123?" in detail["links"]["mlflow_run"]


def test_the_parent_run_is_searched_only_while_unknown(
    session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep = _sweep(session, alice)
    assert read_progress(tracking, sweep.id).mlflow_parent_run_id is None
    parent = write_parent(tracking, sweep.id)
    assert read_progress(tracking, sweep.id).mlflow_parent_run_id == parent
    assert read_progress(tracking, sweep.id, "known").mlflow_parent_run_id == "known"
    # A known experiment id spares its lookup: one MLflow request per sweep and pass.
    experiment = read_progress(tracking, sweep.id).mlflow_experiment_id
    assert read_progress(tracking, sweep.id, "known", experiment).mlflow_experiment_id == experiment


def test_cancelling_a_submitted_sweep_stops_its_current_job(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice)
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    record_resubmission(session, sweep.id, max_resubmissions=3)
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    cancelled = api.client.post(f"/v1/sweeps/{sweep.id}/cancel", headers=bearer(key))
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelling"
    assert api.runner.stopped == [f"{sweep.id}-retry1"]
    again = api.client.post(f"/v1/sweeps/{sweep.id}/cancel", headers=bearer(key))
    assert again.status_code == 200 and again.json()["status"] == "cancelling"


def test_a_pending_sweep_is_cancelled_at_once(api: Api, session: Session) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}).json()
    cancelled = api.client.post(f"/v1/sweeps/{created['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["finished_at"] is not None
    assert api.runner.stopped == [created["id"]]  # a no-op for a job that never existed


def test_cancelling_a_finished_sweep_is_a_conflict(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice)
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.SUCCEEDED)
    refused = api.client.post(f"/v1/sweeps/{sweep.id}/cancel", headers=bearer(key))
    assert refused.status_code == 409
    assert refused.json()["code"] == "invalid_transition"
    assert api.runner.stopped == []


def test_a_failing_stop_request_is_a_503_and_the_sweep_stays_cancelling(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = _sweep(session, alice)
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)

    def unreachable(job: str) -> None:
        raise ConnectionError("cluster unreachable")

    api.runner.stop = unreachable  # type: ignore[method-assign]
    refused = api.client.post(f"/v1/sweeps/{sweep.id}/cancel", headers=bearer(key))
    assert refused.status_code == 503
    assert refused.json()["code"] == "runner_unavailable"
    assert "cluster unreachable" in refused.json()["detail"]
    status = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()["status"]
    assert status == "cancelling"


@pytest.mark.parametrize(
    ("status", "seeds", "pending"),
    [
        (SweepStatus.SUCCEEDED, {"min": 3, "max": 5, "until": "decided"}, 0),
        (SweepStatus.RUNNING, {"min": 3, "max": 5, "until": "decided"}, 2),
        (SweepStatus.FAILED, [0, 1, 2, 3, 4], 2),
    ],
)
def test_a_finished_sweep_of_seeds_until_decided_has_none_pending(
    status: SweepStatus, seeds: Any, pending: int
) -> None:
    """Its trial count is the cap its rule stopped short of (13 of 15 run here)."""
    sweep = SimpleNamespace(
        status=status,
        resolved_spec={"seeds": seeds},
        trial_count=15,
        trials_running=0,
        trials_done=13,
        trials_failed=0,
        trials_stopped=0,
    )
    assert trial_counts(cast(Sweep, sweep)).pending == pending
