"""A two-stage sweep (``tune``) run by the driver as a process: a real local Ray head,
real MLflow on SQLite, the smoke preset's tiny-bert and data; interrupted in stage 2
and resumed."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from search_spaces.contract import ATTEMPT_TAG, STAGE_TAG
from search_spaces.flags import degenerate_reason
from search_spaces.reports import loss_label
from search_spaces.reports.notes import STAGES
from search_spaces.resolve import resolve_spec
from search_spaces.spec import expand_losses
from tests.trainables.test_sweep import DRIVER, environment, runs, steps_logged, tracking, wait_for

LEARNING_RATES = [1.0e-4, 1.0e-3]
# The smoke preset's losses, as the tables label them.
LOSSES = {loss_label(loss) for loss in expand_losses(resolve_spec({"extends": "smoke"}))}


@pytest.mark.e2e
@pytest.mark.data
def test_a_driver_interrupted_in_stage_two_resumes_it_without_rerunning_stage_one(
    tmp_path: Path, short_home: Path, datasets_dir: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    tune = {"learning_rate": LEARNING_RATES, "trials_per_loss": 2, "holdout": 0.1}
    spec.write_text(yaml.safe_dump({"extends": "smoke", "seeds": [0, 1], "tune": tune}))
    env = environment(short_home, datasets_dir)
    client = tracking(short_home)
    command = [*DRIVER, str(spec), "--sweep-id", "tuned", "--num-cpus", "2"]
    driver = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def final_trial_done() -> bool:
        return any(
            r.info.status == "FINISHED" and r.data.tags.get(STAGE_TAG) == "final"
            for r in runs(client, "tuned", "trial")
        )

    wait_for(final_trial_done, driver, timeout=900)
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 130, err[-3000:]
    before = {
        r.info.run_id: steps_logged(client, r.info.run_id)
        for r in runs(client, "tuned", "trial")
        if r.info.status == "FINISHED"
    }
    assert len(before) < 8

    resumed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "stage 1 done, read back from" in resumed.stderr
    trials = runs(client, "tuned", "trial")
    tune_runs = [r for r in trials if r.data.tags[STAGE_TAG] == "tune"]
    final = [r for r in trials if r.data.tags[STAGE_TAG] == "final"]
    assert len(tune_runs) == 4 and len(final) == 4  # nothing lost, nothing repeated
    assert all(r.info.status == "FINISHED" for r in trials)
    tried = Counter(
        (r.data.tags["dicesweep.loss_label"], float(r.data.params["tuned.learning_rate"]))
        for r in tune_runs
    )
    assert tried == Counter({(loss, lr): 1 for loss in LOSSES for lr in LEARNING_RATES})
    for run in trials:
        if run.info.run_id in before:  # finished before the interrupt: untouched
            assert steps_logged(client, run.info.run_id) == before[run.info.run_id]
            assert run.data.tags[ATTEMPT_TAG] == "1"
    assert {
        (r.data.tags["dicesweep.loss_label"], r.data.tags["dicesweep.seed"]) for r in final
    } == {(loss, seed) for loss in LOSSES for seed in ("0", "1")}
    (parent,) = runs(client, "tuned", "sweep")
    chosen = yaml.safe_load(parent.data.tags["dicesweep.tuned"])
    for loss in LOSSES:  # the best of its trials that are not constant (of all if none)
        tried_runs = [r for r in tune_runs if r.data.tags["dicesweep.loss_label"] == loss]
        learned = [r for r in tried_runs if degenerate_reason(r.data.metrics) is None]
        scores = {
            float(r.data.params["tuned.learning_rate"]): r.data.metrics["eval_f1"]
            for r in learned or tried_runs
        }
        best = chosen[loss]["learning_rate"]
        assert scores[best] == max(scores.values()), (loss, scores, best)
        assert {
            float(r.data.params["training.learning_rate"])
            for r in final
            if r.data.tags["dicesweep.loss_label"] == loss
        } == {best}
    assert parent.info.status == "FINISHED" and parent.data.tags[STAGE_TAG] == "final"
    assert f"Tuned per loss ({STAGES})" in resumed.stdout
