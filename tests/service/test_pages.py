"""The sweep pages over the real store and an MLflow store holding trial runs as the
driver writes them: what they show, who may see them, the sign-in cookie, and the
API docs served with no internet."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from search_spaces.contract import STAGE_TAG
from search_spaces.resolve import resolve_submission
from sweep_service.api.auth import KEY_COOKIE
from sweep_service.progress import read_progress
from sweep_service.results import trial_rows
from sweep_service.store import (
    Owner,
    SweepDraft,
    SweepStatus,
    TrialProgress,
    create_api_key,
    create_sweep,
    record_progress,
    transition_sweep,
)
from tests.service.api_fixtures import (
    Api,
    FakeTrial,
    bearer,
    experiment_id,
    write_parent,
    write_trials,
)
from tests.service.factories import make_draft

TRIALS = [
    FakeTrial({"name": "ce"}, seed=0, eval_f1=80.0),
    FakeTrial({"name": "ce"}, seed=1, eval_f1=82.0),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, eval_f1=84.0),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=1, eval_f1=87.0),
    FakeTrial(
        {"name": "focal", "gamma": 2},
        seed=0,
        status="FAILED",
        reason="diverged at step 7 (training loss nan)",
    ),
    FakeTrial({"name": "focal", "gamma": 2}, seed=1, status="RUNNING", eval_f1=61.5),
]


def _text(html: str) -> str:
    """The page's text with tags dropped and white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture
def running_sweep(session: Session, alice: Owner, tracking: MlflowClient) -> tuple[str, list[str]]:
    """A running sweep of alice's: 4 trials finished, 1 failed, 1 running at epoch 2."""
    draft = make_draft("table8-mrpc", trials=8)
    sweep = create_sweep(session, alice.id, draft).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.RUNNING)
    parent = write_parent(tracking, sweep.id)
    run_ids = write_trials(tracking, sweep.id, TRIALS)
    tracking.log_metric(run_ids[-1], "epoch", 2.0)
    tracking.log_metric(run_ids[-1], "optimizer_steps", 30)
    # dsc seed=1 stopped early after 460 optimiser steps, as the driver tags it.
    tracking.log_metric(run_ids[3], "optimizer_steps", 460)
    tracking.set_tag(run_ids[3], "dicesweep.stop_reason", "early_stopping")
    progress = TrialProgress(
        running=1,
        done=4,
        failed=1,
        mlflow_experiment_id=experiment_id(tracking),
        mlflow_parent_run_id=parent,
    )
    record_progress(session, sweep.id, progress)
    return sweep.id, run_ids


@pytest.fixture
def signed_in(api: Api, session: Session, alice: Owner) -> Api:
    """``api`` whose browser holds alice's key in the sign-in cookie."""
    api.client.cookies.set(KEY_COOKIE, create_api_key(session, alice.id).plain_key)
    return api


def test_on_loopback_without_keys_the_pages_are_open(api: Api) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"})
    assert created.status_code == 201
    page = api.client.get("/")
    assert page.status_code == 200 and "smoke" in _text(page.text)
    sweep = api.client.get(f"/sweeps/{created.json()['id']}")
    assert sweep.status_code == 200 and "pending" in _text(sweep.text)
    # Not started yet: its grid's trials are listed as pending.
    assert "ce seed=0 ud_en_ewt_sample/original pending" in _text(sweep.text)


def test_the_list_page_shows_each_sweep_with_its_progress(
    signed_in: Api, running_sweep: tuple[str, list[str]]
) -> None:
    api, (sweep_id, _) = signed_in, running_sweep
    answer = api.client.get("/")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    text = _text(answer.text)
    assert "table8-mrpc" in text
    assert f'href="/sweeps/{sweep_id}"' in answer.text
    assert "running" in text
    assert "5/8 trials (62%): 4 done, 1 running, 1 failed" in text
    live = api.client.get("/live/sweeps")
    assert "5/8 trials" in _text(live.text) and "<html" not in live.text


