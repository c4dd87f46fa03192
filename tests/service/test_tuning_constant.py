"""A loss whose every stage-1 trial was constant: the sweep's tuning state names it
(``sweep_service.progress.tuning_state``), and the API and the sweep page say so."""

from __future__ import annotations

import html
import re

import pandas as pd
from sqlalchemy.orm import Session

from sweep_service.api.auth import KEY_COOKIE
from sweep_service.progress import tuning_state
from sweep_service.store import (
    Owner,
    TrialProgress,
    create_api_key,
    create_sweep,
    record_progress,
)
from tests.service.api_fixtures import Api, bearer
from tests.service.factories import make_draft

CONSTANT = {"eval_top_prediction_share": 100.0, "eval_positive_prediction_share": 0.0}
LEARNED = {"eval_top_prediction_share": 80.0, "eval_positive_prediction_share": 20.0}
SPLIT = {"eval_baseline_f1": 49.07, "eval_baseline_accuracy": 67.49}


def trial(loss: str, stage: str, lr: float, f1: float, shares: dict[str, float]) -> dict:
    return {"loss": loss, "stage": stage, "tuned_learning_rate": lr, "status": "FINISHED"} | {
        "eval_f1": f1,
        **SPLIT,
        **shares,
    }


def test_a_loss_chosen_among_constant_trials_is_named_from_stage_two_on() -> None:
    stage_one = [
        trial("ce", "tune", 1e-4, 60.0, LEARNED),
        trial("ce", "tune", 3e-4, 49.07, CONSTANT),
        trial("dice", "tune", 1e-4, 0.0, CONSTANT),
        trial("dice", "tune", 3e-4, 10.0, CONSTANT),
    ]
    running = tuning_state(pd.DataFrame(stage_one))
    assert running == {"stage": "tune", "chosen": {}, "constant": []}  # not chosen yet
    final = [trial("ce", "final", 1e-4, 62.0, LEARNED), trial("dice", "final", 3e-4, 5.0, CONSTANT)]
    state = tuning_state(pd.DataFrame(stage_one + final))
    assert state == {
        "stage": "final",
        "chosen": {"ce": {"learning_rate": 1e-4}, "dice": {"learning_rate": 3e-4}},
        "constant": ["dice"],
    }


def test_the_api_and_the_sweep_page_say_so(api: Api, session: Session, alice: Owner) -> None:
    key = create_api_key(session, alice.id).plain_key
    sweep = create_sweep(session, alice.id, make_draft("tuned", trials=4)).sweep
    tuning = {
        "stage": "final",
        "chosen": {"ce": {"learning_rate": 1e-4}, "dice": {"learning_rate": 3e-4}},
        "constant": ["dice"],
    }
    record_progress(session, sweep.id, TrialProgress(done=2, tuning=tuning))
    shown = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()["tuning"]
    assert shown["constant"] == ["dice"]
    api.client.cookies.set(KEY_COOKIE, key)
    text = html.unescape(re.sub(r"<[^>]+>", " ", api.client.get(f"/sweeps/{sweep.id}").text))
    page = " ".join(text.split())
    assert "stage 2: every seed at each loss's chosen settings, on the whole training file" in page
    assert "Chosen among constant trials dice: every stage-1 trial predicted one thing" in page
    # A sweep stored before the mark reads as none chosen among constant trials.
    old = {"stage": "final", "chosen": {"ce": {"learning_rate": 1e-4}}}
    record_progress(session, sweep.id, TrialProgress(done=2, tuning=old))
    shown = api.client.get(f"/v1/sweeps/{sweep.id}", headers=bearer(key)).json()["tuning"]
    assert shown["constant"] == []
