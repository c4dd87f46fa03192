"""Every setup field reaches a trial's row three ways from a real two-stage sweep (the
driver as a process, a real local Ray head, real MLflow on SQLite, tiny-bert on the
packaged UD English EWT sample): the service's rows read back from MLflow, the
per-trial CSV the driver attaches to the parent run, and the table's setup block; and
a stage-1 choice at the lowest rate of its grid is flagged as one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
import yaml

from search_spaces.reports import final_rows, paper_table, to_markdown
from sweep_service.results import trial_rows
from tests.conftest import short_home_folder
from tests.trainables.test_sweep import DRIVER, environment, runs, tracking

SWEEP = "setup-fields"
RATES = [3.0e-3, 0.3]  # the second breaks a tiny encoder: stage 1 chooses the lowest
SPEC = {
    "extends": "smoke",
    "training": {"max_train_examples": 300, "max_eval_examples": 100},
    "tune": {"learning_rate": RATES, "trials_per_loss": 2, "holdout": 0.1},
}
SAMPLE = "ud_en_ewt_sample en_ewt-ud"
# What each field says of the final-stage trials, written from the spec above (the
# smoke preset's tiny-bert, batch 32, length 64, one epoch, ce and dsc(alpha=0.1, set)).
EXPECTED = {
    "kind": {"ce": "pos", "dsc": "pos"},
    "formulation": {"ce": "tagger", "dsc": "tagger"},
    "model": {"ce": "tiny-bert", "dsc": "tiny-bert"},
    "tokenizer": {"ce": "keeps case", "dsc": "keeps case"},
    "train_data": {"ce": f"{SAMPLE}-train.conllu, 300 drawn at random (seed 0)"},
    "eval_data": {"ce": f"{SAMPLE}-dev.conllu, 100 drawn at random (seed 0)"},
    "loss_positions": {"ce": "every word's first sub-token (softmax over tags)"},
    "loss_scope": {"dsc": "one ratio over every token of the batch"},
    "loss_classes": {"dsc": "mean"},
    "loss_square": {"dsc": "linear"},
    "loss_ohem": {"dsc": "off"},
    "epochs": {"ce": "1"},
    "warmup_ratio": {"ce": "0.1"},
    "decay": {"ce": "linear to 0"},
    "batch_size": {"ce": "32"},
    "max_seq_length": {"ce": "64"},
    "early_stopping": {"ce": "off"},
    "evaluations": {"ce": "once an epoch"},
    "weight_decay": {"ce": "0.01"},
    "grad_clip": {"ce": "1"},
    "precision": {"ce": "fp32", "dsc": "fp32"},  # auto on a CPU, as trained
    "tune_grid": {"ce": "learning_rate {0.003, 0.3}"},
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The sweep run once: the service's rows, the driver's trials.csv, the table."""
    folder = tmp_path_factory.mktemp("setup")
    spec = folder / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    with short_home_folder() as home:
        env = environment(home, folder)  # the packaged sample needs no data-sets folder
        command = [*DRIVER, str(spec), "--sweep-id", SWEEP, "--num-cpus", "2"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        client = tracking(home)
        (parent,) = runs(client, SWEEP, "sweep")
        csv = client.download_artifacts(parent.info.run_id, "report/trials.csv", str(folder))
        rows = trial_rows(client, SWEEP)
        text = pd.read_csv(csv, dtype=str)  # as written: every setup field is text
        yield {"rows": rows, "csv": text, "table": paper_table(final_rows(rows))}


def by_loss(frame: pd.DataFrame, column: str) -> dict[str, str]:
    """Each final-stage loss's one value of ``column`` (a loss's trials share it)."""
    final = frame[frame["stage"] == "final"]
    values = final.groupby("loss_name")[column].unique()
    assert all(len(found) == 1 for found in values), values
    return {str(loss): found[0] for loss, found in values.items() if pd.notna(found[0])}


@pytest.mark.e2e
@pytest.mark.parametrize("field", sorted(EXPECTED))
def test_each_setup_field_reaches_the_rows_the_csv_and_the_setup_block(
    swept: dict[str, Any], field: str
) -> None:
    column = f"setup_{field}"
    for frame in (swept["rows"], swept["csv"]):
        found = by_loss(frame, column)
        assert {loss: found.get(loss) for loss in EXPECTED[field]} == EXPECTED[field]
    (entry,) = [e for e in swept["table"].attrs["setup"] if e["field"] == field]
    shown = {entry["value"]} if "value" in entry else {e["value"] for e in entry["values"]}
    assert set(EXPECTED[field].values()) <= shown


@pytest.mark.e2e
def test_a_choice_at_the_lowest_rate_of_its_grid_is_flagged(swept: dict[str, Any]) -> None:
    table = swept["table"]
    assert table.attrs["tuned"] == {
        "ce": {"learning_rate": 3e-3},
        "dsc(alpha=0.1,scope=set)": {"learning_rate": 3e-3},
    }
    edge = "lowest of {0.003, 0.3}"
    assert table.attrs["grid_edges"] == {
        "ce": {"learning_rate": edge},
        "dsc(alpha=0.1,scope=set)": {"learning_rate": edge},
    }
    assert f"ce: learning_rate=0.003 (at the grid's edge: the {edge})" in to_markdown(table)
    stage_one = swept["rows"][swept["rows"]["stage"] == "tune"]
    assert set(stage_one["setup_eval_data"]) == {
        "the tuning split (0.1 of it, drawn with seed 0), 100 drawn at random (seed 0)"
    }