def test_a_running_sweep_page_shows_trials_table_and_links(
    signed_in: Api, running_sweep: tuple[str, list[str]]
) -> None:
    api, (sweep_id, run_ids) = signed_in, running_sweep
    answer = api.client.get(f"/sweeps/{sweep_id}")
    assert answer.status_code == 200
    html, text = answer.text, _text(answer.text)
    # The running trial with its epoch, optimiser steps and latest metric.
    assert "focal(gamma=2) seed=1 mrpc/original 2.0 30 61.50" in text
    # A finished trial with its steps and why it stopped; the steps under the table.
    assert "dsc(alpha=0.1) seed=1 mrpc/original finished 460 early stopping 87.00" in text
    assert "Optimiser steps per trial (min/median/max): dsc(alpha=0.1) 460." in text
    # The table: mean ± std over seeds, the delta against ce; dsc's mean is the best.
    assert "81.00 ± 1.41" in text
    assert "85.50 ± 2.12 (+4.50)" in text
    assert 'class="grid' in html
    # The failed trial and its reason; the plot of the table.
    assert "diverged at step 7 (training loss nan)" in text
    assert f"/v1/sweeps/{sweep_id}/grid?format=png" in html
    # Links into the MLflow UI: http(s), the trial's own run.
    links = re.findall(r'href="([^"]+/runs/[^"]+)"', html)
    assert links and all(link.startswith("http://127.0.0.1:5000/#/experiments/") for link in links)
    assert any(f"/runs/{run_ids[2]}?workflowType=machine_learning" in link for link in links)
    # Still running: the live part is not final, so the page keeps refreshing.
    assert 'data-live="/sweeps/' in html
    assert "data-final" not in api.client.get(f"/sweeps/{sweep_id}/live").text
    assert "spec" in text.lower() and "table8-mrpc" in text


def test_the_links_follow_the_ui_without_a_restart(
    signed_in: Api, running_sweep: tuple[str, list[str]]
) -> None:
    # `dicesweep ui --port 5731` writes its address under the home; the running
    # service's next page links there (DICESWEEP_MLFLOW_UI_URL unset).
    api, (sweep_id, _) = signed_in, running_sweep
    before = api.client.get(f"/sweeps/{sweep_id}").text
    assert 'href="http://127.0.0.1:5000/#/experiments/' in before
    api.settings.home.mkdir(parents=True, exist_ok=True)
    (api.settings.home / "mlflow-ui.url").write_text("http://127.0.0.1:5731\n")
    after = api.client.get(f"/sweeps/{sweep_id}").text
    assert 'href="http://127.0.0.1:5000/' not in after
    assert 'href="http://127.0.0.1:5731/#/experiments/' in after
    links = api.client.get(f"/v1/sweeps/{sweep_id}").json()["links"]
    assert links["mlflow_run"].startswith("http://127.0.0.1:5731/#/experiments/")


def test_a_finished_sweep_stops_refreshing(
    signed_in: Api, session: Session, running_sweep: tuple[str, list[str]]
) -> None:
    api, (sweep_id, _) = signed_in, running_sweep
    transition_sweep(session, sweep_id, SweepStatus.SUCCEEDED)
    # Ended, but its trials not yet read since: the page follows it a little longer,
    # until what MLflow holds after the end (runs closed, the last metrics) is shown.
    live = api.client.get(f"/sweeps/{sweep_id}/live").text
    assert "succeeded" in _text(live)
    assert "data-final" not in live
    record_progress(session, sweep_id, TrialProgress(done=4, failed=1))
    live = api.client.get(f"/sweeps/{sweep_id}/live").text
    assert 'data-final="true"' in live


