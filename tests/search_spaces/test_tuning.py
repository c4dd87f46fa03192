"""The ``tune`` section: validated at the boundary, counted in both stages, and the
settings each stage runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from search_spaces.errors import SpecError
from search_spaces.flags import constant_choices
from search_spaces.presets import deep_merge
from search_spaces.reports import (
    final_rows,
    paper_table,
    row_from_trial,
    to_html,
    to_json,
    with_budget_curves,
)
from search_spaces.reports.markdown import to_markdown
from search_spaces.reports.notes import STAGES
from search_spaces.resolve import resolve_spec, stage_counts, trial_count
from search_spaces.tuning import choose_settings, loss_key, stage_one_settings, tune_method

TUNE = {"learning_rate": [1.0e-5, 3.0e-5, 1.0e-4], "trials_per_loss": 3}
DROP = object()  # in a case's tune section: leave the setting out


def make_spec(**overrides: Any) -> dict[str, Any]:
    base = {
        "name": "probe",
        "task": {"dataset": "mrpc"},
        "search_space": {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": [0.1, 0.01]}]},
        "seeds": [0, 1],
        "tune": TUNE,
    }
    return deep_merge(base, overrides)


def issue_for(data: dict[str, Any], **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(SpecError) as caught:
        resolve_spec(data, presets={}, **kwargs)
    first = caught.value.issues[0]
    return first.path, first.message


INVALID = {
    "nothing to tune": (
        {"tune": {"learning_rate": DROP}},
        "tune",
        "name at least one setting to tune: learning_rate, warmup_ratio, epochs",
    ),
    "a scalar": (
        {"tune": {"learning_rate": 3.0e-5}},
        "tune.learning_rate",
        "a tuned setting is a list or a distribution, got 3e-05; "
        "a fixed value belongs in training.learning_rate",
    ),
    "out of training's range": (
        {"tune": {"learning_rate": [1.0e-5, 2.0]}},
        "tune.learning_rate",
        "learning_rate=2.0: Input should be less than or equal to 1",
    ),
    "warm-up distribution out of range": (
        {"tune": {"learning_rate": DROP, "warmup_ratio": {"uniform": [0.0, 1.5]}}},
        "tune.warmup_ratio",
        "warmup_ratio=1.5: Input should be less than 1",
    ),
    "epochs drawn as floats": (
        {"tune": {"epochs": {"uniform": [1, 3]}}},
        "tune.epochs",
        "epochs are whole numbers: give a list or a choice",
    ),
    "empty list": (
        {"tune": {"learning_rate": []}},
        "tune.learning_rate",
        "a list of values must not be empty",
    ),
    "no budget": (
        {"tune": {"trials_per_loss": 0}},
        "tune.trials_per_loss",
        "Input should be greater than or equal to 1",
    ),
    "holdout too large": (
        {"tune": {"holdout": 0.8}},
        "tune.holdout",
        "Input should be less than or equal to 0.5",
    ),
    "unknown setting": (
        {"tune": {"batch_size": [8, 16]}},
        "tune.batch_size",
        "unknown key; valid: learning_rate, warmup_ratio, epochs, trials_per_loss, holdout",
    ),
    "random search": (
        {
            "search": {"algorithm": "random", "num_samples": 4},
            "search_space": {"losses": [{"name": "dsc", "alpha": {"uniform": [0.1, 0.9]}}]},
        },
        "search.algorithm",
        "tune compares the losses of a grid: use search.algorithm grid",
    ),
    "two data sets": (
        {"task": {"dataset": ["mrpc", "qqp"]}},
        "task.dataset",
        "tune chooses each loss's settings on one data set: run one sweep per data set",
    ),
    "two variants": (
        {"task": {"variant": ["original", "+positive"]}},
        "task.variant",
        "tune chooses each loss's settings on one variant: run one sweep per variant",
    ),
    "asha that stops nothing in the tuned epochs": (
        {"scheduler": {"kind": "asha", "grace_period": 3}, "tune": {"epochs": [2, 3]}},
        "scheduler.grace_period",
        "asha with grace_period 3 can stop nothing in 3 epochs",
    ),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_invalid_tune_names_the_field_and_rule(case: str) -> None:
    overrides, path, message = INVALID[case]
    data = make_spec(**{key: value for key, value in overrides.items() if key != "tune"})
    tune = {**TUNE, **overrides.get("tune", {})}
    data["tune"] = {key: value for key, value in tune.items() if value is not DROP}
    found_path, found_message = issue_for(data)
    assert found_path == path
    assert message in found_message, found_message


def test_trial_count_counts_both_stages_and_the_cap_says_how() -> None:
    spec = resolve_spec(make_spec(), presets={})
    # Three losses (ce and dsc's two alphas) × 3 settings, then 3 losses × 2 seeds.
    assert stage_counts(spec) == {"tune": 9, "final": 6}
    assert trial_count(spec) == 15
    path, message = issue_for(make_spec(), max_trials=10)
    assert path == ""
    assert message == (
        "15 trials (losses × trials_per_loss + losses × datasets × variants × seeds = "
        "3 × 3 + 3 × 1 × 1 × 2) exceed the cap of 10"
    )


def test_a_dumped_spec_validates_back_to_the_same() -> None:
    # What the service stores and its driver validates again: untuned settings as null.
    spec = resolve_spec(make_spec(), presets={})
    dumped = spec.model_dump(mode="json")
    assert dumped["tune"]["epochs"] is None
    assert resolve_spec(dumped, presets={}) == spec


def test_a_spec_without_tune_has_one_stage() -> None:
    data = make_spec()
    del data["tune"]
    spec = resolve_spec(data, presets={})
    assert spec.tune is None and stage_counts(spec) == {"final": 6}


def test_the_grid_when_the_lists_fill_the_budget_else_draws() -> None:
    spec = resolve_spec(make_spec(), presets={})
    assert spec.tune is not None and tune_method(spec.tune) == "grid"
    assert stage_one_settings(spec.tune, 0) == [
        {"learning_rate": 1e-5},
        {"learning_rate": 3e-5},
        {"learning_rate": 1e-4},
    ]
    sampled = make_spec(
        tune={
            "learning_rate": {"loguniform": [1.0e-5, 1.0e-3]},
            "epochs": [1, 2],
            "trials_per_loss": 6,
        }
    )
    tune = resolve_spec(sampled, presets={}).tune
    assert tune is not None and tune_method(tune) == "random"
    draws = stage_one_settings(tune, 7)
    assert len(draws) == 6 and draws == stage_one_settings(tune, 7)  # fixed by the seed
    assert draws != stage_one_settings(tune, 8)
    assert all(1e-5 <= d["learning_rate"] <= 1e-3 and d["epochs"] in (1, 2) for d in draws)
    # Lists whose product is not the budget are drawn from too.
    short = resolve_spec(make_spec(tune={"trials_per_loss": 5}), presets={}).tune
    assert short is not None and tune_method(short) == "random"
    assert {d["learning_rate"] for d in stage_one_settings(short, 0)} <= {1e-5, 3e-5, 1e-4}


def test_each_loss_gets_its_best_setting_the_first_one_on_a_tie() -> None:
    settings = [{"learning_rate": 1e-5}, {"learning_rate": 3e-5}, {"learning_rate": 1e-4}]
    ce, dsc, focal = {"name": "ce"}, {"name": "dsc", "alpha": 0.1}, {"name": "focal"}

    def trial(loss: dict[str, Any], lr: float) -> dict[str, Any]:
        return {"loss": loss, "training": {"learning_rate": lr, "epochs": 1}}

    results = [
        (trial(ce, 1e-4), {"eval_f1": 70.0}),
        (trial(ce, 3e-5), {"eval_f1": 81.0}),
        (trial(ce, 1e-5), {"eval_f1": 80.0}),
        (trial(dsc, 1e-4), {"eval_f1": 75.0}),  # tied with 3e-5: listed after it
        (trial(dsc, 3e-5), {"eval_f1": 75.0}),
        (trial(dsc, 1e-5), None),  # failed
        (trial(focal, 1e-5), None),
        (trial(focal, 3e-5), {"eval_f1": float("nan")}),
    ]
    chosen = choose_settings(results, settings, "eval_f1")
    assert chosen == {
        loss_key(ce): {"learning_rate": 3e-5},
        loss_key(dsc): {"learning_rate": 3e-5},
    }  # focal has nothing to choose on


# What a pair classifier reports: one calling every pair negative (constant), one that
# predicts both classes. The tuning split is 67.5% positive.
CONSTANT = {"eval_top_prediction_share": 100.0, "eval_positive_prediction_share": 0.0}
LEARNED = {"eval_top_prediction_share": 80.0, "eval_positive_prediction_share": 20.0}
SPLIT = {"eval_baseline_f1": 49.07, "eval_baseline_accuracy": 67.49}


def test_selection_skips_a_constant_trial_and_falls_back_to_the_best_of_them() -> None:
    """The preset dsc of study 2 got its rate from a trial that called every pair class 0
    (tuning F1 49.07 against 0.0 and 0.0): a constant trial is never chosen while the
    loss has another, however high it scores; a loss with constant trials only runs at
    the best of them, and the table names it."""
    settings = [{"learning_rate": 1e-5}, {"learning_rate": 3e-5}, {"learning_rate": 3e-4}]
    dsc, dice = {"name": "dsc", "alpha": 0.1}, {"name": "dice"}

    def trial(loss: dict[str, Any], lr: float) -> dict[str, Any]:
        return {"loss": loss, "training": {"learning_rate": lr, "epochs": 1}}

    results = [
        (trial(dsc, 3e-4), {**SPLIT, **CONSTANT, "eval_f1": 49.07}),
        (trial(dsc, 3e-5), {**SPLIT, **LEARNED, "eval_f1": 20.0}),  # below no-skill
        (trial(dsc, 1e-5), {**SPLIT, **CONSTANT, "eval_f1": 0.0}),
        (trial(dice, 1e-5), {**SPLIT, **CONSTANT, "eval_f1": 0.0}),
        (trial(dice, 3e-5), {**SPLIT, **CONSTANT, "eval_f1": 10.0}),
        (trial(dice, 3e-4), {**SPLIT, **CONSTANT, "eval_f1": 5.0}),
    ]
    chosen = choose_settings(results, settings, "eval_f1")
    assert chosen == {
        loss_key(dsc): {"learning_rate": 3e-5},  # not 3e-4, the constant trial's
        loss_key(dice): {"learning_rate": 3e-5},  # every trial constant: the best of them
    }
    rows = [
        {
            **row_from_trial(
                {
                    **TRIAL,
                    **config,
                    "stage": "tune",
                    "tuned": ["learning_rate"],
                    "dataset": "mrpc",
                    "variant": "original",
                    "seed": 0,
                },
                metrics,
            ),
            "status": "FINISHED",
        }
        for config, metrics in results
    ]
    assert constant_choices(rows) == ["dice"]
    final = [
        {**row, "stage": "final", "seed": seed, "eval_f1": 60.0 + seed}
        for row in rows[1:2] + rows[4:5]
        for seed in (0, 1)
    ]
    frame = pd.DataFrame(rows + final)
    table = with_budget_curves(paper_table(final_rows(frame)), frame, random_sampling=False)
    assert table.attrs["tuned_constant"] == ["dice"]
    markdown = to_markdown(table)
    assert "dice: learning_rate=3e-05 (every stage-1 trial constant: the best of them)" in markdown
    assert "dsc(alpha=0.1): learning_rate=3e-05." in markdown


TRIAL = {"sweep_id": "sw-1", "model": "tiny-bert", "training": {}, "holdout": 0.1}


def tuned_row(stage: str, loss: dict[str, Any], seed: int, lr: float, f1: float) -> dict[str, Any]:
    config = {
        **TRIAL,
        "dataset": "mrpc",
        "variant": "original",
        "loss": loss,
        "seed": seed,
        "stage": stage,
        "tuned": ["learning_rate"],
        "training": {"learning_rate": lr, "epochs": 1},
    }
    return row_from_trial(config, {"eval_f1": f1})


def test_rows_carry_the_stage_and_the_table_only_stage_two_with_its_choices() -> None:
    ce, dsc = {"name": "ce"}, {"name": "dsc", "alpha": 0.1}
    rows = pd.DataFrame(
        [
            tuned_row("tune", ce, 0, 1e-4, 99.0),  # scored on the tuning split: not in the table
            tuned_row("tune", ce, 0, 1e-3, 10.0),
            tuned_row("final", ce, 0, 1e-4, 80.0),
            tuned_row("final", ce, 1, 1e-4, 82.0),
            tuned_row("final", dsc, 0, 3e-5, 84.0),
            tuned_row("final", dsc, 1, 3e-5, 86.0),
        ]
    )
    assert rows.loc[0, "stage"] == "tune" and rows.loc[0, "tuned_learning_rate"] == 1e-4
    table = paper_table(final_rows(rows))
    assert table.loc["ce", ("mrpc", "mean")] == 81.0
    assert table.loc["ce", ("mrpc", "count")] == 2
    assert table.attrs["tuned"] == {
        "ce": {"learning_rate": 1e-4},
        "dsc(alpha=0.1)": {"learning_rate": 3e-5},
    }
    line = f"Tuned per loss ({STAGES}): ce: learning_rate=0.0001; "
    assert line + "dsc(alpha=0.1): learning_rate=3e-05." in to_markdown(table)
    assert "stage 2 trains on the whole training file" in STAGES
    assert '<p class="tuned">' in to_html(table)
    assert json.loads(to_json(table))["tuned"]["ce"] == {"learning_rate": 1e-4}


def test_a_table_without_tune_says_nothing_of_tuning() -> None:
    rows = pd.DataFrame(
        [
            row_from_trial(
                {
                    **TRIAL,
                    "dataset": "mrpc",
                    "variant": "original",
                    "loss": {"name": "ce"},
                    "seed": s,
                },
                {"eval_f1": 80.0 + s},
            )
            for s in (0, 1)
        ]
    )
    assert final_rows(rows).equals(rows)
    table = paper_table(rows)
    assert table.attrs["tuned"] == {} and "Tuned" not in to_markdown(table)


def test_the_two_stage_spec_of_the_docs_is_valid_and_counts_as_it_says() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "sweeps.md").read_text()
    section = text.split("## Tuning per loss", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = resolve_spec(yaml.safe_load(block), presets={})
    assert stage_counts(spec) == {"tune": 24, "final": 12}  # "4 × 6 + 4 × 3 = 36"
    assert spec.tune is not None and tune_method(spec.tune) == "grid"
    assert "4 × 6 + 4 × 3 = 36" in section
