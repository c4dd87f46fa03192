"""Real Ray Tune runs a spec's param_space: every trial gets a contract-shaped config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search_spaces.resolve import resolve_spec
from search_spaces.sections import TrialConfig
from search_spaces.spec import SweepSpec, expand_losses
from tests.conftest import local_ray_head
from trainables.driver.tune_search import to_param_space

ray = pytest.importorskip("ray")
tune = pytest.importorskip("ray.tune")
pytest.importorskip("optuna")
tune_search = pytest.importorskip("trainables.driver.tune_search")


def trivial_train(config: dict[str, Any]) -> None:
    """Checks the config against the contract, then reports two evaluations."""
    checked = TrialConfig.model_validate(config)
    alpha = float(getattr(checked.loss, "alpha", 0.0))
    for epoch in range(2):
        tune.report({"eval_f1": 50.0 + checked.seed + epoch + alpha, "epoch": epoch})


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    with local_ray_head(__name__):
        yield


def run(spec: SweepSpec, storage: Path) -> Any:
    tuner = tune.Tuner(
        tune.with_resources(trivial_train, tune_search.trial_resources(spec)),
        param_space=to_param_space(spec, sweep_id="sweep-test"),
        tune_config=tune.TuneConfig(**tune_search.tune_config_kwargs(spec)),
        run_config=tune.RunConfig(storage_path=str(storage), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    return results


def test_grid_runs_every_loss_for_every_seed(local_ray: None, tmp_path: Path) -> None:
    spec = resolve_spec(
        {
            "extends": "smoke",
            "seeds": [0, 1],
            "training": {"epochs": 2},
            "scheduler": {"kind": "asha", "grace_period": 1, "per_loss": True},
        }
    )
    results = run(spec, tmp_path)
    configs = [TrialConfig.model_validate(result.config) for result in results]
    assert all(config.sweep_id == "sweep-test" for config in configs)
    seen = sorted((config.loss.name, config.seed) for config in configs)
    assert seen == [("ce", 0), ("ce", 1), ("dsc", 0), ("dsc", 1)]
    losses = [result.config["loss"] for result in results]
    assert all(loss in expand_losses(spec) for loss in losses)
    assert all("eval_f1" in result.metrics for result in results)


def test_tpe_search_runs_each_suggestion_once_per_seed(local_ray: None, tmp_path: Path) -> None:
    spec = resolve_spec(
        {
            "extends": "smoke",
            "search_space": {"losses": [{"name": "dsc", "alpha": {"loguniform": [0.001, 1]}}]},
            "seeds": [0, 1],
            "search": {"algorithm": "tpe", "num_samples": 2, "sampler_seed": 0},
        }
    )
    results = run(spec, tmp_path)
    configs = [TrialConfig.model_validate(result.config) for result in results]
    assert len(configs) == 4
    seeds_by_alpha: dict[float, set[int]] = {}
    for config in configs:
        assert config.loss.name == "dsc"
        assert 0.001 <= config.loss.alpha <= 1
        seeds_by_alpha.setdefault(config.loss.alpha, set()).add(config.seed)
    assert len(seeds_by_alpha) == 2
    assert all(seeds == {0, 1} for seeds in seeds_by_alpha.values())