def test_a_cancelled_sweep_page_says_so_and_lists_what_never_ran(
    signed_in: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    # 2 losses x 3 seeds; cancelled while its first two trials ran: MLflow holds them KILLED.
    spec = {
        "name": "cancel-me",
        "task": {"dataset": "mrpc"},
        "model": "tiny-bert",
        "search_space": {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": 0.1}]},
        "seeds": [0, 1, 2],
        "resources": {"gpus_per_trial": 0},
    }
    api = signed_in
    draft = SweepDraft.from_spec(spec, resolve_submission(spec))
    sweep = create_sweep(session, alice.id, draft).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.RUNNING)
    # ce reported a mid-run eval_f1 before it was killed: not a score.
    killed = [FakeTrial({"name": "ce"}, eval_f1=42.44), FakeTrial({"name": "dsc", "alpha": 0.1})]
    write_trials(tracking, sweep.id, [replace(trial, status="KILLED") for trial in killed])
    cancel = api.client.post(f"/v1/sweeps/{sweep.id}/cancel")  # the cookie cannot cancel
    assert cancel.status_code == 401
    headers = bearer(create_api_key(session, alice.id).plain_key)
    assert api.client.post(f"/v1/sweeps/{sweep.id}/cancel", headers=headers).status_code == 200
    transition_sweep(  # as the reconciler does once the job has stopped
        session,
        sweep.id,
        SweepStatus.CANCELLED,
        message="cancelled on request: its running trials were stopped",
    )
    html = api.client.get(f"/sweeps/{sweep.id}").text
    text = _text(html)
    assert "cancelled cancelled on request: its running trials were stopped" in text
    assert "cancel requested" not in text
    assert "The table appears when the first trial finishes" not in text
    assert "No table: no trial finished before the sweep ended (cancelled)." in text
    assert "2/6 trials (33%): 0 done, 0 running, 0 failed, 2 stopped, 4 not started" in text
    assert 'class="failed" style="width: 0.0%"' in html  # nothing red in the bar
    assert "stopped by the cancel" in text  # the bar's legend
    for seed in (1, 2):
        for loss in ("ce", "dsc(alpha=0.1)"):
            assert f"{loss} seed={seed} mrpc/original not started" in text
    assert html.count('class="run not-started"') == 4
    assert "ce seed=0 mrpc/original killed" in text
    # Followed until its trials are read once after the end, then final.
    assert "data-final" not in api.client.get(f"/sweeps/{sweep.id}/live").text
    record_progress(session, sweep.id, read_progress(tracking, sweep.id))
    assert 'data-final="true"' in api.client.get(f"/sweeps/{sweep.id}/live").text
    # One count everywhere: the API, the list page and the sweep page; no best trial
    # from a killed trial's mid-run metric.
    answer = api.client.get(f"/v1/sweeps/{sweep.id}", headers=headers).json()
    assert answer["trials"] == {"pending": 4, "running": 0, "done": 0, "failed": 0, "stopped": 2}
    assert answer["best_trial"] is None
    counts = "2/6 trials (33%): 0 done, 0 running, 0 failed, 2 stopped, 4 not started"
    listed = _text(api.client.get("/").text)
    assert counts in listed and counts in _text(api.client.get(f"/sweeps/{sweep.id}").text)
    assert "none: no trial finished" in listed and "42.44" not in listed


def test_another_owners_sweep_is_not_shown(
    make_api: object, session: Session, bob: Owner, running_sweep: tuple[str, list[str]]
) -> None:
    sweep_id, _ = running_sweep
    api = make_api()  # type: ignore[operator]
    key = create_api_key(session, bob.id).plain_key
    api.client.cookies.set(KEY_COOKIE, key)
    answer = api.client.get(f"/sweeps/{sweep_id}")
    assert answer.status_code == 404
    assert "No such sweep" in answer.text
    assert "table8-mrpc" not in api.client.get("/").text


def test_a_key_is_asked_for_once_keys_exist_and_kept_for_reads_only(
    api: Api, session: Session, alice: Owner, running_sweep: tuple[str, list[str]]
) -> None:
    sweep_id, _ = running_sweep
    key = create_api_key(session, alice.id).plain_key
    asked = api.client.get(f"/sweeps/{sweep_id}", follow_redirects=False)
    assert asked.status_code == 303
    assert asked.headers["location"] == f"/login?next=%2Fsweeps%2F{sweep_id}"
    wrong = api.client.post("/login", data={"key": "ds_wrong", "next": "/"})
    assert wrong.status_code == 401 and "wrong or revoked" in wrong.text
    signed = api.client.post(
        "/login", data={"key": key, "next": f"/sweeps/{sweep_id}"}, follow_redirects=False
    )
    assert signed.status_code == 303 and signed.headers["location"] == f"/sweeps/{sweep_id}"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert api.client.get(f"/sweeps/{sweep_id}").status_code == 200
    assert api.client.get(f"/v1/sweeps/{sweep_id}").status_code == 200
    # The cookie reads; it never submits or cancels (another site could make a browser).
    assert api.client.post(f"/v1/sweeps/{sweep_id}/cancel").status_code == 401
    assert api.client.post(f"/v1/sweeps/{sweep_id}/cancel", headers=bearer(key)).status_code == 200
    # The form only ever sends the browser to a page of this service.
    away = api.client.post(
        "/login", data={"key": key, "next": "//evil.example/"}, follow_redirects=False
    )
    assert away.headers["location"] == "/"
    out = api.client.post("/logout", follow_redirects=False)
    assert KEY_COOKIE in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]


