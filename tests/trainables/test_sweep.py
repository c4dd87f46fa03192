"""Sweeps end to end: a real local Ray cluster, real MLflow on SQLite, the driver as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient

from search_spaces.contract import ATTEMPT_TAG, EXPERIMENT, ROLE_TAG, SWEEP_TAG
from search_spaces.flags import degenerate_reason
from tests.conftest import short_home_folder
from tests.toydata import make_toy_datasets
from trainables.driver.reports import metric_key

DRIVER = [sys.executable, "-m", "trainables.driver"]
CLI = [sys.executable, "-m", "sweep_service.cli"]


def environment(home: Path, datasets: Path) -> dict[str, str]:
    # Ray's settings as a fresh machine has them: token auth on by default.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_"))}
    env.update(DICESWEEP_HOME=str(home), DICESWEEP_DATASETS_DIR=str(datasets), OMP_NUM_THREADS="1")
    # The cluster states what precision auto is: a probe of tiny-bert's width sits near
    # bf16's bar on some CPUs, and two sweeps of one spec could train in either.
    env["DICESWEEP_AUTO_PRECISION"] = "fp32"
    return env


def tracking(home: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{home / 'mlflow.db'}")


def runs(client: MlflowClient, sweep_id: str, role: str) -> list[Any]:
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        return []
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = '{role}'"
    return client.search_runs([experiment.experiment_id], filter_string=query)


def steps_logged(client: MlflowClient, run_id: str) -> list[int]:
    return [int(m.step) for m in client.get_metric_history(run_id, "eval_f1")]


def wait_for(condition: Callable[[], bool], process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the driver exited before the condition held"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def toy_spec(path: Path, **overrides: Any) -> Path:
    spec = {
        "name": "toy",
        "task": {"dataset": "conll2003"},
        "model": "tiny-bert",
        "training": {
            "epochs": 2,
            "learning_rate": 2.0e-3,
            "batch_size": 16,
            "max_seq_length": 32,
            "warmup_ratio": 0.0,
        },
        "search_space": {"losses": [{"name": "ce"}]},
        "seeds": [0],
        "resources": {"cpus_per_trial": 1, "max_concurrent_trials": 1},
        **overrides,
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def checkpointing_spec(path: Path, epochs: int) -> Path:
    """A toy trial that evaluates and checkpoints every 10 steps (30 an epoch on 480
    sentences) and may be retried twice."""
    training = {
        "epochs": epochs,
        "learning_rate": 2.0e-3,
        "batch_size": 16,
        "max_seq_length": 32,
        "warmup_ratio": 0.0,
        "eval_every_steps": 10,
    }
    return toy_spec(path, training=training, max_failures=2)


@pytest.fixture(scope="module")
def smoke(datasets_dir: Path) -> Iterator[dict[str, Any]]:
    """The ``smoke`` preset run once by the driver, on the real UD English EWT files."""
    with short_home_folder() as home:
        yield run_smoke(home, datasets_dir)


def ray_user_token() -> float | None:
    """When ``~/.ray/auth_token`` (Ray's shared default) last changed, if it exists."""
    token = Path.home() / ".ray" / "auth_token"
    return token.stat().st_mtime if token.exists() else None


def run_smoke(home: Path, datasets_dir: Path) -> dict[str, Any]:
    shared_token = ray_user_token()
    env = environment(home, datasets_dir)
    result = subprocess.run(
        [*DRIVER, "--preset", "smoke", "--sweep-id", "smoke-test", "--num-cpus", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        "home": home,
        "env": env,
        "result": result,
        "client": tracking(home),
        "shared_token_untouched": ray_user_token() == shared_token,
    }


@pytest.mark.data
def test_smoke_sweep_writes_parent_and_nested_runs(smoke: dict[str, Any]) -> None:
    client = smoke["client"]
    (parent,) = runs(client, "smoke-test", "sweep")
    trials = runs(client, "smoke-test", "trial")
    assert parent.info.status == "FINISHED"
    assert parent.data.params["trials"] == "2" and parent.data.params["preset"] == "smoke"
    assert len(trials) == 2
    assert {t.data.tags["dicesweep.loss"] for t in trials} == {"ce", "dsc"}
    for trial in trials:
        tags, params, metrics = trial.data.tags, trial.data.params, trial.data.metrics
        assert trial.info.status == "FINISHED"
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags["dicesweep.seed"] == "0" and tags["dicesweep.variant"] == "original"
        assert params["dataset"] == "ud_en_ewt_sample" and params["training.epochs"] == "1"
        assert 0 <= metrics["eval_f1"] <= 100 and "train_loss" in metrics
        assert steps_logged(client, trial.info.run_id) == [63]  # 2000 sentences / 32
        assert metrics["optimizer_steps"] == 63 and tags["dicesweep.stop_reason"] == "epochs"
    dsc = next(t for t in trials if t.data.tags["dicesweep.loss"] == "dsc")
    assert dsc.data.params["loss.alpha"] == "0.1" and dsc.data.params["loss.scope"] == "set"
    # Named for the MLflow UI: the spec's name and a short id; each trial by its loss,
    # seed and variant (one data set: not named); the spec's description on the parent.
    assert parent.info.run_name == "smoke · test"
    assert parent.data.tags["mlflow.note.content"].startswith("Smoke test: tiny-bert")
    assert dsc.info.run_name == "dsc(alpha=0.1,scope=set) seed=0 original"
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    # The first sweep a newcomer runs shows something: every trial learned (none
    # flagged, far above the majority tag), and the table's numbers on the parent
    # equal its trials' (one seed: the value).
    for trial in trials:
        assert degenerate_reason(trial.data.metrics) is None
        assert "dicesweep.degenerate" not in trial.data.tags
        assert trial.data.metrics["eval_f1"] > trial.data.metrics["eval_baseline_f1"] + 30
        label = metric_key(trial.data.tags["dicesweep.loss_label"])
        value = pytest.approx(trial.data.metrics["eval_f1"])
        assert parent.data.metrics[f"grid/{label}/ud_en_ewt_sample/mean"] == value
        assert parent.data.metrics[f"best_eval_f1/{label}"] == value
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/grid.md", "report/grid.csv", "report/grid.tex", "report/grid.png"} <= artifacts
    assert "report/grid.html" in artifacts
    assert "| dsc(alpha=0.1,scope=set) |" in smoke["result"].stdout  # the table, at the end
    assert "degenerate" not in smoke["result"].stdout
    assert "2 done, 0 failed" in smoke["result"].stderr
    assert "running" in smoke["result"].stderr  # the live display


@pytest.mark.data
def test_the_local_head_keeps_its_files_and_token_under_the_home(smoke: dict[str, Any]) -> None:
    ray_home = smoke["home"] / "ray"
    assert any(ray_home.glob("session_2*")) and (ray_home / "auth_token").exists()
    assert smoke["shared_token_untouched"]  # nothing written to ~/.ray


@pytest.mark.data
@pytest.mark.parametrize("fmt", ["markdown", "csv", "latex", "json"])
def test_grid_command_renders_the_sweep(smoke: dict[str, Any], fmt: str) -> None:
    result = subprocess.run(
        [*CLI, "grid", "smoke-test", "--format", fmt],
        env=smoke["env"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    if fmt == "json":
        table = json.loads(text)
        # One cell per loss, each its own trial's F1 as MLflow has it (the two F1s
        # tie now and then: both land within some 25 of the 6,363 dev tokens),
        # and no flagged trial.
        by_loss = {
            trial.data.tags["dicesweep.loss_label"]: trial.data.metrics["eval_f1"]
            for trial in runs(smoke["client"], "smoke-test", "trial")
        }
        means = {cell["row"]: cell["mean"] for cell in table["cells"]}
        assert means == pytest.approx(by_loss) and len(means) == 2
        assert table["degenerate"] == [] and not any(c["degenerate"] for c in table["cells"])
    elif fmt == "latex":
        assert "\\toprule" in text and "\\label{tab:smoke-test}" in text
    else:
        assert "dsc(alpha=0.1,scope=set)" in text and "ud_en_ewt_sample" in text


@pytest.mark.data
def test_grid_command_png_and_unknown_sweep(smoke: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "grid.png"
    subprocess.run(
        [*CLI, "grid", "smoke-test", "--format", "png", "--output", str(out)],
        env=smoke["env"],
        check=True,
        timeout=120,
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = subprocess.run(
        [*CLI, "grid", "no-such-sweep"],
        env=smoke["env"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1
    assert "no finished trials found for no-such-sweep" in missing.stderr


@pytest.mark.e2e
def test_killed_trial_is_retried_from_its_checkpoint_into_the_same_run(
    tmp_path: Path, short_home: Path
) -> None:
    datasets = make_toy_datasets(tmp_path / "datasets", n_train=480)  # 30 steps an epoch
    home = short_home
    spec = checkpointing_spec(tmp_path / "spec.yaml", epochs=4)
    client = tracking(home)
    driver = subprocess.Popen(
        [*DRIVER, str(spec), "--sweep-id", "kill-test", "--num-cpus", "2"],
        env=environment(home, datasets),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def reported_twice() -> bool:
        trials = runs(client, "kill-test", "trial")
        return bool(trials) and len(steps_logged(client, trials[0].info.run_id)) >= 2

    wait_for(reported_twice, driver, timeout=300)
    workers = [
        p
        for p in psutil.Process(driver.pid).children(recursive=True)
        if "ImplicitFunc" in " ".join(p.cmdline())
    ]
    assert len(workers) == 1
    workers[0].kill()
    _, err = driver.communicate(timeout=400)
    assert driver.returncode == 0, err[-3000:]
    (trial,) = runs(client, "kill-test", "trial")  # still one run: no duplicate
    assert trial.data.tags[ATTEMPT_TAG] == "2"
    assert trial.info.status == "FINISHED"
    steps = steps_logged(client, trial.info.run_id)
    assert steps == sorted(set(steps)), steps  # resumed, not restarted: no step twice
    assert steps[-1] == 120 and len(steps) >= 11


@pytest.mark.e2e
def test_interrupted_driver_resumes_without_rerunning_finished_trials(
    tmp_path: Path, short_home: Path
) -> None:
    datasets = make_toy_datasets(tmp_path / "datasets")
    home = short_home
    losses = [{"name": "ce"}, {"name": "focal", "gamma": 2}, {"name": "dice", "scope": "set"}]
    spec = toy_spec(tmp_path / "spec.yaml", search_space={"losses": losses})
    env = environment(home, datasets)
    client = tracking(home)
    command = [*DRIVER, str(spec), "--sweep-id", "resume-test", "--num-cpus", "2"]
    driver = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def one_finished() -> bool:
        return any(r.info.status == "FINISHED" for r in runs(client, "resume-test", "trial"))

    wait_for(one_finished, driver, timeout=300)
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 130, err[-3000:]
    assert "interrupted" in err
    before = {
        r.info.run_id: steps_logged(client, r.info.run_id)
        for r in runs(client, "resume-test", "trial")
        if r.info.status == "FINISHED"
    }
    assert 1 <= len(before) < 3

    resumed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming sweep resume-test" in resumed.stderr
    trials = runs(client, "resume-test", "trial")
    assert len(trials) == 3 and all(t.info.status == "FINISHED" for t in trials)
    for trial in trials:
        if trial.info.run_id in before:  # finished before the interrupt: untouched
            assert steps_logged(client, trial.info.run_id) == before[trial.info.run_id]
            assert trial.data.tags[ATTEMPT_TAG] == "1"
    (parent,) = runs(client, "resume-test", "sweep")
    assert parent.info.status == "FINISHED"


def checkpoint_named(state_file: Path) -> str | None:
    """The checkpoint folder a one-trial experiment state names for its trial, if any."""
    from ray.tune.experiment.trial import Trial
    from ray.tune.utils.serialization import _loads_with_cloudpickle

    ((trial_json, metadata_json),) = _loads_with_cloudpickle(state_file.read_text())["trial_data"]
    trial = Trial.from_json_state(trial_json, stub=True)
    trial.restore_run_metadata(metadata_json)
    return trial.checkpoint.path if trial.checkpoint else None


@pytest.mark.e2e
def test_a_driver_killed_after_tune_deleted_the_checkpoint_its_state_names_resumes(
    tmp_path: Path, short_home: Path
) -> None:
    """Tune deletes a trial's previous checkpoint when the next is reported and saves its
    experiment state later: a driver killed in between leaves a state naming a deleted
    checkpoint. The resumed trial goes on from the checkpoint that replaced it."""
    datasets = make_toy_datasets(tmp_path / "datasets", n_train=480)  # 30 steps an epoch
    home = short_home
    spec = checkpointing_spec(tmp_path / "spec.yaml", epochs=6)
    env = environment(home, datasets)
    client = tracking(home)
    command = [*DRIVER, str(spec), "--sweep-id", "window-test", "--num-cpus", "2"]
    driver = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    experiment = home / "ray_results" / "window-test"

    def evaluations() -> int:
        trials = runs(client, "window-test", "trial")
        return len(steps_logged(client, trials[0].info.run_id)) if trials else 0

    # A state that names a checkpoint: kept, as the last save before the kill.
    snapshot: dict[str, Any] = {}

    def state_names_a_checkpoint() -> bool:
        for state_file in experiment.glob("experiment_state-*.json"):
            try:
                named = checkpoint_named(state_file)
                text = state_file.read_text()
            except (ValueError, OSError):  # caught mid-write
                continue
            if named is not None and Path(named).exists():
                snapshot.update(file=state_file, text=text, named=Path(named))
                return True
        return False

    wait_for(state_names_a_checkpoint, driver, timeout=300)
    reported = evaluations()
    # Two reports later Tune has deleted the named checkpoint and kept a later one.
    wait_for(lambda: evaluations() >= reported + 2 and not snapshot["named"].exists(), driver, 300)
    tree = [driver, *psutil.Process(driver.pid).children(recursive=True)]
    for process in tree:
        process.kill()
    driver.wait(timeout=30)
    psutil.wait_procs([p for p in tree if isinstance(p, psutil.Process)], timeout=30)
    snapshot["file"].write_text(snapshot["text"])  # the state as the kill left it
    later = sorted(snapshot["named"].parent.glob("checkpoint_*"))
    assert not snapshot["named"].exists() and later, later
    before = evaluations()

    resumed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{snapshot['named'].name} is gone" in resumed.stderr
    assert f"resumes from {later[0].name}" in resumed.stderr
    (trial,) = runs(client, "window-test", "trial")
    assert trial.info.status == "FINISHED"
    steps = steps_logged(client, trial.info.run_id)
    assert sorted(set(steps)) == list(range(10, 190, 10))
    # Resumed where the later checkpoint stood, not restarted from step 0.
    assert len(steps) < before + 18, (before, steps)


def test_a_trial_no_node_can_hold_fails_the_sweep_at_once(tmp_path: Path, short_home: Path) -> None:
    datasets = make_toy_datasets(tmp_path / "datasets")
    spec = toy_spec(tmp_path / "spec.yaml", resources={"cpus_per_trial": 64})
    started = time.monotonic()
    result = subprocess.run(
        [*DRIVER, str(spec), "--sweep-id", "too-big", "--num-cpus", "2"],
        env=environment(short_home, datasets),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "cpus_per_trial=64 and gpus_per_trial=0: no node of the cluster has that much" in (
        result.stderr
    )
    assert "2 CPUs and 0 GPUs" in result.stderr
    (parent,) = runs(tracking(short_home), "too-big", "sweep")
    assert parent.info.status == "FAILED" and "no node" in parent.data.tags["dicesweep.failure"]
    assert time.monotonic() - started < 120  # failed fast: no trial waited for a node
