"""A sweep whose every trial was constant (its model learned nothing): its table says
it has no scored seed, through the API and ``dicesweep grid``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft


def constant_sweep(session: Session, owner: Owner, tracking: MlflowClient) -> str:
    """One of ``owner``'s sweeps whose two trials (ce and dsc, seed 0) were both constant."""
    sweep = create_sweep(session, owner.id, make_draft("all-constant")).sweep
    trials = [FakeTrial({"name": name}, eval_f1=0.0) for name in ("ce", "dsc")]
    stamp = int(time.time() * 1000)
    for run_id in write_trials(tracking, sweep.id, trials):
        tracking.log_metric(run_id, "eval_distinct_predictions", 1, stamp)
    return sweep.id


def test_a_table_of_constant_trials_says_it_has_no_scored_seed(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep_id = constant_sweep(session, alice, tracking)
    headers = bearer(create_api_key(session, alice.id).plain_key)
    served = api.client.get(
        f"/v1/sweeps/{sweep_id}/grid", params={"format": "markdown"}, headers=headers
    )
    assert served.status_code == 200, served.text
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_MLFLOW_TRACKING_URI"] = tracking.tracking_uri
    command = [sys.executable, "-m", "sweep_service.cli", "grid", sweep_id]
    printed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr
    for text in (served.text, printed.stdout):
        assert "| ce     | [1/1 constant] |" in text
        assert "\neval_f1: no scored seed.\n" in text and "0 seed" not in text