@pytest.mark.parametrize(
    ("page", "assets"),
    [
        ("/docs", ["swagger-ui-bundle.js", "swagger-ui.css"]),
        ("/redoc", ["redoc.standalone.js"]),
    ],
)
def test_the_api_docs_need_no_internet(api: Api, page: str, assets: list[str]) -> None:
    html = api.client.get(page).text
    assert "cdn" not in html.lower() and "fonts.googleapis" not in html
    for asset in assets:
        url = f"/assets/docs/{asset}"
        assert url in html
        served = api.client.get(url)
        assert served.status_code == 200 and len(served.content) > 100_000
    assert api.client.get("/openapi.json").json()["info"]["title"] == "dicesweep"
    # Both viewers need JavaScript: the title and a line without it say what the page is.
    viewer = "Swagger UI" if page == "/docs" else "ReDoc"
    assert f"<title>dicesweep API reference ({viewer})</title>" in html
    noscript = html.split("<noscript>")[1].split("</noscript>")[0]
    assert f"This is {viewer}, the interactive reference of the dicesweep REST API" in noscript
    assert 'href="/openapi.json"' in noscript


# What MRPC dev's trials report: the no-skill scores and the share of each prediction.
MRPC_DEV = {"eval_baseline_f1": 81.22, "eval_baseline_accuracy": 68.38}
CONSTANT = {**MRPC_DEV, "eval_top_prediction_share": 99.3, "eval_positive_prediction_share": 99.3}
LEARNED = {**MRPC_DEV, "eval_top_prediction_share": 80.0, "eval_positive_prediction_share": 80.0}


def test_the_best_so_far_skips_degenerate_trials_and_says_when_none_learned(
    signed_in: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    """Read from MLflow as the reconciler reads it: the API's best trial, the list page
    and ``dicesweep submit --wait`` (which prints the API's) skip a near-constant
    predictor however high its F1."""
    from sweep_service.progress import read_progress

    api, key = signed_in, create_api_key(session, alice.id).plain_key
    sweeps = []
    for name, trials in (
        (
            "some-learned",
            [
                FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, eval_f1=81.8, metrics=CONSTANT),
                FakeTrial({"name": "ce"}, seed=0, eval_f1=81.5, metrics=LEARNED),
            ],
        ),
        ("none-learned", [FakeTrial({"name": "ce"}, seed=0, eval_f1=81.8, metrics=CONSTANT)]),
    ):
        sweep = create_sweep(session, alice.id, make_draft(name, trials=2)).sweep
        run_ids = write_trials(tracking, sweep.id, trials)
        record_progress(session, sweep.id, read_progress(tracking, sweep.id))
        sweeps.append((sweep.id, run_ids))
    (some, some_runs), (none, _) = sweeps
    best = api.client.get(f"/v1/sweeps/{some}", headers=bearer(key)).json()["best_trial"]
    assert (best["run_id"], best["loss"], best["eval_f1"]) == (some_runs[1], "ce", 81.5)
    assert api.client.get(f"/v1/sweeps/{none}", headers=bearer(key)).json()["best_trial"] is None
    rows = {
        match[0]: _text(match[1])
        for match in re.findall(
            r'href="/sweeps/([^"]+)">.*?</td>(.*?)</tr>', api.client.get("/").text, re.S
        )
    }
    assert "81.50 ce seed=0" in rows[some] and "81.80" not in rows[some]
    assert "none: no trial learned" in rows[none]
    # The trial itself says why, in the API and on the sweep page.
    trials = api.client.get(f"/v1/sweeps/{some}/trials", headers=bearer(key)).json()["data"]
    reasons = {trial["loss"]: trial["degenerate_reason"] for trial in trials}
    assert reasons == {"ce": None, "dsc(alpha=0.1)": "predicts positive for 99.3% of pairs"}
    page = _text(api.client.get(f"/sweeps/{some}").text)
    assert "dsc(alpha=0.1) seed=0 mrpc/original degenerate: predicts positive for 99.3%" in page


