"""A spec becomes a Ray Tune param_space, searcher and scheduler of the contract's shape."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from search_spaces.resolve import get_preset, resolve_spec
from search_spaces.spec import expand_losses

tune = pytest.importorskip("ray.tune")
tune_search = pytest.importorskip("trainables.driver.tune_search")
sample = pytest.importorskip("ray.tune.search.sample")

CONTRACT_KEYS = [
    "sweep_id",
    "dataset",
    "kind",
    "variant",
    "positive_label",
    "model",
    "loss",
    "seed",
    "training",
    "metric",
]
TRAINING_KEYS = {
    "epochs",
    "max_steps",
    "early_stopping_patience",
    "min_delta",
    "learning_rate",
    "batch_size",
    "max_seq_length",
    "warmup_ratio",
    "weight_decay",
    "grad_clip",
    "eval_every_steps",
    "group_by_length",
    "max_train_examples",
    "max_eval_examples",
    "doc_stride",
    "precision",
    "grad_accumulation",
    "decay",
    "adam_epsilon",
    "evaluations_per_epoch",
    "checkpoint",
    "score_test",
    "head_init",
}


def tpe_spec(**search: Any) -> Any:
    return resolve_spec(
        {
            "extends": "smoke",
            "search_space": {
                "losses": [
                    {
                        "name": "dsc",
                        "alpha": {"loguniform": [0.001, 1]},
                        "smooth": {"uniform": [0, 2]},
                        "square": [True, False],
                        "scope": "set",
                    }
                ]
            },
            "seeds": [0, 1, 2],
            "search": {"algorithm": "tpe", "num_samples": 4, **search},
        }
    )


def test_grid_param_space_of_table8() -> None:
    spec = get_preset("table8")
    space = tune_search.to_param_space(spec, sweep_id="sweep-1")
    assert list(space) == CONTRACT_KEYS
    assert space["sweep_id"] == "sweep-1"
    assert space["dataset"] == "mrpc"
    assert space["variant"] == {"grid_search": list(spec.task.variant)}
    assert space["positive_label"] is None  # left to each trial: its training file's minority
    assert space["model"] == "bert-base-cased"
    assert space["loss"] == {"grid_search": expand_losses(spec)}
    assert space["seed"] == {"grid_search": [0, 1, 2]}
    assert set(space["training"]) == TRAINING_KEYS
    assert space["training"]["batch_size"] == 20


def test_grid_over_data_sets_and_a_single_seed() -> None:
    space = tune_search.to_param_space(get_preset("table10"))
    assert space["dataset"] == {"grid_search": ["conll2003", "squad_v1"]}
    assert space["variant"] == "original"
    assert space["seed"] == 0
    assert len(space["loss"]["grid_search"]) == 9


def test_tpe_param_space_samples_inside_the_loss_and_leaves_the_seed_out() -> None:
    space = tune_search.to_param_space(tpe_spec())
    assert list(space) == [key for key in CONTRACT_KEYS if key != "seed"]
    loss = space["loss"]
    assert list(loss) == ["name", "alpha", "smooth", "square", "scope"]
    assert (loss["name"], loss["scope"]) == ("dsc", "set")
    assert isinstance(loss["alpha"], sample.Float)
    assert isinstance(loss["alpha"].sampler, sample.LogUniform)
    assert (loss["alpha"].lower, loss["alpha"].upper) == (0.001, 1.0)
    assert isinstance(loss["smooth"].sampler, sample.Uniform)
    assert isinstance(loss["square"], sample.Categorical)
    assert loss["square"].categories == [True, False]


def test_tune_config_of_a_grid() -> None:
    kwargs = tune_search.tune_config_kwargs(get_preset("smoke"))
    assert kwargs["metric"] == "eval_f1"
    assert kwargs["mode"] == "max"
    assert kwargs["search_alg"] is None
    assert kwargs["num_samples"] == 1
    assert kwargs["max_concurrent_trials"] == 2
    assert type(kwargs["scheduler"]).__name__ == "FIFOScheduler"
    tune.TuneConfig(**kwargs)


def test_tune_config_of_a_tpe_search_repeats_each_suggestion_per_seed() -> None:
    kwargs = tune_search.tune_config_kwargs(tpe_spec(sampler_seed=3))
    assert kwargs["num_samples"] == 12  # 4 configurations × 3 seeds
    searcher = kwargs["search_alg"]
    assert isinstance(searcher, tune_search.SeedRepeater)
    assert searcher.seeds == [0, 1, 2]
    assert searcher.repeat == 3


class _Fixed:
    """A stand-in searcher handing out numbered configurations."""

    metric, mode = "eval_f1", "max"

    def __init__(self) -> None:
        self.count = 0

    def suggest(self, trial_id: str) -> dict[str, Any]:
        self.count += 1
        return {"loss": {"name": "dsc", "alpha": self.count / 10}}


def test_seed_repeater_gives_each_suggestion_every_seed() -> None:
    repeater = tune_search.SeedRepeater(_Fixed(), [7, 8])  # type: ignore[arg-type]
    configs = [repeater.suggest(f"t{index}") for index in range(4)]
    assert [(c["loss"]["alpha"], c["seed"]) for c in configs] == [
        (0.1, 7),
        (0.1, 8),
        (0.2, 7),
        (0.2, 8),
    ]
    assert all("__trial_index__" not in config for config in configs)


@pytest.mark.parametrize(
    ("kind", "per_loss", "expected"),
    [
        ("asha", True, "PerLossScheduler"),
        ("asha", False, "AsyncHyperBandScheduler"),
        ("median", False, "MedianStoppingRule"),
    ],
)
def test_scheduler_kinds(kind: str, per_loss: bool, expected: str) -> None:
    spec = resolve_spec(
        {
            "extends": "smoke",
            "training": {"epochs": 3},
            "scheduler": {"kind": kind, "per_loss": per_loss},
        }
    )
    assert type(tune_search.build_scheduler(spec)).__name__ == expected


def test_per_loss_scheduler_keeps_one_scheduler_per_loss_name() -> None:
    spec = resolve_spec(
        {"extends": "smoke", "training": {"epochs": 3}, "scheduler": {"kind": "asha"}}
    )
    scheduler = tune_search.build_scheduler(spec)
    assert scheduler.set_search_properties("eval_f1", "max")
    trials = [
        SimpleNamespace(trial_id=f"t{index}", config={"loss": {"name": name}})
        for index, name in enumerate(["ce", "dsc", "ce"])
    ]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    groups = scheduler._by_loss
    assert sorted(groups) == ["ce", "dsc"]
    assert sorted(groups["ce"]._trial_info) == ["t0", "t2"]
    assert sorted(groups["dsc"]._trial_info) == ["t1"]
    decision = scheduler.on_trial_result(
        None, trials[1], {"training_iteration": 1, "eval_f1": 50.0}
    )
    assert decision == "CONTINUE"


def test_trial_resources() -> None:
    assert tune_search.trial_resources(get_preset("table8")) == {"cpu": 1.0, "gpu": 1.0}


def test_asha_over_max_steps_has_no_horizon_in_epochs() -> None:
    # With max_steps the number of evaluations depends on the data's size, unknown here:
    # an epoch count as ASHA's horizon would stop trials at a wrong rung, so it has none.
    spec = resolve_spec(
        {
            "extends": "smoke",
            "training": {"epochs": 1, "max_steps": 200},
            "scheduler": {"kind": "asha", "grace_period": 2, "per_loss": False},
        }
    )
    scheduler = tune_search.build_scheduler(spec)
    assert scheduler._max_t == tune_search.MAX_EVALUATIONS
    assert tune_search.to_param_space(spec)["metric"] == spec.search.metric


ROUNDS = {
    "extends": "smoke",
    "search_space": {"losses": [{"name": "ce"}, {"name": "focal", "gamma": 0}]},
    "seeds": {"min": 3, "max": 5, "until": "decided", "looks": [3, 5]},
}


def test_a_round_runs_its_losses_at_its_seeds_and_carries_the_rule() -> None:
    spec = resolve_spec(ROUNDS)
    space = tune_search.round_param_space(spec, [{"name": "ce"}], [3, 4], sweep_id="s")
    assert space["loss"] == tune.grid_search([{"name": "ce"}])
    assert space["seed"] == tune.grid_search([3, 4])
    assert space["seeds_until"] == spec.seeds.model_dump()
    with pytest.raises(ValueError, match="at least one loss"):
        tune_search.round_param_space(spec, [], [3])
    fixed = resolve_spec({**ROUNDS, "seeds": [0, 1]})
    assert "seeds_until" not in tune_search.to_param_space(fixed)
    with pytest.raises(ValueError, match="fixed list"):
        tune_search.round_param_space(fixed, [{"name": "ce"}], [0])


def test_a_round_of_a_tuned_sweep_trains_each_loss_at_its_choice() -> None:
    spec = resolve_spec(
        {**ROUNDS, "tune": {"learning_rate": [1e-4, 1e-3], "trials_per_loss": 2, "holdout": 0.1}}
    )
    chosen = {
        json.dumps(loss, sort_keys=True): {"learning_rate": 1e-3} for loss in expand_losses(spec)
    }
    space = tune_search.round_param_space(spec, expand_losses(spec), [0, 1, 2], chosen=chosen)
    assert space["stage"] == "final" and space["holdout"] is None
    assert space["tuned_by_loss"] == chosen
    assert space["loss"] == tune.grid_search(expand_losses(spec))
