"""Training to convergence: ``max_steps``, early stopping on the search metric and the
optimiser steps every trial records, with a real tiny model on the toy NER set
(240 sentences, 15 steps an epoch)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from search_spaces.sections import TrainingSpec
from search_spaces.settings import DicesweepSettings
from tests.trainables.test_train import Recorder, toy_config
from trainables.loop import CHECKPOINT_FILE, Progress, final_metrics, stop_reason, watch
from trainables.train import run_trial


class StepCounter(Recorder):
    """A reporter that counts the optimiser steps and keeps each checkpoint's schedule."""

    def __init__(self, resume_from: Path | None = None, crash_after: int | None = None) -> None:
        super().__init__(resume_from, crash_after)
        self.steps = 0
        self.learning_rates: list[float | None] = []

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path) -> None:
        state = torch.load(checkpoint_dir / CHECKPOINT_FILE, map_location="cpu", weights_only=False)
        scheduler = state.get("scheduler")
        self.learning_rates.append(scheduler["_last_lr"][0] if scheduler else None)
        super().report(metrics, checkpoint_dir)

    def progress(self, step: int, total: int, loss: float) -> None:
        self.steps += 1
        assert total == 22 or total == 30, total


def test_max_steps_trains_exactly_that_many_steps_across_epochs(
    toy_home: DicesweepSettings,
) -> None:
    counter = StepCounter()
    # One epoch is 15 steps: max_steps overrides epochs and ends mid-way through the second.
    final = run_trial(toy_config(epochs=1, max_steps=22, learning_rate=1e-3), counter, toy_home)
    assert counter.steps == 22
    assert [r["step"] for r in counter.reports] == [15, 22]  # the epoch's end, then the last step
    assert [r["optimizer_steps"] for r in counter.reports] == [15, 22]
    assert final["stop_reason"] == "max_steps" and final["optimizer_steps"] == 22
    assert final["epoch"] == pytest.approx(22 / 15)
    # The linear decay spans the 22 steps, not the one epoch: 7/22 of the rate is left.
    assert counter.learning_rates[0] == pytest.approx(1e-3 * 7 / 22)


def test_without_max_steps_a_trial_runs_its_epochs(toy_home: DicesweepSettings) -> None:
    counter = StepCounter()
    final = run_trial(toy_config(epochs=2), counter, toy_home)
    assert counter.steps == 30
    assert final["stop_reason"] == "epochs" and final["optimizer_steps"] == 30
    assert "stop_reason" not in counter.reports[0]  # only the last report says why


def frozen(**training: Any) -> dict[str, Any]:
    """A trial whose model barely moves (the smallest learning rate): its F1 stays put,
    so every evaluation after the first fails to improve on it."""
    return toy_config(epochs=3, learning_rate=1e-9, eval_every_steps=3, **training)


def test_early_stopping_stops_after_patience_evaluations_without_a_rise(
    toy_home: DicesweepSettings,
) -> None:
    recorder = Recorder()
    final = run_trial(frozen(early_stopping_patience=3), recorder, toy_home)
    # The first evaluation is the best; three more without a rise, then the trial stops.
    assert [r["step"] for r in recorder.reports] == [3, 6, 9, 12]
    assert final["stop_reason"] == "early_stopping"
    assert final["optimizer_steps"] == 12 and final["best_step"] == 3
    assert final["eval_f1"] == recorder.reports[0]["eval_f1"] == final["last_eval_f1"]


def test_a_rise_smaller_than_min_delta_does_not_reset_the_patience(
    toy_home: DicesweepSettings,
) -> None:
    recorder = Recorder()
    # A learning model rises, but never by 100 points: only the first evaluation counts.
    config = toy_config(epochs=3, eval_every_steps=3, early_stopping_patience=2, min_delta=100.0)
    final = run_trial(config, recorder, toy_home)
    assert [r["step"] for r in recorder.reports] == [3, 6, 9]
    assert final["stop_reason"] == "early_stopping"


def test_a_resumed_trial_keeps_its_best_and_its_patience(
    toy_home: DicesweepSettings, tmp_path: Path
) -> None:
    config = frozen(early_stopping_patience=3)
    crashed = Recorder(crash_after=2)  # after the evaluation at step 6: one stale so far
    crashed.saved = tmp_path
    with pytest.raises(RuntimeError, match="worker lost"):
        run_trial(config, crashed, toy_home)
    resumed = Recorder(resume_from=tmp_path)
    final = run_trial(config, resumed, toy_home)
    # Two more stale evaluations end it at step 12, as if it had never stopped; a count
    # or a best lost in the checkpoint would train on to step 18.
    assert [r["step"] for r in resumed.reports] == [9, 12]
    assert final["stop_reason"] == "early_stopping" and final["best_step"] == 3
    assert final["eval_f1"] == crashed.reports[0]["eval_f1"]


def evaluation(progress: Progress, f1: float) -> dict[str, Any]:
    progress.step += 3
    return {"eval_f1": f1, "eval_precision": f1 - 1, "train_loss": 0.5, "step": progress.step}


def test_the_patience_counts_evaluations_since_the_last_rise_beyond_min_delta() -> None:
    training = TrainingSpec(epochs=100, early_stopping_patience=2, min_delta=1.0)
    progress, stops = Progress(), []
    for f1 in (50.0, 60.0, 60.5, 59.0, 62.0, 62.5, 61.0):
        watch(progress, evaluation(progress, f1), "eval_f1", training.min_delta)
        stops.append(stop_reason(progress, training, total_steps=1000))
    # 60.5 is a new best but no rise beyond 1 point; 62 rises 1.5 over it and resets the count.
    assert stops == [None, None, None, "early_stopping", None, None, "early_stopping"]
    assert (progress.best_metric, progress.best_step) == (62.5, 18)


def test_with_early_stopping_the_last_report_is_the_best_evaluation() -> None:
    training = TrainingSpec(epochs=100, early_stopping_patience=1)
    progress = Progress()
    for f1 in (70.0, 80.0):
        watch(progress, evaluation(progress, f1), "eval_f1", training.min_delta)
    last = evaluation(progress, 75.0)
    watch(progress, last, "eval_f1", training.min_delta)
    progress.stop_reason = stop_reason(progress, training, total_steps=1000)
    final = final_metrics(last, progress, training, "eval_f1")
    assert final["stop_reason"] == "early_stopping"
    assert (final["eval_f1"], final["eval_precision"], final["last_eval_f1"]) == (80.0, 79.0, 75.0)
    assert final["step"] == 9 and progress.best_step == 6  # the run's steps, the best's metrics
    # Without early stopping the last evaluation is the result.
    plain = TrainingSpec(epochs=100)
    assert final_metrics(last, progress, plain, "eval_f1")["eval_f1"] == 75.0
    assert not math.isnan(final["train_loss"])
