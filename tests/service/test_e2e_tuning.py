"""A two-stage sweep (``tune``) end to end over REST: ``dicesweep serve`` as a process, a
real local Ray head, real MLflow, tiny-bert on MRPC; the service restarted (its Ray
head and the sweep's driver with it) while stage 2 runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from search_spaces.contract import ATTEMPT_TAG, STAGE_TAG
from search_spaces.datasets import get_dataset
from search_spaces.flags import degenerate_reason
from search_spaces.reports import loss_label
from search_spaces.reports.notes import STAGES
from search_spaces.resolve import resolve_spec
from search_spaces.spec import expand_losses
from tests.service.test_e2e import Service, trial_runs, wait
from trainables.trial_data import DataRequest, read_examples

# Several minutes of fine-tuning and a service restart: run with RUN_SLOW=1.
pytestmark = [pytest.mark.data, pytest.mark.slow]

LEARNING_RATES = [1.0e-4, 1.0e-3]
SPEC = {
    "extends": "smoke",
    "name": "smoke-tune",
    # Pairs: each example is told apart by its texts in the disjointness checks.
    "task": {"kind": "pi", "dataset": "mrpc"},
    "seeds": [0, 1],
    "tune": {"learning_rate": LEARNING_RATES, "trials_per_loss": 2, "holdout": 0.1},
}
# The smoke preset's losses, as the tables label them.
LOSSES = {loss_label(loss) for loss in expand_losses(resolve_spec({"extends": "smoke"}))}


@pytest.fixture
def service(short_home: Path, datasets_dir: Path) -> Iterator[Service]:
    running = Service(short_home, datasets_dir)
    # Started twice, the second time beside the sweep's data: on a machine shared
    # with other work, a start has taken two minutes.
    running.start_timeout_s = 300
    running.start()
    try:
        yield running
    finally:
        running.stop()


def by_stage(runs: list[Any], stage: str) -> list[Any]:
    return [run for run in runs if run.data.tags.get(STAGE_TAG) == stage]


def steps(client: MlflowClient, run_id: str) -> list[int]:
    return [int(m.step) for m in client.get_metric_history(run_id, "eval_f1")]


def examples_of(run: Any, datasets_dir: Path) -> tuple[set[Any], set[Any]]:
    """The pairs a trial trained and was scored on, carved again from its params."""
    params = run.data.params
    request = DataRequest(
        get_dataset(params["dataset"]),
        params["variant"],
        params["model"],
        int(params["training.max_seq_length"]),
        int(params["training.doc_stride"]),
        int(params["training.max_train_examples"]),
        int(params["training.max_eval_examples"]),
        # A stage-2 trial holds nothing out: it trains on the whole training file.
        holdout=float(params["holdout"]) if "holdout" in params else None,
        holdout_seed=int(params.get("holdout_seed", 0)),
        stage=run.data.tags[STAGE_TAG],
    )
    train, scored = read_examples(request, datasets_dir)
    return {(e.text_a, e.text_b) for e in train}, {(e.text_a, e.text_b) for e in scored}


def test_two_stage_sweep_over_rest_resumes_stage_two_after_a_restart(
    service: Service, datasets_dir: Path
) -> None:
    created = service.http.post("/v1/sweeps", json=SPEC)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    # 2 losses × 2 learning rates in stage 1, then 2 losses × 2 seeds.
    assert created.json()["trial_count"] == 8
    stages_seen: set[str] = set()

    def one_final_trial_done() -> bool:
        tuning = service.sweep(sweep_id)["tuning"]
        if tuning:
            stages_seen.add(tuning["stage"])
        runs = by_stage(trial_runs(service.home, sweep_id), "final")
        return any(run.info.status == "FINISHED" for run in runs)

    wait(one_final_trial_done, 900, "a first finished stage-2 trial")
    client = MlflowClient(f"sqlite:///{service.home / 'mlflow.db'}")
    before = {
        run.info.run_id: steps(client, run.info.run_id)
        for run in trial_runs(service.home, sweep_id)
        if run.info.status == "FINISHED"
    }
    service.stop()  # the service, its Ray head and the sweep's driver go down in stage 2
    assert len(before) < 8, "every trial finished before the restart: nothing to resume"
    service.start()
    wait(lambda: service.sweep(sweep_id)["status"] in ("succeeded", "failed"), 900, "the sweep")
    sweep = service.sweep(sweep_id)
    assert sweep["status"] == "succeeded", sweep["message"][-3000:]
    assert sweep["trials"] == {"pending": 0, "running": 0, "done": 8, "failed": 0, "stopped": 0}
    assert "tune" in stages_seen

    runs = trial_runs(service.home, sweep_id)
    tune, final = by_stage(runs, "tune"), by_stage(runs, "final")
    assert len(tune) == 4 and len(final) == 4  # nothing lost, nothing run twice
    assert all(run.info.status == "FINISHED" for run in runs)
    # Equal budgets: every loss tried at every learning rate once, on seed 0.
    tried = Counter(
        (run.data.tags["dicesweep.loss_label"], float(run.data.params["tuned.learning_rate"]))
        for run in tune
    )
    assert tried == Counter({(loss, lr): 1 for loss in LOSSES for lr in LEARNING_RATES})
    assert {run.data.tags["dicesweep.seed"] for run in tune} == {"0"}
    # Stage 1 ran once: read back on the restart, never again.
    for run in tune:
        assert run.data.tags[ATTEMPT_TAG] == "1"
        assert steps(client, run.info.run_id) == before[run.info.run_id]
    for run in final:
        if run.info.run_id in before:  # finished before the restart: untouched
            assert steps(client, run.info.run_id) == before[run.info.run_id]
            assert run.data.tags[ATTEMPT_TAG] == "1"
    assert {
        (run.data.tags["dicesweep.loss_label"], run.data.tags["dicesweep.seed"]) for run in final
    } == {(loss, seed) for loss in LOSSES for seed in ("0", "1")}

    # Stage 2 at each loss's best: the chosen learning rate scored highest in stage 1
    # among its trials that are not constant (among all where every one is).
    chosen = sweep["tuning"]
    assert chosen["stage"] == "final" and set(chosen["chosen"]) == LOSSES
    for loss in LOSSES:
        runs = [run for run in tune if run.data.tags["dicesweep.loss_label"] == loss]
        learned = [run for run in runs if degenerate_reason(run.data.metrics) is None]
        assert (loss in chosen["constant"]) == (not learned)
        scores = {
            float(run.data.params["tuned.learning_rate"]): run.data.metrics["eval_f1"]
            for run in learned or runs
        }
        best = chosen["chosen"][loss]["learning_rate"]
        assert scores[best] == max(scores.values()), (loss, scores, best)
        assert {
            float(run.data.params["training.learning_rate"])
            for run in final
            if run.data.tags["dicesweep.loss_label"] == loss
        } == {best}

    # Nothing chosen on the split it is reported on; stage 2 holds nothing out.
    tune_train, tuning_split = examples_of(tune[0], datasets_dir)
    final_train, dev = examples_of(final[0], datasets_dir)
    assert tuning_split and dev and "holdout" not in final[0].data.params
    assert not tuning_split & tune_train
    assert not tuning_split & dev
    assert final_train - tune_train  # the whole file's cap: not the remainder's

    # The table holds stage 2 only (two seeds a cell), each loss's choice under it.
    grid = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "json"})
    assert grid.status_code == 200, grid.text
    cells = grid.json()["cells"]
    assert {cell["row"] for cell in cells} == LOSSES
    # Both seeds in every cell: in its mean, or counted out of it as constant.
    assert all((cell["count"] or 0) + cell["degenerate"] == 2 for cell in cells), cells
    markdown = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "markdown"})
    assert f"Tuned per loss ({STAGES}): ce: learning_rate=" in markdown.text
    page = service.http.get(f"/sweeps/{sweep_id}")
    assert page.status_code == 200 and "stage 2: every seed" in page.text
