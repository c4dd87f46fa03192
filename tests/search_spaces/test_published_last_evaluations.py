"""scripts/publish_study.py's last evaluations per trial, read from a real MLflow store:
what a published trials CSV carries so that "converged" can be checked (flat over the
last evaluations) instead of asserted."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.scripts import script


def test_last_three_evaluations_in_step_order_with_their_range(tmp_path: Path) -> None:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    rising, flat, once, never = (client.create_run(experiment).info.run_id for _ in range(4))
    # Logged out of step order, as a retried trial may: the steps decide the order.
    for step, value in [(878, 86.78), (2634, 90.4), (1756, 89.86), (3512, 91.1)]:
        client.log_batch(rising, metrics=[Metric("eval_f1", value, 0, step)])
    for step, value in [(250, 68.1), (500, 69.0), (750, 69.1), (1000, 69.05)]:
        client.log_batch(flat, metrics=[Metric("eval_f1", value, 0, step)])
    client.log_batch(once, metrics=[Metric("eval_f1", 50.0, 0, 621)])
    client.log_batch(never, metrics=[Metric("eval_loss", 0.3, 0, 621)])

    found = script("publish_study").last_evaluations(uri, [rising, flat, once, never], "eval_f1")

    assert list(found["last_evaluations"]) == [
        "1756:89.86 2634:90.4 3512:91.1",
        "500:69 750:69.1 1000:69.05",
        "621:50",
        "",
    ]
    assert found["last_evaluations_range"][0] == pytest.approx(1.24)
    assert found["last_evaluations_range"][1] == pytest.approx(0.1)
    assert math.isnan(found["last_evaluations_range"][2])
    assert math.isnan(found["last_evaluations_range"][3])


def test_a_trial_reporting_its_best_shows_its_last_evaluation_at_the_last_step(
    tmp_path: Path,
) -> None:
    """Under ``checkpoint: best`` the final report logs the best evaluation's figures at
    the last step (``trainables.loop.final_metrics``) and the last one's as
    ``last_eval_f1``: the curve and the last evaluations read the value evaluated there."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    run = client.create_run(experiment).info.run_id
    for step, value in [(14, 13.4), (28, 21.9), (42, 30.1)]:
        client.log_batch(run, metrics=[Metric("eval_f1", value, 0, step)])
    # The final report at step 56: the best (step 42's 30.1) under eval_f1, the last apart.
    client.log_batch(
        run, metrics=[Metric("eval_f1", 30.1, 0, 56), Metric("last_eval_f1", 24.0, 0, 56)]
    )

    found = script("publish_study").last_evaluations(uri, [run], "eval_f1")
    points = script("eval_history").curve(client, run, "eval_f1")

    assert list(found["last_evaluations"]) == ["28:21.9 42:30.1 56:24"]
    assert found["last_evaluations_range"][0] == pytest.approx(8.2)
    assert [(point.step, point.value) for point in points] == [
        (14, 13.4),
        (28, 21.9),
        (42, 30.1),
        (56, 24.0),
    ]


def test_the_precision_each_trial_trained_in(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    tags = [{"dicesweep.precision": "bf16"}, {"dicesweep.precision": "fp32"}, {}]
    runs = [client.create_run(experiment, tags=tag).info.run_id for tag in tags]

    assert script("publish_study").trained_in(uri, runs) == ["bf16", "fp32", ""]


def test_trial_hours_count_what_trials_computed_not_their_waits_at_a_rung(
    tmp_path: Path,
) -> None:
    """A stage-1 trial paused at halving's rung keeps its MLflow run open while it
    waits; its clock (``seconds``) starts again at 0 when it resumes. Trial-hours are
    the clocks' stretches summed (60 + 50 = 110 s), not the run's span (over 1,000 s)."""
    from mlflow.entities import Metric, RunStatus
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    paused, plain = (client.create_run(experiment, start_time=0).info.run_id for _ in range(2))
    # (timestamp in ms, step, seconds): evaluations at 63 and 126 steps, then a wait of
    # 1,000 s at the rung, then the stretch after the resume.
    for ms, step, seconds in [(30_000, 63, 30.0), (60_000, 126, 60.0), (1_090_000, 189, 25.0)]:
        client.log_batch(paused, metrics=[Metric("seconds", seconds, ms, step)])
    client.log_batch(paused, metrics=[Metric("seconds", 50.0, 1_115_000, 252)])
    for ms, step, seconds in [(40_000, 63, 40.0), (80_000, 126, 80.0)]:
        client.log_batch(plain, metrics=[Metric("seconds", seconds, ms, step)])
    client.set_terminated(paused, RunStatus.to_string(RunStatus.FINISHED), end_time=1_120_000)
    client.set_terminated(plain, RunStatus.to_string(RunStatus.FINISHED), end_time=81_000)

    hours = script("publish_study").trial_hours(uri, [paused, plain])

    assert hours * 3600 == pytest.approx(110.0 + 80.0)
