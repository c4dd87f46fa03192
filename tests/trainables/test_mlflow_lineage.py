"""What the MLflow UI shows of a sweep, against a real MLflow store (SQLite): the
experiment marked model training, the parent run's name and description, each
trial's name and params lined up across losses."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import ANY

import pytest
from mlflow.tracking import MlflowClient

from search_spaces.contract import CHART_VIEW_TAG, DATASET_COUNT_TAG, EXPERIMENT
from search_spaces.resolve import resolve_spec
from search_spaces.sections import TrackingLink
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from sweep_service.results import trial_rows
from trainables.driver.parent import open_tracking, parent_run_name
from trainables.driver.tracking import TrialLogger

KIND = "mlflow.experimentKind"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> DicesweepSettings:
    """One MLflow store for the module (its schema takes seconds to create)."""
    return DicesweepSettings(home=tmp_path_factory.mktemp("home"))


def spec_of(datasets: list[str], **fields: Any) -> SweepSpec:
    return resolve_spec({"extends": "smoke", "task": {"kind": "pi", "dataset": datasets}, **fields})


def trial_config(
    spec: SweepSpec, sweep_id: str, loss: dict[str, Any], seed: int = 2
) -> dict[str, Any]:
    """A trial's config as Tune hands it over (``trainables.driver.tune_search``)."""
    return {
        "sweep_id": sweep_id,
        "dataset": "mrpc",
        "kind": spec.task.kind,
        "variant": "original",
        "model": spec.model,
        "loss": loss,
        "seed": seed,
        "training": spec.training.model_dump(),
    }


def test_the_parent_is_named_after_the_spec_with_a_short_id() -> None:
    spec = spec_of(["mrpc"], name="table8-mrpc")
    assert parent_run_name(spec, "sw-3536bd89c0ffee42") == "table8-mrpc · 3536bd89"
    driver_id = "table8-mrpc-20261125-101500-a1b2c3"  # trainables.driver.run.new_sweep_id
    assert parent_run_name(spec, driver_id) == "table8-mrpc · a1b2c3"
    assert parent_run_name(spec_of(["mrpc"]), "sw-00ff") == "smoke · 00ff"  # the preset's


def test_the_experiment_opens_as_model_training_and_the_parent_is_described(
    settings: DicesweepSettings,
) -> None:
    spec = spec_of(["mrpc"], name="kind-test", description="ce against dsc on MRPC")
    client, link = open_tracking(settings, "sw-1234abcd5678", spec)
    experiment = client.get_experiment(link.experiment_id)
    assert experiment.name == EXPERIMENT
    assert experiment.tags[KIND] == "custom_model_development"
    parent = client.get_run(link.parent_run_id)
    assert parent.info.run_name == "kind-test · 1234abcd"
    assert parent.data.tags["mlflow.note.content"] == "ce against dsc on MRPC"  # its description
    assert parent.data.tags[DATASET_COUNT_TAG] == "1"
    # The experiment made before the tag existed (or by hand) gets it too; a resumed
    # sweep finds its parent again.
    client.delete_experiment_tag(link.experiment_id, KIND)
    _, again = open_tracking(settings, "sw-1234abcd5678", spec)
    assert again == link
    assert client.get_experiment(link.experiment_id).tags[KIND] == "custom_model_development"


def test_trials_are_named_by_loss_seed_and_variant_with_every_loss_parameter_a_param(
    settings: DicesweepSettings,
) -> None:
    sweep_id = "sw-0000aaaa1111"
    spec = spec_of(["mrpc"], name="names-test")
    client, link = open_tracking(settings, sweep_id, spec)
    logger = TrialLogger(link, client)
    losses = {
        "ce": {"name": "ce"},
        "tversky": {"name": "tversky", "alpha": 0.3, "beta": 0.7},
        "dsc": {"name": "dsc", "alpha": 0.1},
    }
    runs = {
        name: client.get_run(logger.run_id(name, trial_config(spec, sweep_id, loss)))
        for name, loss in losses.items()
    }
    # One data set: the name carries what tells the sweep's trials apart, the loss as the
    # table labels it (only what the spec set).
    assert runs["tversky"].info.run_name == "tversky(alpha=0.3,beta=0.7) seed=2 original"
    assert runs["dsc"].info.run_name == "dsc(alpha=0.1) seed=2 original"
    assert runs["ce"].info.run_name == "ce seed=2 original"
    params = {name: run.data.params for name, run in runs.items()}
    # Defaults are params too, so a column compares a trial that set it with one that
    # did not; a loss without the parameter logs none.
    assert {k: v for k, v in params["tversky"].items() if k.startswith("loss")} == {
        "loss": "tversky",
        "loss.alpha": "0.3",
        "loss.beta": "0.7",
        "loss.smooth": "1.0",
        "loss.scope": "example",
        "loss.classes": "mean",
        "loss.square": "False",
        "loss.ohem_ratio": "0.0",
        "loss.ohem_rule": "hardest",
    }
    assert params["dsc"]["loss.square"] == "False" and params["dsc"]["loss.smooth"] == "1.0"
    assert [k for k in params["ce"] if k.startswith("loss")] == ["loss"]
    shared = {k for k in params["ce"] if not k.startswith("loss")}
    assert all(shared <= set(trial) for trial in params.values())
    assert {"dataset", "variant", "model", "seed", "training.epochs"} <= shared
    # The runs table filters and sorts on those columns.
    found = client.search_runs(
        [link.experiment_id],
        f"params.`loss.smooth` = '1.0' and tags.`dicesweep.sweep_id` = '{sweep_id}'",
    )
    assert {run.info.run_id for run in found} == {
        runs["tversky"].info.run_id,
        runs["dsc"].info.run_id,
    }


