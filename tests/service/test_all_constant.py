"""A sweep whose every trial was constant (its model learned nothing): its table says
it has no scored seed, through the API and ``dicesweep grid``, and ``dicesweep status``
says it has no best once it ended, not that it has none yet."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.progress import read_progress
from sweep_service.store import (
    Owner,
    SweepStatus,
    create_api_key,
    create_sweep,
    record_progress,
    transition_sweep,
)
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft
from tests.service.test_cli_output import SPEC, dicesweep
from tests.service.test_regressions import served  # noqa: F401 (the fixture)


def write_constant_trials(tracking: MlflowClient, sweep_id: str) -> None:
    """Two trials of ``sweep_id`` (ce and dsc, seed 0), both constant."""
    trials = [FakeTrial({"name": name}, eval_f1=0.0) for name in ("ce", "dsc")]
    stamp = int(time.time() * 1000)
    for run_id in write_trials(tracking, sweep_id, trials):
        tracking.log_metric(run_id, "eval_distinct_predictions", 1, stamp)


def constant_sweep(session: Session, owner: Owner, tracking: MlflowClient) -> str:
    """One of ``owner``'s sweeps whose every trial was constant."""
    sweep = create_sweep(session, owner.id, make_draft("all-constant")).sweep
    write_constant_trials(tracking, sweep.id)
    return sweep.id


def test_a_table_of_constant_trials_says_it_has_no_scored_seed(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep_id = constant_sweep(session, alice, tracking)
    headers = bearer(create_api_key(session, alice.id).plain_key)
    answered = api.client.get(
        f"/v1/sweeps/{sweep_id}/grid", params={"format": "markdown"}, headers=headers
    )
    assert answered.status_code == 200, answered.text
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_MLFLOW_TRACKING_URI"] = tracking.tracking_uri
    command = [sys.executable, "-m", "sweep_service.cli", "grid", sweep_id]
    printed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr
    for text in (answered.text, printed.stdout):
        assert "| ce     | [1/1 constant] |" in text
        assert "\neval_f1: no scored seed.\n" in text and "0 seed" not in text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_status_of_an_ended_sweep_without_a_best_says_it_ended(
    served: str,  # noqa: F811
    tmp_path: Path,
    tracking: MlflowClient,
    session_factory: sessionmaker[Session],
) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    submitted = dicesweep(served, tmp_path, "submit", "spec.yaml", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    sweep_id = submitted.stdout.split()[1]
    write_constant_trials(tracking, sweep_id)
    with session_factory() as session:  # what the reconciler stores from MLflow
        record_progress(session, sweep_id, read_progress(tracking, sweep_id))
    running = dicesweep(served, tmp_path, "status", sweep_id).stdout.splitlines()
    with session_factory() as session:
        for status in (SweepStatus.SUBMITTED, SweepStatus.SUCCEEDED):
            transition_sweep(session, sweep_id, status)
    ended = dicesweep(served, tmp_path, "status", sweep_id)
    assert ended.returncode == 0, ended.stderr
    assert "best:    none yet" in running
    assert "best:    none (the sweep ended; no trial learned)" in ended.stdout.splitlines()
