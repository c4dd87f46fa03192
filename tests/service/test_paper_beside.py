"""The paper's Δ beside ours (``?paper=1``, ``dicesweep grid --paper``,
``Client.grid(paper=True)``): where a cell maps onto the paper's tables by data set,
loss and variant, the paper's Δ with its table, how the setups differ, and whether it
lies inside our Δ's 95% interval."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient
from scipy import stats
from sqlalchemy.orm import Session

from search_spaces.paper import paper_delta, paper_figures
from sweep_service import cli
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

DSC = {"name": "dsc", "alpha": 0.01, "smooth": 1, "square": True, "scope": "set"}
CE_F1, DSC_F1 = (80.0, 82.0, 81.0), (81.0, 83.5, 81.6)  # dsc − ce: 1.0, 1.5, 0.6


def mrc_sweep(session: Session, owner: Owner, tracking: MlflowClient) -> str:
    """ce and the official dsc in MRC-NER on CoNLL-2003, seeds 0–2."""
    sweep = create_sweep(session, owner.id, make_draft("mrc")).sweep
    mrc = {"formulation": "mrc"}
    trials = [
        FakeTrial(loss, seed, "conll2003", eval_f1=f1, config=mrc)
        for loss, scores in (({"name": "ce"}, CE_F1), (DSC, DSC_F1))
        for seed, f1 in enumerate(scores)
    ]
    write_trials(tracking, sweep.id, trials)
    return sweep.id


def test_the_figures_are_the_papers_as_printed() -> None:
    tables = {(figure.table, figure.dataset, figure.metric) for figure in paper_figures()}
    assert (4, "CoNLL-2003", "f1") in tables and (6, "SQuAD v1.1", "exact_match") in tables
    figure, delta = paper_delta("conll2003", "dsc") or pytest.fail("no Table 4 cell")
    assert (figure.table, delta, figure.scores["ce"]) == (4, 0.29, 93.04)
    assert paper_delta("mrpc", "focal", "-negative")[1] == 1.06  # Table 8, QQP's stand-in
    assert paper_delta("squad_v1", "dsc", metric="exact_match")[1] == pytest.approx(1.24)
    assert paper_delta("conll2003", "wce") is None  # the paper has no weighted CE row


def test_the_api_sets_the_papers_delta_beside_ours(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    sweep_id = mrc_sweep(session, alice, tracking)
    plain = api.client.get(f"/v1/sweeps/{sweep_id}/grid", headers=headers).json()
    assert "paper" not in plain
    table = api.client.get(
        f"/v1/sweeps/{sweep_id}/grid", params={"paper": "1"}, headers=headers
    ).json()
    (entry,) = table["paper"]
    differences = [d - c for d, c in zip(DSC_F1, CE_F1, strict=True)]
    low, high = stats.ttest_rel(DSC_F1, CE_F1).confidence_interval()
    assert entry["row"].startswith("dsc(") and entry["column"] == "conll2003"
    assert entry["ours"] == pytest.approx(sum(differences) / 3)
    assert entry["ci"] == pytest.approx([low, high])
    assert entry["paper"] == 0.29 and entry["inside"] == bool(low <= 0.29 <= high)
    assert entry["source"] == "Table 4, BERT-MRC on CoNLL-2003 (test)"
    assert entry["differs"] == ["model tiny-bert for BERT-MRC", "scored on dev for test"]
    markdown = api.client.get(
        "/v1/grid", params={"ids": sweep_id, "paper": "1", "format": "markdown"}, headers=headers
    ).text
    assert "The paper's Δ beside ours" in markdown
    assert "paper +0.29 (Table 4, BERT-MRC on CoNLL-2003 (test))" in markdown


def test_a_tagger_is_told_apart_from_the_papers_mrc_ner(
    session: Session,
    alice: Owner,
    tracking: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sweep = create_sweep(session, alice.id, make_draft("tagger")).sweep
    trials = [
        FakeTrial(loss, seed, "conll2003", eval_f1=f1)
        for loss, scores in (({"name": "ce"}, CE_F1), ({"name": "focal"}, DSC_F1))
        for seed, f1 in enumerate(scores)
    ]
    write_trials(tracking, sweep.id, trials)
    monkeypatch.setenv("DICESWEEP_MLFLOW_TRACKING_URI", tracking.tracking_uri)
    with pytest.raises(SystemExit) as done:
        cli.main(["grid", sweep.id, "--json", "--paper"])
    assert done.value.code == 0
    (entry,) = json.loads(capsys.readouterr().out)["paper"]
    assert (entry["row"], entry["paper"]) == ("focal", 0.06)
    assert "formulation tagger for mrc" in entry["differs"]
