"""Each owner's sweeps in the owner's own MLflow experiment, over the real store and a
real MLflow store: the reconciler names it to the driver, the driver creates it, and
an owner's links and reads reach that experiment only."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.contract import ROLE_TAG, SWEEP_TAG, TRIAL_TAG, experiment_name
from search_spaces.resolve import resolve_spec
from search_spaces.settings import DicesweepSettings
from sweep_service.progress import close_open_runs, read_progress
from sweep_service.reconciler import Reconciler
from sweep_service.runner import JobState
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import MakeApi, bearer
from tests.service.factories import make_draft
from tests.service.test_reconciler import ScriptedRunner
from trainables.driver.parent import open_tracking


def test_each_owner_s_sweeps_go_to_the_owner_s_own_experiment(
    make_api: MakeApi,
    session_factory: sessionmaker[Session],
    session: Session,
    alice: Owner,
    bob: Owner,
    tmp_path: Path,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = MlflowClient(uri)
    sweeps = {
        owner.name: create_sweep(session, owner.id, make_draft(owner.name)).sweep.id
        for owner in (alice, bob)
    }
    runner = ScriptedRunner()
    reconciler = Reconciler(
        session_factory,
        runner,
        max_resubmissions=1,
        progress=lambda sweep: read_progress(
            tracking, sweep.id, sweep.mlflow_parent_run_id, sweep.mlflow_experiment_id
        ),
    )
    reconciler.run_once()
    # The service names each driver its owner's experiment.
    assert runner.experiments == {
        sweeps["alice"]: "dicesweep/alice",
        sweeps["bob"]: "dicesweep/bob",
    }

    # Each driver opens its tracking there (creating the experiment) and a trial logs.
    settings = DicesweepSettings(home=tmp_path / "home", mlflow_tracking_uri=uri)
    spec = resolve_spec({"extends": "smoke"})
    for sweep_id in sweeps.values():
        _, link = open_tracking(settings, sweep_id, spec, runner.experiments[sweep_id])
        tags = {SWEEP_TAG: sweep_id, TRIAL_TAG: "t0", ROLE_TAG: "trial"}
        trial = tracking.create_run(link.experiment_id, tags=tags)
        runner.jobs[sweep_id] = (JobState.RUNNING, "")
    reconciler.run_once()  # running: their progress is read

    experiments = {
        owner: tracking.get_experiment_by_name(experiment_name(owner)) for owner in sweeps
    }
    assert all(experiment is not None for experiment in experiments.values())
    api = make_api(tracking_client=tracking, mlflow_tracking_uri=uri)
    for owner in (alice, bob):
        headers = bearer(create_api_key(session, owner.id).plain_key)
        sweep_id = sweeps[owner.name]
        detail = api.client.get(f"/v1/sweeps/{sweep_id}", headers=headers).json()
        own = experiments[owner.name].experiment_id  # type: ignore[union-attr]
        assert f"/#/experiments/{own}/runs?" in detail["links"]["mlflow_experiment"], detail
        # What the owner's experiment link lists: the owner's runs, no one else's.
        listed = tracking.search_runs([own])
        assert {run.data.tags[SWEEP_TAG] for run in listed} == {sweep_id}
        trials = api.client.get(f"/v1/sweeps/{sweep_id}/trials", headers=headers)
        assert trials.status_code == 200, trials.text
        [trial] = trials.json()["data"]  # its own trial, linked into its own experiment
        assert f"/#/experiments/{own}/runs/" in trial["mlflow_run"], trial

    # A cancelled or failed sweep's runs are closed in its owner's experiment.
    assert close_open_runs(tracking, sweeps["bob"], "KILLED", "cancelled") == 2
    bob_runs = tracking.search_runs([experiments["bob"].experiment_id])  # type: ignore[union-attr]
    assert {run.info.status for run in bob_runs} == {"KILLED"}
    alice_runs = tracking.search_runs([experiments["alice"].experiment_id])  # type: ignore[union-attr]
    assert {run.info.status for run in alice_runs} == {"RUNNING"}
