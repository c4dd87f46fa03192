"""Fixtures and helpers for the API tests: a recording runner, apps over the real
store, and an MLflow store on SQLite filled with trial runs as the driver writes them
(the tags and params of ``trainables.driver.tracking``, written here without torch)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.contract import (
    EXPERIMENT,
    FAILURE_TAG,
    LOSS_LABEL_TAG,
    ROLE_TAG,
    SWEEP_TAG,
    TRIAL_TAG,
)
from search_spaces.datasets import DATASETS
from search_spaces.reports import loss_label
from search_spaces.setup import setup_params, trial_setup
from sweep_service.api import create_app
from sweep_service.runner import Job, JobState
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep

INSTALLED = ("mrpc", "ud_en_ewt")  # the data sets whose trial files the generated folder holds


@dataclass
class FakeRunner:
    """A runner that records what it is asked and never reaches a cluster."""

    submitted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    cluster: list[dict[str, float]] | None = None  # its nodes' resources; None: unknown

    def submit(self, job: str, sweep_id: str, spec: Mapping[str, Any], experiment: str) -> None:
        self.submitted.append(job)

    def state(self, job: str) -> Job:
        return Job(JobState.MISSING)

    def stop(self, job: str) -> None:
        self.stopped.append(job)

    def logs(self, job: str) -> str:
        return ""

    def nodes(self) -> list[dict[str, float]] | None:
        return self.cluster


@dataclass
class Api:
    """An app under test, its client and what it was built with."""

    client: TestClient
    runner: FakeRunner
    settings: ServiceSettings


MakeApi = Callable[..., Api]


@dataclass(frozen=True)
class FakeTrial:
    """One trial run to write: its loss spec, data, seed, final status and eval_f1."""

    loss: dict[str, Any]
    seed: int = 0
    dataset: str = "mrpc"
    variant: str = "original"
    status: str = "FINISHED"
    eval_f1: float | None = None
    reason: str | None = None  # a failed trial's reason, tagged as the driver tags it
    metrics: dict[str, float] = field(default_factory=dict)  # more final metrics
    # More of its trial config (formulation, model, training, ...): its setup params
    # (search_spaces.setup) are the driver's for that config.
    config: dict[str, Any] = field(default_factory=dict)

    def trial_config(self, sweep_id: str) -> dict[str, Any]:
        """The trial config the driver would have handed this trial."""
        return {
            "sweep_id": sweep_id,
            "model": "tiny-bert",
            "training": {},
            "dataset": self.dataset,
            "variant": self.variant,
            "loss": self.loss,
            "seed": self.seed,
            **self.config,
        }


@pytest.fixture(scope="session")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> MlflowClient:
    """An MLflow store on SQLite shared by the session's tests: creating one costs
    seconds, and each test writes runs under its own sweep ids."""
    folder = tmp_path_factory.mktemp("mlflow")
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    client.create_experiment(EXPERIMENT, artifact_location=str(folder / "artifacts"))
    return client


@pytest.fixture
def installed_datasets(tmp_path: Path) -> Path:
    """A data-sets folder holding the train and eval files of ``INSTALLED`` only."""
    root = tmp_path / "datasets"
    for name in INSTALLED:
        for relative in DATASETS[name].files.values():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text("generated for the API tests\n")
    return root


@pytest.fixture
def make_api(
    session_factory: sessionmaker[Session],
    tracking: MlflowClient,
    installed_datasets: Path,
    tmp_path: Path,
) -> Iterator[MakeApi]:
    """Build apps over the test's store and ``tracking`` (or ``tracking_client``),
    stopping jobs through ``runner`` (default: a new ``FakeRunner``); other keyword
    arguments override the settings (default: loopback host, the generated data sets)."""
    clients: list[TestClient] = []

    def build(
        tracking_client: MlflowClient | None = None,
        runner: FakeRunner | None = None,
        **overrides: Any,
    ) -> Api:
        values: dict[str, Any] = {
            "home": tmp_path / "home",
            "datasets_dir": installed_datasets,
            "mlflow_tracking_uri": tracking.tracking_uri,
            "host": "127.0.0.1",
            **overrides,
        }
        settings = ServiceSettings(**values)
        runner = runner or FakeRunner()
        app = create_app(
            settings,
            session_factory=session_factory,
            runner=runner,
            tracking=tracking_client or tracking,
        )
        clients.append(TestClient(app))
        return Api(clients[-1], runner, settings)

    yield build
    for client in clients:
        client.close()


@pytest.fixture
def api(make_api: MakeApi) -> Api:
    """An app on a loopback address (no keys needed until one exists)."""
    return make_api()


def bearer(plain_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {plain_key}"}


def stored_sweeps(session_factory: sessionmaker[Session]) -> int:
    """How many sweeps the store holds, read in a session of its own (an open test
    session would hold SQLite's write lock and stall the app)."""
    with session_factory() as session:
        return session.scalar(select(func.count()).select_from(Sweep)) or 0


def experiment_id(client: MlflowClient) -> str:
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    return str(experiment.experiment_id)


def write_parent(client: MlflowClient, sweep_id: str) -> str:
    """The sweep's parent run, tagged as the driver tags it; returns its id."""
    tags = {SWEEP_TAG: sweep_id, ROLE_TAG: "sweep"}
    return str(client.create_run(experiment_id(client), tags=tags).info.run_id)


def write_trials(client: MlflowClient, sweep_id: str, trials: Sequence[FakeTrial]) -> list[str]:
    """One trial run per ``trials``, with the driver's tags, params and final status."""
    experiment, run_ids = experiment_id(client), []
    for index, trial in enumerate(trials):
        run = client.create_run(experiment, tags=_trial_tags(sweep_id, f"t{index}", trial))
        run_id = str(run.info.run_id)
        now = int(time.time() * 1000)
        values = {**trial.metrics, **({} if trial.eval_f1 is None else {"eval_f1": trial.eval_f1})}
        metrics = [Metric(key, value, now, 0) for key, value in values.items()]
        client.log_batch(run_id, params=_trial_params(sweep_id, trial), metrics=metrics)
        if trial.status != "RUNNING":
            client.set_terminated(run_id, trial.status)
        run_ids.append(run_id)
    return run_ids


def _trial_tags(sweep_id: str, trial_id: str, trial: FakeTrial) -> dict[str, str]:
    return {
        SWEEP_TAG: sweep_id,
        TRIAL_TAG: trial_id,
        ROLE_TAG: "trial",
        "dicesweep.loss": str(trial.loss["name"]),
        LOSS_LABEL_TAG: loss_label(trial.loss),
        "dicesweep.seed": str(trial.seed),
        "dicesweep.dataset": trial.dataset,
        "dicesweep.variant": trial.variant,
        **({FAILURE_TAG: trial.reason} if trial.reason else {}),
    }


def _trial_params(sweep_id: str, trial: FakeTrial) -> list[Param]:
    params = {"loss": str(trial.loss["name"])}
    params.update({f"loss.{k}": str(v) for k, v in trial.loss.items() if k != "name"})
    params.update(dataset=trial.dataset, variant=trial.variant, seed=str(trial.seed))
    if trial.dataset in DATASETS:  # runs written by hand under other names carry none
        params.update(setup_params(trial_setup(trial.trial_config(sweep_id))))
    return [Param(key, value) for key, value in params.items()]
