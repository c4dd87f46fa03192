"""``precision: auto`` decided once per sweep (``search_spaces.precision_rule``,
``trainables.driver.precision_probe``): the rule's table, one decision however each
process would measure, and a real sweep of two trial processes that all train in the
precision its parent run records."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from search_spaces.contract import PRECISION_REASON_TAG, PRECISION_TAG
from search_spaces.precision_rule import Probe, stated_precision, sweep_precision
from search_spaces.resolve import resolve_spec
from search_spaces.settings import DicesweepSettings
from tests.toydata import make_toy_datasets
from tests.trainables.test_sweep import DRIVER, environment, runs, toy_spec, tracking
from trainables.driver import precision_probe
from trainables.driver.tune_search import to_param_space


@pytest.mark.parametrize(
    ("probe", "formulation", "expected"),
    [
        (Probe("cpu", 1.5), "tagger", "bf16"),  # an AMD EPYC's figure
        (Probe("cpu", 1.25), "pair classifier", "bf16"),
        (Probe("cpu", 1.2), "tagger", "fp32"),
        (Probe("cpu", 0.6), "tagger", "fp32"),  # an Intel Xeon without AMX
        (Probe("cpu", 2.5), "mrc", "bf16"),  # MRC-NER: its parity cell (study 6)
        (Probe("cpu", 2.5), "span extraction", "fp32"),  # no parity cell yet
        (Probe("cuda", 4.0, cuda_bf16=True), "tagger", "bf16"),
        (Probe("cuda", 0.0, cuda_bf16=False), "tagger", "fp16"),
        (Probe("cuda", 4.0, cuda_bf16=True), "mrc", "bf16"),
        (Probe("cuda", 4.0, cuda_bf16=True), "span extraction", "fp32"),
    ],
)
def test_the_rule(probe: Probe, formulation: str, expected: str) -> None:
    chosen, reason = sweep_precision(probe, formulation)
    assert chosen == expected and reason


def test_what_the_cluster_states_holds_where_parity_is_shown() -> None:
    assert stated_precision("bf16", "tagger")[0] == "bf16"
    assert stated_precision("bf16", "mrc")[0] == "bf16"
    assert stated_precision("bf16", "span extraction")[0] == "fp32"


class Parent:
    """The parent run's tags, as MLflow's client sets and reads them."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}

    def get_run(self, run_id: str) -> Any:
        return type("Run", (), {"data": type("Data", (), {"tags": dict(self.tags)})})

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.tags[key] = value


def test_one_probe_decides_for_every_trial_and_every_resumed_driver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two processes measuring for themselves would disagree (1.5x, then 0.9x): the
    sweep measures once, and a resumed driver reads its decision back."""
    measured = [Probe("cpu", 1.5), Probe("cpu", 0.9)]
    monkeypatch.setattr(precision_probe, "measure", lambda spec: measured.pop(0))
    spec = resolve_spec({"extends": "smoke", "seeds": [0, 1]})
    assert spec.training.precision == "auto"
    settings, parent = DicesweepSettings(home=tmp_path), Parent()
    first = precision_probe.with_sweep_precision(spec, settings, parent, "p", "sweep")
    resumed = precision_probe.with_sweep_precision(spec, settings, parent, "p", "sweep")
    assert first.training.precision == resumed.training.precision == "bf16"
    assert len(measured) == 1  # measured once
    assert parent.tags[PRECISION_TAG] == "bf16" and "1.50x" in parent.tags[PRECISION_REASON_TAG]
    assert to_param_space(first)["training"]["precision"] == "bf16"  # every trial's config


def test_a_stated_or_explicit_precision_is_never_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(precision_probe, "measure", pytest.fail)
    spec = resolve_spec({"extends": "smoke"})
    stated = DicesweepSettings(home=tmp_path, auto_precision="fp32")
    chosen = precision_probe.with_sweep_precision(spec, stated, Parent(), "p", "sweep")
    assert chosen.training.precision == "fp32"
    fixed = resolve_spec({"extends": "smoke", "training": {"precision": "bf16"}})
    same = precision_probe.with_sweep_precision(
        fixed, DicesweepSettings(home=tmp_path), None, "", ""
    )
    assert same is fixed


@pytest.mark.e2e
def test_a_sweep_of_two_trial_processes_trains_in_its_one_precision(
    tmp_path: Path, short_home: Path
) -> None:
    datasets = make_toy_datasets(tmp_path / "datasets")
    losses = [{"name": "ce"}, {"name": "focal", "gamma": 2}]
    spec = toy_spec(
        tmp_path / "spec.yaml",
        search_space={"losses": losses},
        resources={"cpus_per_trial": 1, "max_concurrent_trials": 2},
    )
    measuring = environment(short_home, datasets)
    del measuring["DICESWEEP_AUTO_PRECISION"]  # the driver measures
    result = subprocess.run(
        [*DRIVER, str(spec), "--sweep-id", "precision-test", "--num-cpus", "2"],
        env=measuring,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client = tracking(short_home)
    (parent,) = runs(client, "precision-test", "sweep")
    chosen = parent.data.tags[PRECISION_TAG]
    assert chosen in ("fp32", "bf16") and "measured" in parent.data.tags[PRECISION_REASON_TAG]
    assert f"precision auto is {chosen}" in result.stderr
    trials = runs(client, "precision-test", "trial")
    assert len(trials) == 2
    for trial in trials:  # its config asked for it, it trained in it, its row says so
        assert trial.data.params["training.precision"] == chosen
        assert trial.data.tags[PRECISION_TAG] == chosen
        assert trial.data.params["setup.precision"] == chosen
