"""NER as reading comprehension end to end over REST: ``dicesweep serve`` as a process, a
real local Ray head, real MLflow; tiny-bert asked the CoNLL-2003 queries over the
generated CoNLL look-alike (``tests.toydata``: a tiny BERT from random weights learns
it in two epochs, where one epoch of 800 real sentences left it tagging nothing), ce
against dice, to its table and page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mlflow.artifacts
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.service.test_e2e import Service, trial_runs, wait
from tests.toydata import make_toy_datasets

pytestmark = [pytest.mark.e2e]

DICE = {"name": "dice", "smooth": 1, "square": True, "scope": "set"}
SPEC = {
    "name": "mrc-ner-smoke",
    "description": "tiny-bert reads the toy CoNLL set as queries, ce and dice (2 trials)",
    "task": {
        "kind": "ner",
        "dataset": "conll2003",
        "formulation": "mrc",
        # The official heads and dice: a span-match head, the answerability head used
        # at inference, dice over every position.
        "mrc": {"answerable": "train_infer", "dice_positions": "all"},
    },
    "model": "tiny-bert",
    "training": {
        "epochs": 2,
        "learning_rate": 2.0e-3,
        "batch_size": 16,  # 240 sentences x 2 queries (PER, LOC): 30 steps an epoch
        "max_seq_length": 48,
        "warmup_ratio": 0.0,
    },
    "search_space": {"losses": [{"name": "ce"}, DICE]},
    "seeds": [0],
    "resources": {"cpus_per_trial": 1, "gpus_per_trial": 0, "max_concurrent_trials": 2},
}


@pytest.fixture
def service(short_home: Path, tmp_path: Path) -> Iterator[Service]:
    running = Service(short_home, make_toy_datasets(tmp_path / "datasets"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_mrc_ner_sweep_over_rest_to_its_table_and_page(service: Service) -> None:
    created = service.http.post("/v1/sweeps", json=SPEC)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    finished = ("succeeded", "failed")
    wait(lambda: service.sweep(sweep_id)["status"] in finished, 420, "the sweep")
    sweep = service.sweep(sweep_id)
    assert sweep["status"] == "succeeded", sweep["message"][-3000:]
    assert sweep["trials"]["done"] == 2 and sweep["trials"]["failed"] == 0

    runs = trial_runs(service.home, sweep_id)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    for run in runs:  # scored as the tagger is: spans of IOB2 tags, against tagging O
        metrics = run.data.metrics
        assert 0 <= metrics["eval_f1"] <= 100 and metrics["eval_baseline_f1"] == 0.0
        assert metrics["eval_f1"] > 20.0 and metrics["eval_top_prediction_share"] < 99.0
    # The driver ran the formulation the service stored.
    client = MlflowClient(f"sqlite:///{service.home / 'mlflow.db'}")
    parent = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    ran = yaml.safe_load(mlflow.artifacts.load_text(f"{parent.info.artifact_uri}/spec.yaml"))
    assert ran["task"]["formulation"] == "mrc"
    assert ran["task"]["mrc"]["answerable"] == "train_infer" and ran["task"]["mrc"]["span_head"]

    grid = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "json"})
    assert grid.status_code == 200, grid.text
    cells = grid.json()["cells"]
    assert len(cells) == 2 and all(isinstance(cell["mean"], float) for cell in cells), cells
    rows = {cell["row"] for cell in cells}
    assert "ce" in rows and any(row.startswith("dice") for row in rows), rows
    markdown = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "markdown"})
    assert markdown.status_code == 200 and "| ce" in markdown.text
    page = service.http.get(f"/sweeps/{sweep_id}")
    assert page.status_code == 200 and "mrc-ner-smoke" in page.text
    assert "formulation: mrc" in page.text  # the page says which setup the table used
    assert all(row in page.text for row in rows)
