"""A trial that uses up its retries (``max_failures``) is a failed trial, not an
interrupted sweep: a real local Ray cluster whose memory monitor kills every trial
worker, real MLflow on SQLite, the driver as a process."""

from __future__ import annotations

import subprocess
from pathlib import Path

from search_spaces.contract import ATTEMPT_TAG, FAILURE_TAG
from tests.toydata import make_toy_datasets
from tests.trainables.test_sweep import DRIVER, environment, runs, toy_spec, tracking


def failures(home: Path) -> int:
    """How many times the sweep's one trial failed, as Tune's error file counts them."""
    (error_file,) = (home / "ray_results" / "out-of-retries").glob("train_*/error.txt")
    return error_file.read_text().count("Failure # ")


def test_a_trial_out_of_retries_fails_the_trial_and_a_resumed_driver_leaves_it(
    tmp_path: Path, short_home: Path
) -> None:
    datasets = make_toy_datasets(tmp_path / "datasets")
    spec = toy_spec(tmp_path / "spec.yaml", max_failures=1)
    env = environment(short_home, datasets)
    # Ray's memory monitor, with a threshold any machine is over, kills each trial's
    # worker as it starts: the trial never reports, as one over a node's memory.
    env.update(RAY_memory_usage_threshold="0.001", RAY_memory_monitor_refresh_ms="100")
    command = [*DRIVER, str(spec), "--sweep-id", "out-of-retries", "--num-cpus", "2"]
    client = tracking(short_home)

    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 1, first.stderr[-3000:]  # some trials failed; not 130
    assert "interrupted" not in first.stderr
    assert "trial failed: ce seed=0 on conll2003 original: out of memory on node" in (first.stderr)
    assert "sweep out-of-retries: 0 done, 1 failed" in first.stderr
    (trial,) = runs(client, "out-of-retries", "trial")
    assert trial.info.status == "FAILED"
    assert trial.data.tags[FAILURE_TAG].startswith("out of memory on node")
    assert failures(short_home) == 2  # the first try and its one retry
    (parent,) = runs(client, "out-of-retries", "sweep")
    assert parent.info.status == "FAILED"

    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 1, resumed.stderr[-3000:]
    assert "resuming sweep out-of-retries" in resumed.stderr
    assert "sweep out-of-retries: 0 done, 1 failed" in resumed.stderr
    (again,) = runs(client, "out-of-retries", "trial")
    # Not tried a third time: no failure or attempt more, its reason kept.
    assert failures(short_home) == 2
    assert again.data.tags[ATTEMPT_TAG] == trial.data.tags[ATTEMPT_TAG]
    assert again.info.status == "FAILED"
    assert again.data.tags[FAILURE_TAG] == trial.data.tags[FAILURE_TAG]
