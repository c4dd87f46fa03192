"""The driver's message when stage 1 could only choose among constant trials."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from search_spaces.tuning import choose_settings, loss_key
from trainables.driver.reports import announce_choices

CONSTANT = {"eval_top_prediction_share": 100.0, "eval_positive_prediction_share": 0.0}
LEARNED = {"eval_top_prediction_share": 80.0, "eval_positive_prediction_share": 20.0}
SPLIT = {"eval_baseline_f1": 49.07, "eval_baseline_accuracy": 67.49}


def result(loss: dict, lr: float, f1: float, shares: dict | None) -> SimpleNamespace:
    """A stage-1 result as Tune gives it back; ``shares`` None: the trial failed."""
    config = {"loss": loss, "training": {"learning_rate": lr}}
    if shares is None:
        return SimpleNamespace(config=config, metrics=None, error=RuntimeError("diverged"))
    return SimpleNamespace(config=config, metrics={**SPLIT, **shares, "eval_f1": f1}, error=None)


def test_the_driver_names_a_loss_chosen_among_constant_trials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ce, dice = {"name": "ce"}, {"name": "dice"}
    stage_one = [
        result(ce, 1e-4, 60.0, LEARNED),
        result(ce, 3e-4, 49.07, CONSTANT),  # higher than nothing, never chosen over 1e-4
        result(dice, 1e-4, 0.0, CONSTANT),
        result(dice, 3e-4, 10.0, CONSTANT),
        result(dice, 1e-3, 0.0, None),
    ]
    settings = [{"learning_rate": 1e-4}, {"learning_rate": 3e-4}, {"learning_rate": 1e-3}]
    chosen = choose_settings(
        ((r.config, None if r.error else r.metrics) for r in stage_one), settings, "eval_f1"
    )
    assert chosen == {
        loss_key(ce): {"learning_rate": 1e-4},
        loss_key(dice): {"learning_rate": 3e-4},
    }
    tuned = announce_choices("sw-1", chosen, stage_one)
    assert tuned == {"ce": {"learning_rate": 1e-4}, "dice": {"learning_rate": 3e-4}}
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "sweep sw-1: every stage-1 trial of dice is constant (one prediction for ≥ 99% of the"
        " tuning split); stage 2 runs it at the best of them"
    ]