def test_a_sweep_over_several_data_sets_names_each_trials_data_set(
    settings: DicesweepSettings,
) -> None:
    sweep_id = "sw-2222bbbb3333"
    spec = spec_of(["mrpc", "qqp"], name="datasets-test")
    client, link = open_tracking(settings, sweep_id, spec)
    assert client.get_run(link.parent_run_id).data.tags[DATASET_COUNT_TAG] == "2"
    run_id = TrialLogger(link, client).run_id("t1", trial_config(spec, sweep_id, {"name": "ce"}))
    assert client.get_run(run_id).info.run_name == "ce seed=2 original · mrpc"


def test_a_parent_from_before_the_data_set_count_names_the_data_set(
    settings: DicesweepSettings,
) -> None:
    sweep_id = "sw-4444cccc5555"
    spec = spec_of(["mrpc"], name="older-test")
    client = MlflowClient(settings.mlflow_tracking_uri)
    _, link = open_tracking(settings, "sw-6666dddd7777", spec)
    parent = client.create_run(link.experiment_id).info.run_id  # no count tag
    older = TrackingLink(
        tracking_uri=link.tracking_uri, experiment_id=link.experiment_id, parent_run_id=parent
    )
    run_id = TrialLogger(older, client).run_id("t1", trial_config(spec, sweep_id, {"name": "ce"}))
    assert client.get_run(run_id).info.run_name == "ce seed=2 original · mrpc"


def test_a_trial_run_records_the_ray_node_of_its_latest_attempt(
    settings: DicesweepSettings,
) -> None:
    sweep_id = "sw-0000cccc3333"
    spec = spec_of(["mrpc"], name="node-test")
    client, link = open_tracking(settings, sweep_id, spec)
    logger = TrialLogger(link, client)
    config = trial_config(spec, sweep_id, {"name": "ce"})
    first = {"step": 4, "eval_f1": 70.0, "node_id": "a1" * 28, "hostname": "ray-worker-1"}
    logger.log_result("t1", config, {**first, "node_ip": "172.20.0.5", "precision": "bf16"})
    run = client.get_run(logger.run_id("t1", config))
    assert run.data.tags["dicesweep.precision"] == "bf16"  # what it trained in, read back:
    assert trial_rows(client, sweep_id)["precision"].tolist() == ["bf16"]
    assert run.data.tags["dicesweep.node_id"] == "a1" * 28
    assert run.data.tags["dicesweep.hostname"] == "ray-worker-1"
    assert run.data.tags["dicesweep.node_ip"] == "172.20.0.5"
    assert "node_id" not in run.data.metrics  # a string, never a metric
    # Retried on the other worker: the run names the node that trained it last.
    moved = {"step": 8, "eval_f1": 75.0, "node_id": "b2" * 28, "hostname": "ray-worker-2"}
    logger.log_result("t1", config, {**moved, "node_ip": "172.20.0.6"})
    tags = client.get_run(run.info.run_id).data.tags
    assert (tags["dicesweep.node_id"], tags["dicesweep.hostname"]) == ("b2" * 28, "ray-worker-2")


