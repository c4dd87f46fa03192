"""Stage 1 with the ``halving`` scheduler in a real local Ray Tune run: with one trial at
a time and the learning rates in ascending order (where ASHA compares nothing), each
loss's losers stop at the first rung, and what the driver reads back says so."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search_spaces.resolve import resolve_spec
from search_spaces.spec import SweepSpec
from search_spaces.tuning import choose_settings, halving_rung, stage_one_settings
from tests.conftest import local_ray_head

ray = pytest.importorskip("ray")
tune = pytest.importorskip("ray.tune")
tune_search = pytest.importorskip("trainables.driver.tune_search")
ExperimentAnalysis = tune.ExperimentAnalysis

RATES = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]  # ascending: the best (1e-3) third
BEST = 1e-3


def ranked_train(config: dict[str, Any]) -> None:
    """One evaluation an epoch, each with a checkpoint (a paused trial resumes from it);
    the score falls with the learning rate's distance from ``BEST``, rises by epoch."""
    training = config["training"]
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int((Path(folder) / "done").read_text())
    for epoch in range(start, training["epochs"]):
        distance = abs(math.log10(training["learning_rate"] / BEST))
        metrics: dict[str, Any] = {"eval_f1": 80.0 - 20.0 * distance + epoch, "epoch": epoch + 1}
        if epoch + 1 == training["epochs"]:
            metrics["stop_reason"] = "epochs"
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "done").write_text(str(epoch + 1))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    with local_ray_head(__name__):
        yield


def halving_spec(kind: str) -> SweepSpec:
    return resolve_spec(
        {
            "extends": "smoke",
            "training": {"epochs": 4},
            "tune": {"learning_rate": RATES, "trials_per_loss": len(RATES)},
            "scheduler": {"kind": kind, "grace_period": 1, "reduction_factor": 3},
            "resources": {"max_concurrent_trials": 1},
        }
    )


def run_stage_one(spec: SweepSpec, storage: Path) -> Any:
    tuner = tune.Tuner(
        tune.with_resources(ranked_train, tune_search.trial_resources(spec)),
        param_space=tune_search.stage_param_space(spec, "tune", sweep_id="halving"),
        tune_config=tune.TuneConfig(
            **tune_search.tune_config_kwargs(spec, "tune"), time_budget_s=150
        ),
        run_config=tune.RunConfig(storage_path=str(storage), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    return results


def evaluations(results: Any) -> dict[tuple[str, float], int]:
    """``(loss, learning rate) -> evaluations run`` (Tune's ``training_iteration``)."""
    return {
        (r.config["loss"]["name"], r.config["training"]["learning_rate"]): int(
            r.metrics["training_iteration"]
        )
        for r in results
    }


def test_halving_stops_each_losss_losers_at_the_first_rung(local_ray: None, tmp_path: Path) -> None:
    spec = halving_spec("halving")
    results = run_stage_one(spec, tmp_path)
    ran = evaluations(results)
    for loss in ("ce", "dsc"):
        # Rung 0 (1 evaluation) keeps ceil(5/3) = 2: 1e-3 and its nearest, 3e-4 (the
        # tie with 3e-3 goes to the first ranked); rung 1 (3 evaluations) keeps 1e-3.
        assert ran[(loss, BEST)] == 4
        stopped_first = [lr for lr in RATES if ran[(loss, lr)] == halving_rung(0, 1, 3)]
        assert len(stopped_first) == 3
        assert [lr for lr in RATES if ran[(loss, lr)] == halving_rung(1, 1, 3)] != []
    # What the driver reads: a stopped trial's last result has no stop_reason (the
    # tracker tags it "scheduler"), and the loss's choice is the one that ran to its end.
    stopped = [r for r in results if "stop_reason" not in r.metrics]
    assert len(stopped) == 8
    # Every trial ended in the experiment's files too (a driver reading them back
    # counts a trial left PAUSED there as unfinished).
    saved = ExperimentAnalysis(results.experiment_path).trials
    assert {trial.status for trial in saved} == {"TERMINATED"}
    chosen = choose_settings(
        ((r.config, r.metrics) for r in results),
        stage_one_settings(spec.tune, spec.seeds[0]),  # type: ignore[arg-type]
        spec.search.metric,
    )
    assert {setting["learning_rate"] for setting in chosen.values()} == {BEST}


def test_asha_in_the_same_order_stops_fewer(local_ray: None, tmp_path: Path) -> None:
    """The reference the halving stage improves on: ascending rates, one at a time."""
    results = run_stage_one(halving_spec("asha"), tmp_path)
    stopped = [r for r in results if "stop_reason" not in r.metrics]
    assert len(stopped) < 8


def test_halving_rungs() -> None:
    assert [halving_rung(level, 1, 3) for level in range(4)] == [1, 3, 9, 27]
    assert [halving_rung(level, 2, 1.5) for level in range(3)] == [2, 3, 4]


def test_stage_one_halves_each_loss_grid_point_on_its_own() -> None:
    """dsc with two alphas is two losses to tune: each point's five trials form one
    comparison, so one alpha's trials never stop all of the other's."""
    spec = resolve_spec(
        {
            "extends": "smoke",
            "search_space": {"losses": [{"name": "dsc", "alpha": [0.1, 0.01], "scope": "set"}]},
            "training": {"epochs": 4},
            "tune": {"learning_rate": RATES, "trials_per_loss": len(RATES)},
            "scheduler": {"kind": "halving"},
        }
    )
    scheduler = tune_search.tune_config_kwargs(spec, "tune")["scheduler"]
    assert sorted(scheduler._sizes.values()) == [5, 5]
    assert all('"alpha"' in key for key in scheduler._sizes)