def test_a_running_trials_flag_is_provisional_and_a_stop_reason_is_no_error(
    signed_in: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    api = signed_in
    sweep = create_sweep(session, alice.id, make_draft("provisional", trials=2)).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.RUNNING)
    trials = [
        FakeTrial({"name": "ce"}, seed=0, status="RUNNING", eval_f1=81.8, metrics=CONSTANT),
        FakeTrial({"name": "ce"}, seed=1, eval_f1=83.0, metrics=LEARNED),
    ]
    running, finished = write_trials(tracking, sweep.id, trials)
    tracking.log_metric(running, "epoch", 20 / 7)  # step 20 of 7 per epoch
    tracking.set_tag(finished, "dicesweep.stop_reason", "epochs")
    record_progress(session, sweep.id, read_progress(tracking, sweep.id))
    html = api.client.get(f"/sweeps/{sweep.id}").text
    # At its latest evaluation the running trial predicts one class: said, but as
    # provisional (grey, italic), not as the red line of a failure.
    assert (
        '<div class="provisional" title="judged on its latest evaluation; the flag is'
        ' settled when the trial finishes">degenerate so far: predicts positive for 99.3%'
    ) in html
    assert 'class="reason"' not in html
    assert '<div class="stop">epochs</div>' in html
    text = _text(html)
    assert "ce seed=0 mrpc/original 2.9" in text and "2.85714" not in text


def test_a_stage_one_trial_at_a_small_rate_shows_the_rate_it_tried(
    signed_in: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    """The driver logs a stage-1 trial's rate as ``str(3e-05)`` == "3e-05", which YAML
    1.1 reads as text: the page once failed with a 500 on it."""
    api = signed_in
    sweep = create_sweep(session, alice.id, make_draft("small-rate", trials=2)).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.RUNNING)
    trials = [
        FakeTrial({"name": "ce"}, seed=0, eval_f1=81.0),
        FakeTrial({"name": "ce"}, seed=0, eval_f1=84.0),
    ]
    for run_id, rate in zip(write_trials(tracking, sweep.id, trials), (3e-05, 0.0003), strict=True):
        tracking.set_tag(run_id, STAGE_TAG, "tune")
        tracking.log_param(run_id, "tuned.learning_rate", str(rate))
    record_progress(session, sweep.id, read_progress(tracking, sweep.id))
    answer = api.client.get(f"/sweeps/{sweep.id}")
    assert answer.status_code == 200
    text = _text(answer.text)
    assert "ce seed=0 mrpc/original · tune learning_rate=3e-05" in text
    assert "ce seed=0 mrpc/original · tune learning_rate=0.0003" in text
    rows = trial_rows(tracking, sweep.id)
    assert sorted(rows["tuned_learning_rate"]) == [3e-05, 0.0003]


def test_a_trial_the_scheduler_stopped_shows_the_rung_it_reached(
    signed_in: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    """A stage-1 trial halving stopped: the page, the API and the rows say at which
    rung (counted in evaluations, one point of its ``optimizer_steps`` history each)."""
    api = signed_in
    sweep = create_sweep(session, alice.id, make_draft("halved", trials=2)).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    transition_sweep(session, sweep.id, SweepStatus.RUNNING)
    trials = [
        FakeTrial({"name": "ce"}, seed=0, eval_f1=61.0),
        FakeTrial({"name": "ce"}, seed=0, eval_f1=84.0),
    ]
    stopped, kept = write_trials(tracking, sweep.id, trials)
    for run_id, rate, steps, why in (
        (stopped, "0.001", (100, 200, 300), "scheduler"),
        (kept, "0.0001", (100, 200, 300, 400, 500), "epochs"),
    ):
        tracking.set_tag(run_id, STAGE_TAG, "tune")
        tracking.set_tag(run_id, "dicesweep.stop_reason", why)
        tracking.log_param(run_id, "tuned.learning_rate", rate)
        for step in steps:
            tracking.log_metric(run_id, "optimizer_steps", step, step=step)
    record_progress(session, sweep.id, read_progress(tracking, sweep.id))
    html = api.client.get(f"/sweeps/{sweep.id}").text
    assert ">scheduler, rung 3</div>" in html
    assert "the scheduler stopped it at the rung of 3 evaluations" in html
    assert '<div class="stop">epochs</div>' in html
    rows = trial_rows(tracking, sweep.id).set_index("run_id")
    assert rows.loc[stopped, "stop_rung"] == 3
    assert rows.loc[kept, "stop_rung"] != rows.loc[kept, "stop_rung"]  # NaN: not stopped
    answer = api.client.get(f"/v1/sweeps/{sweep.id}/trials").json()["data"]
    assert {trial["run_id"]: trial["stop_rung"] for trial in answer} == {stopped: 3, kept: None}