def test_a_degenerate_trial_is_finished_with_the_reason_in_its_run(
    settings: DicesweepSettings,
) -> None:
    sweep_id = "sw-0000dddd4444"
    spec = spec_of(["mrpc"], name="degenerate-test")
    client, link = open_tracking(settings, sweep_id, spec)
    logger = TrialLogger(link, client)
    config = trial_config(spec, sweep_id, {"name": "dsc", "alpha": 0.1})

    trial = SimpleNamespace(  # what Tune hands the hook
        trial_id="t-degenerate",
        config=config,
        last_result={
            "step": 8,
            "eval_f1": 81.8,
            "eval_baseline_f1": 81.22,
            "eval_baseline_accuracy": 68.38,
            "eval_top_prediction_share": 99.3,
            "eval_positive_prediction_share": 99.3,
        },
    )
    logger.on_trial_complete(0, [], trial)
    logger.flush()
    run = client.get_run(logger.run_id("t-degenerate", config))
    assert run.info.status == "FINISHED"
    assert run.data.tags["dicesweep.degenerate"] == "predicts positive for 99.3% of pairs"


def test_a_finished_trial_records_its_optimiser_steps_and_why_it_stopped(
    settings: DicesweepSettings,
) -> None:
    from sweep_service.results import trial_rows

    sweep_id = "sw-0000eeee5555"
    spec = spec_of(["mrpc"], name="steps-test")
    client, link = open_tracking(settings, sweep_id, spec)
    logger = TrialLogger(link, client)
    early = trial_config(spec, sweep_id, {"name": "ce"}, seed=0)
    cut = trial_config(spec, sweep_id, {"name": "ce"}, seed=1)
    # The last report of a trial that stopped early: its best evaluation, and why.
    last = {"step": 120, "optimizer_steps": 120, "eval_f1": 84.0, "stop_reason": "early_stopping"}
    logger.log_result("t-early", early, {"step": 60, "optimizer_steps": 60, "eval_f1": 84.0})
    logger.log_result("t-early", early, last)
    logger.on_trial_complete(
        0, [], SimpleNamespace(trial_id="t-early", config=early, last_result=last)
    )
    # ASHA stopped this one after an ordinary evaluation.
    cut_short = {"step": 60, "optimizer_steps": 60, "eval_f1": 70.0}
    logger.log_result("t-cut", cut, cut_short)
    logger.on_trial_complete(
        0, [], SimpleNamespace(trial_id="t-cut", config=cut, last_result=cut_short)
    )
    logger.flush()
    run = client.get_run(logger.run_id("t-early", early))
    assert run.data.metrics["optimizer_steps"] == 120
    assert "stop_reason" not in run.data.metrics  # a string: the tag says it
    assert run.data.tags["dicesweep.stop_reason"] == "early_stopping"
    rows = trial_rows(client, sweep_id, link.experiment_id).set_index("seed")
    assert rows.loc[0, "optimizer_steps"] == 120 and rows.loc[0, "stop_reason"] == "early_stopping"
    assert rows.loc[1, "optimizer_steps"] == 60 and rows.loc[1, "stop_reason"] == "scheduler"


def test_a_driver_finding_the_experiment_created_meanwhile_uses_it(tmp_path: Path) -> None:
    """Two sweeps' drivers starting at once: both see no experiment, one creates it, the
    other's create is refused as existing and it takes the one now there."""
    from trainables.driver.parent import experiment_id

    settings = DicesweepSettings(home=tmp_path / "home")
    client = MlflowClient(str(settings.mlflow_tracking_uri))
    first = experiment_id(client, settings)
    looked_up = client.get_experiment_by_name
    calls = iter([None])  # the other driver's create lands after this driver looked

    def late_lookup(name: str) -> Any:
        return next(calls, looked_up(name)) if name == EXPERIMENT else looked_up(name)

    client.get_experiment_by_name = late_lookup  # type: ignore[method-assign]
    assert experiment_id(client, settings) == first


def test_the_experiment_carries_the_trials_first_chart_view(tmp_path: Path) -> None:
    """A new experiment holds the saved chart view the service's "charts" link opens,
    and one made before the view existed gets it when a driver next opens it."""
    from trainables.driver.parent import experiment_id

    settings = DicesweepSettings(home=tmp_path / "home")
    client = MlflowClient(str(settings.mlflow_tracking_uri))
    created = client.get_experiment(experiment_id(client, settings, "dicesweep/alice"))
    view = json.loads(created.tags[CHART_VIEW_TAG])
    assert view["name"] == "dicesweep: trials first"
    state = json.loads(view["state"])
    assert [s["name"] for s in state["compareRunSections"]] == ["Model metrics"]
    assert state["isAccordionReordered"] is True  # the UI keeps the order, unsorted
    older = client.create_experiment("dicesweep/bob")
    assert CHART_VIEW_TAG not in client.get_experiment(older).tags
    assert experiment_id(client, settings, "dicesweep/bob") == older
    assert json.loads(client.get_experiment(older).tags[CHART_VIEW_TAG]) == {
        **view,
        "createdAt": ANY,
        "updatedAt": ANY,
    }
