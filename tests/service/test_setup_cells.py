"""A merged table never averages trials of different setups: two sweeps of one loss,
seeds and data set that differ in formulation, epochs or model give two cells, each
over its own seeds, and the table names the setting that split them (through the API
and ``dicesweep grid``, over MLflow runs with the driver's setup params)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service import cli
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

SEEDS = (0, 1, 2)
# Two set-ups of ce on CoNLL-2003 that differ in one setting, the field that names it
# and each side's label in the table.
DIFFERENCES = {
    "formulation": ({}, {"formulation": "mrc"}, ("tagger", "mrc")),
    "epochs": ({"training": {"epochs": 3}}, {"training": {"epochs": 6}}, ("3", "6")),
    "model": ({}, {"model": "/opt/models/minilm-l6"}, ("tiny-bert", "minilm-l6")),
}


def two_sweeps(
    session: Session, owner: Owner, tracking: MlflowClient, difference: str
) -> list[str]:
    """Two sweeps of ``ce`` on conll2003 at seeds 0-2, apart in ``difference`` alone;
    the second scores 10 points more at every seed."""
    first, second, _ = DIFFERENCES[difference]
    ids = []
    for offset, config in ((0.0, first), (10.0, second)):
        sweep = create_sweep(session, owner.id, make_draft(f"{difference}-{offset:g}")).sweep
        trials = [
            FakeTrial({"name": "ce"}, seed, "conll2003", eval_f1=50 + offset + seed, config=config)
            for seed in SEEDS
        ]
        write_trials(tracking, sweep.id, trials)
        ids.append(sweep.id)
    return ids


def assert_split(table: dict[str, Any], difference: str) -> None:
    """Two cells, ``ce / <side>``, each the mean of its own three seeds; the split named."""
    labels = DIFFERENCES[difference][2]
    assert table["rows_key"] == f"loss / {difference}"
    cells = {cell["row"]: cell for cell in table["cells"]}
    assert set(cells) == {f"ce / {label}" for label in labels}
    for label, mean in zip(labels, (51.0, 61.0), strict=True):
        cell = cells[f"ce / {label}"]
        assert (cell["mean"], cell["seeds"], cell["count"]) == (mean, 3, 3)
    # The setting named first; settings that follow from it (an MRC-NER model's loss
    # positions) named too, though the label needs only the first.
    assert next(iter(table["split_by"])) == difference
    assert sorted(table["split_by"][difference]) == sorted(labels)
    (entry,) = [e for e in table["setup"] if e["field"] == difference]
    assert {e["where"] for e in entry["values"]} == {f"ce / {label}" for label in labels}


@pytest.mark.parametrize("difference", sorted(DIFFERENCES))
def test_the_api_splits_cells_whose_setups_differ(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient, difference: str
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    ids = two_sweeps(session, alice, tracking, difference)
    merged = api.client.get("/v1/grid", params={"ids": ids}, headers=headers)
    assert merged.status_code == 200, merged.text
    assert_split(merged.json(), difference)
    text = api.client.get("/v1/grid", params={"ids": ids, "format": "markdown"}, headers=headers)
    assert f"Cells split by {difference} (" in text.text
    assert "Setup (from the trials' resolved specs):" in text.text


@pytest.mark.parametrize("difference", sorted(DIFFERENCES))
def test_dicesweep_grid_splits_them_too(
    session: Session,
    alice: Owner,
    tracking: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    difference: str,
) -> None:
    ids = two_sweeps(session, alice, tracking, difference)
    monkeypatch.setenv("DICESWEEP_MLFLOW_TRACKING_URI", tracking.tracking_uri)
    with pytest.raises(SystemExit) as done:
        cli.main(["grid", *ids, "--json"])
    assert done.value.code == 0
    assert_split(json.loads(capsys.readouterr().out), difference)
