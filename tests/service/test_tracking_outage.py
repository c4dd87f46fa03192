"""MLflow away: the reconciler still submits and cancels at once, a finished sweep's
table is still served, and an active sweep's reads answer 503 within seconds.

"Away" is a server that accepts connections and never answers (a paused container, a
dead route): the slowest way for MLflow to fail. The clients run under the service's
MLflow settings (``ServiceSettings.mlflow_request_env``); with MLflow's own defaults
(120 s a request, 7 retries with backoff) each of these waits for minutes.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.progress import close_open_runs, read_progress
from sweep_service.reconciler import Reconciler
from sweep_service.runner import JobState
from sweep_service.settings import ServiceSettings
from sweep_service.store import (
    Owner,
    SweepStatus,
    create_api_key,
    create_sweep,
    get_sweep,
    transition_sweep,
)
from tests.service.api_fixtures import FakeTrial, MakeApi, bearer, write_parent, write_trials
from tests.service.factories import make_draft
from tests.service.test_reconciler import ScriptedRunner

TIMEOUT_S = 2


class SilentMlflow:
    """An MLflow address that accepts connections and never answers."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)  # the kernel completes the handshakes; nobody reads
        self.listener.setblocking(False)
        self.client = MlflowClient(f"http://127.0.0.1:{self.listener.getsockname()[1]}")

    def asked(self) -> bool:
        """Whether anybody connected since the last call."""
        try:
            self.listener.accept()[0].close()
        except BlockingIOError:
            return False
        while True:  # drain the rest
            try:
                self.listener.accept()[0].close()
            except BlockingIOError:
                return True


@pytest.fixture
def silent_mlflow(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentMlflow]:
    """MLflow away, and the service's request settings (a 2 s timeout, no retries)."""
    settings = ServiceSettings(mlflow_timeout_s=TIMEOUT_S)
    for name, value in settings.mlflow_request_env().items():
        monkeypatch.setenv(name, value)
    silent = SilentMlflow()
    yield silent
    silent.listener.close()


def tracking_reconciler(
    session_factory: sessionmaker[Session], runner: ScriptedRunner, tracking: MlflowClient
) -> Reconciler:
    """A reconciler wired to ``tracking`` as ``dicesweep serve`` wires it."""
    return Reconciler(
        session_factory,
        runner,
        max_resubmissions=2,
        progress=lambda sweep: read_progress(
            tracking, sweep.id, sweep.mlflow_parent_run_id, sweep.mlflow_experiment_id
        ),
        close_runs=lambda sweep, status, reason: close_open_runs(
            tracking, sweep.id, status, reason
        ),
    )


def test_a_pass_with_mlflow_away_still_submits_and_cancels_within_seconds(
    session_factory: sessionmaker[Session], alice: Owner, silent_mlflow: SilentMlflow
) -> None:
    runner = ScriptedRunner()
    with session_factory() as session:
        running = [create_sweep(session, alice.id, make_draft(f"r{i}")).sweep.id for i in range(3)]
        for sweep_id in running:
            transition_sweep(session, sweep_id, SweepStatus.SUBMITTED)
            transition_sweep(session, sweep_id, SweepStatus.RUNNING)
            runner.jobs[sweep_id] = (JobState.RUNNING, "")
        doomed = running[0]
        transition_sweep(session, doomed, SweepStatus.CANCELLING)
        pending = create_sweep(session, alice.id, make_draft("new")).sweep.id
    reconciler = tracking_reconciler(session_factory, runner, silent_mlflow.client)

    started = time.monotonic()
    reconciler.follow_jobs()
    assert time.monotonic() - started < 1.0  # never waits on MLflow
    assert runner.submitted == [(pending, pending)] and runner.stopped == [doomed]

    started = time.monotonic()
    reconciler.run_once()  # the job has stopped: cancelled; then MLflow times out once
    elapsed = time.monotonic() - started
    # One read waits out the timeout, and ends the pass: not one timeout per sweep.
    assert elapsed < TIMEOUT_S + 3, f"a pass took {elapsed:.1f} s with MLflow away"
    with session_factory() as session:
        assert get_sweep(session, alice.id, doomed).status is SweepStatus.CANCELLED
        assert get_sweep(session, alice.id, pending).status is SweepStatus.SUBMITTED
        assert get_sweep(session, alice.id, running[1]).trials_synced_at is None


def test_a_finished_sweeps_table_is_served_with_mlflow_away(
    session_factory: sessionmaker[Session],
    alice: Owner,
    tracking: MlflowClient,
    make_api: MakeApi,
    silent_mlflow: SilentMlflow,
) -> None:
    runner = ScriptedRunner()
    with session_factory() as session:
        finished = create_sweep(session, alice.id, make_draft("done", trials=4)).sweep.id
        active = create_sweep(session, alice.id, make_draft("active", trials=2)).sweep.id
        headers = bearer(create_api_key(session, alice.id).plain_key)
    write_parent(tracking, finished)
    write_trials(
        tracking,
        finished,
        [
            FakeTrial({"name": "ce"}, seed=0, eval_f1=80.0),
            FakeTrial({"name": "ce"}, seed=1, eval_f1=82.0),
            FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, eval_f1=84.0),
            FakeTrial({"name": "dsc", "alpha": 0.1}, seed=1, status="FAILED", reason="oom"),
        ],
    )
    reconciler = tracking_reconciler(session_factory, runner, tracking)
    reconciler.run_once()  # both submitted
    runner.jobs[finished] = (JobState.SUCCEEDED, "")
    runner.jobs[active] = (JobState.RUNNING, "")
    reconciler.run_once()  # finished: read once more, its rows kept in the store

    api = make_api(tracking_client=silent_mlflow.client)  # MLflow goes away
    grid = api.client.get(f"/v1/sweeps/{finished}/grid", headers=headers)
    assert grid.status_code == 200, grid.text
    cells = {(cell["row"], cell["column"]): cell for cell in grid.json()["cells"]}
    assert cells[("ce", "mrpc")]["mean"] == pytest.approx(81.0)
    assert cells[("dsc(alpha=0.1)", "mrpc")]["count"] == 1
    trials = api.client.get(f"/v1/sweeps/{finished}/trials", headers=headers).json()
    assert trials["count"] == 4
    assert {t["failure_reason"] for t in trials["data"]} == {None, "oom"}
    merged = api.client.get(
        "/v1/grid", params={"ids": finished, "format": "markdown"}, headers=headers
    )
    assert merged.status_code == 200 and "dsc(alpha=0.1)" in merged.text
    page = api.client.get(f"/sweeps/{finished}", headers=headers)
    assert page.status_code == 200 and "84.00" in page.text
    assert not silent_mlflow.asked()  # all of it from the store

    started = time.monotonic()
    unreadable = api.client.get(f"/v1/sweeps/{active}/grid", headers=headers)
    assert time.monotonic() - started < TIMEOUT_S + 3
    assert unreadable.status_code == 503
    assert unreadable.json()["code"] == "tracking_unavailable" and silent_mlflow.asked()
    assert "MLflow" in unreadable.json()["detail"]
