"""scripts/eval_history.py reads every evaluation of a sweep's trials from a real MLflow
store: a two-stage sweep's stage-1 trials train at the first seed as its final trial
does, so each row carries its stage, rate and run, and each trial's curve stays whole."""

from __future__ import annotations

from pathlib import Path

from search_spaces.contract import (
    EXPERIMENT,
    LOSS_LABEL_TAG,
    ROLE_TAG,
    STAGE_TAG,
    SWEEP_TAG,
)
from tests.scripts import script


def test_stage_one_and_seed_zero_curves_kept_apart(tmp_path: Path) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(EXPERIMENT, artifact_location=str(tmp_path / "a"))

    def trial(sweep: str, stage: str, rate: str, curve: list[tuple[int, float]]) -> str:
        run = client.create_run(experiment).info.run_id
        tags = {SWEEP_TAG: sweep, ROLE_TAG: "trial", LOSS_LABEL_TAG: "ce", STAGE_TAG: stage}
        client.log_batch(
            run,
            # Logged out of step order, as a resumed trial may: the steps decide.
            metrics=[Metric("eval_f1", value, 0, step) for step, value in reversed(curve)],
            params=[Param("seed", "0"), Param("training.learning_rate", rate)],
            tags=[RunTag(key, value) for key, value in tags.items()],
        )
        return run

    final = trial("sw-a", "final", "0.0001", [(63, 20.0), (126, 60.0)])
    fast = trial("sw-a", "tune", "0.0003", [(63, 30.0), (126, 70.0)])
    slow = trial("sw-a", "tune", "0.0001", [(63, 10.0), (126, 50.0)])
    trial("sw-b", "final", "0.0001", [(63, 99.0)])  # another sweep's
    parent = client.create_run(experiment).info.run_id  # a parent run is not a trial
    client.log_batch(
        parent,
        metrics=[Metric("eval_f1", 1.0, 0, 63)],
        tags=[RunTag(SWEEP_TAG, "sw-a"), RunTag(ROLE_TAG, "parent")],
    )

    rows = script("eval_history").history(uri, "sw-a", "eval_f1")

    assert [
        (r["stage"], r["learning_rate"], r["run_id"], r["step"], r["eval_f1"]) for r in rows
    ] == [
        ("tune", "0.0001", slow, 63, 10.0),
        ("tune", "0.0001", slow, 126, 50.0),
        ("tune", "0.0003", fast, 63, 30.0),
        ("tune", "0.0003", fast, 126, 70.0),
        ("final", "0.0001", final, 63, 20.0),
        ("final", "0.0001", final, 126, 60.0),
    ]
    assert {r["loss"] for r in rows} == {"ce"} and {r["seed"] for r in rows} == {"0"}
