"""A sweep's trials and its table, read from MLflow runs written as the driver writes them."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import pytest
from mlflow.tracking import MlflowClient
from scipy import stats
from sqlalchemy.orm import Session

from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TRIALS = [
    FakeTrial({"name": "ce"}, seed=0, eval_f1=80.0),
    FakeTrial({"name": "ce"}, seed=1, eval_f1=82.0),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, eval_f1=84.0),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=1, eval_f1=86.0),
    # Diverged after an evaluation at F1 0.0: failed, with its reason, never a cell.
    FakeTrial(
        {"name": "focal", "gamma": 2},
        seed=0,
        status="FAILED",
        eval_f1=0.0,
        reason="diverged at step 7 (training loss nan)",
    ),
]
DIVERGED = "focal(gamma=2) seed=0 on mrpc original: diverged at step 7 (training loss nan)"


@dataclass(frozen=True)
class Tracked:
    """A sweep of alice's whose trials are in MLflow."""

    path: str
    headers: dict[str, str]
    run_ids: list[str]


@pytest.fixture
def tracked(session: Session, alice: Owner, tracking: MlflowClient) -> Tracked:
    sweep = create_sweep(session, alice.id, make_draft(trials=6)).sweep
    run_ids = write_trials(tracking, sweep.id, TRIALS)
    headers = bearer(create_api_key(session, alice.id).plain_key)
    return Tracked(f"/v1/sweeps/{sweep.id}", headers, run_ids)


def test_trials_come_in_pages_in_a_stable_order(api: Api, tracked: Tracked) -> None:
    first = api.client.get(f"{tracked.path}/trials?limit=3", headers=tracked.headers).json()
    assert first["count"] == 5
    token = first["next_page_token"]
    rest = api.client.get(
        f"{tracked.path}/trials", params={"page_token": token}, headers=tracked.headers
    ).json()
    assert rest["next_page_token"] is None
    trials = first["data"] + rest["data"]
    assert [(t["loss"], t["seed"]) for t in trials] == [
        ("ce", 0),
        ("ce", 1),
        ("dsc(alpha=0.1)", 0),
        ("dsc(alpha=0.1)", 1),
        ("focal(gamma=2)", 0),
    ]
    dsc = trials[2]
    assert dsc["run_id"] == tracked.run_ids[2]
    assert (dsc["status"], dsc["loss_name"], dsc["dataset"], dsc["variant"]) == (
        "FINISHED",
        "dsc",
        "mrpc",
        "original",
    )
    assert dsc["params"] == {"alpha": 0.1}
    assert dsc["metrics"] == {"eval_f1": 84.0}
    assert dsc["failure_reason"] is None
    assert trials[4]["status"] == "FAILED"
    assert trials[4]["failure_reason"] == "diverged at step 7 (training loss nan)"


def test_a_trial_shows_the_optimiser_steps_it_ran_and_why_it_stopped(
    api: Api, tracked: Tracked, tracking: MlflowClient
) -> None:
    tracking.log_metric(tracked.run_ids[2], "optimizer_steps", 460)
    tracking.set_tag(tracked.run_ids[2], "dicesweep.stop_reason", "early_stopping")
    trials = api.client.get(f"{tracked.path}/trials", headers=tracked.headers).json()["data"]
    dsc = trials[2]
    assert dsc["metrics"] == {"eval_f1": 84.0, "optimizer_steps": 460.0}
    assert dsc["stop_reason"] == "early_stopping"
    assert trials[0]["stop_reason"] is None  # written before steps were recorded


def test_trials_of_a_sweep_without_runs_are_an_empty_page(api: Api) -> None:
    created = api.client.post("/v1/sweeps", json={"extends": "smoke"}).json()
    page = api.client.get(f"/v1/sweeps/{created['id']}/trials").json()
    assert page == {"data": [], "count": 0, "next_page_token": None}
    bad = api.client.get(f"/v1/sweeps/{created['id']}/trials", params={"page_token": "x"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"


def test_the_grid_in_json_has_the_paper_layout_and_deltas_against_ce(
    api: Api, tracked: Tracked
) -> None:
    response = api.client.get(f"{tracked.path}/grid", headers=tracked.headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    table = response.json()
    assert (table["rows_key"], table["cols_key"], table["baseline"]) == ("loss", "dataset", "ce")
    assert table["rows"] == ["ce", "dsc(alpha=0.1)"]  # the failed focal trial has no value
    assert table["failed"] == [
        {
            "loss": "focal(gamma=2)",
            "dataset": "mrpc",
            "variant": "original",
            "seed": 0,
            "reason": "diverged at step 7 (training loss nan)",
        }
    ]
    cells = {cell["row"]: cell for cell in table["cells"]}
    assert cells["dsc(alpha=0.1)"]["mean"] == pytest.approx(85.0)
    assert cells["dsc(alpha=0.1)"]["delta"] == pytest.approx(4.0)
    assert cells["ce"]["count"] == 2


@pytest.mark.parametrize(
    ("fmt", "media_type", "marker"),
    [
        ("csv", "text/csv", b"loss,dataset,mean,std,count,seeds,delta"),
        ("markdown", "text/markdown", b"| loss "),
        ("latex", "application/x-latex", b"\\toprule"),
        ("png", "image/png", PNG_SIGNATURE),
    ],
)
def test_the_grid_renders_in_each_format(
    api: Api, tracked: Tracked, fmt: str, media_type: str, marker: bytes
) -> None:
    response = api.client.get(f"{tracked.path}/grid?format={fmt}", headers=tracked.headers)
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == media_type
    assert marker in response.content[:200]
    if fmt == "png":
        assert response.content.startswith(PNG_SIGNATURE)
    if fmt in ("markdown", "latex"):  # the diverged trial is listed under the table
        assert DIVERGED in response.text


def test_the_grid_takes_other_rows_and_columns(api: Api, tracked: Tracked) -> None:
    params = {"rows": "seed", "cols": "loss", "format": "csv"}
    response = api.client.get(f"{tracked.path}/grid", params=params, headers=tracked.headers)
    lines = list(csv.DictReader(io.StringIO(response.text)))
    assert {(line["seed"], line["loss"]) for line in lines} == {
        (seed, loss) for seed in ("0", "1") for loss in ("ce", "dsc(alpha=0.1)")
    }
    assert all(line["delta"] == "" for line in lines)  # no baseline unless rows are losses


def test_unknown_grid_columns_are_refused_naming_the_valid_ones(api: Api, tracked: Tracked) -> None:
    params = {"rows": "colour", "metric": "eval_bleu"}
    refused = api.client.get(f"{tracked.path}/grid", params=params, headers=tracked.headers)
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_request"
    problems = {tuple(item["loc"]): item["msg"] for item in refused.json()["detail"]}
    assert problems["query", "metric"] == "unknown metric 'eval_bleu'; valid: eval_f1"
    refusal = problems["query", "rows"]
    valid = refusal.removeprefix("unknown column 'colour'; valid: ").split(", ")
    assert valid[:6] == ["dataset", "loss", "loss_name", "param_alpha", "param_gamma", "seed"]
    assert valid[-1] == "variant" and valid == sorted(valid)
    # Every setup field is a column to table by (rows=setup_formulation).
    assert {"setup_formulation", "setup_model", "setup_loss_scope"} <= set(valid)


def test_a_grid_without_finished_trials_is_a_conflict(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    sweep = create_sweep(session, alice.id, make_draft()).sweep
    untracked = api.client.get(f"/v1/sweeps/{sweep.id}/grid", headers=headers)
    assert untracked.status_code == 409
    assert untracked.json() == {
        "detail": f"sweep {sweep.id!r} has no finished trials yet",
        "code": "no_results",
    }
    write_trials(tracking, sweep.id, [FakeTrial({"name": "ce"}, status="RUNNING", eval_f1=50.0)])
    running = api.client.get(f"/v1/sweeps/{sweep.id}/grid", headers=headers)
    assert running.status_code == 409
    assert running.json()["detail"] == f"sweep {sweep.id!r} has no finished trials yet"


def test_several_sweeps_merge_into_one_table(
    api: Api, session: Session, alice: Owner, bob: Owner, tracking: MlflowClient
) -> None:
    # Table 10 as one sweep per data set: alpha x data set, a line per data set.
    headers = bearer(create_api_key(session, alice.id).plain_key)
    ids = []
    for dataset, base in (("conll2003", 80.0), ("squad_v1", 70.0)):
        sweep = create_sweep(session, alice.id, make_draft(f"table10-{dataset}")).sweep
        trials = [
            FakeTrial(
                {"name": "tversky", "alpha": alpha, "beta": round(1 - alpha, 1)},
                seed=seed,
                dataset=dataset,
                eval_f1=base + 10 * alpha + seed,
            )
            for alpha in (0.1, 0.9)
            for seed in (0, 1)
        ]
        write_trials(tracking, sweep.id, trials)
        ids.append(sweep.id)
    merged = api.client.get("/v1/grid", params={"ids": ids}, headers=headers)
    assert merged.status_code == 200, merged.text
    table = merged.json()
    assert (table["rows_key"], table["cols_key"]) == ("param_alpha", "dataset")
    assert table["title"] == "table10-conll2003 + table10-squad_v1"
    cells = {(cell["row"], cell["column"]): cell["mean"] for cell in table["cells"]}
    assert cells == pytest.approx(
        {
            (0.1, "conll2003"): 81.5,
            (0.9, "conll2003"): 89.5,
            (0.1, "squad_v1"): 71.5,
            (0.9, "squad_v1"): 79.5,
        }
    )
    # One comma-separated value works too; rows=sweep compares the sweeps themselves, each
    # sweep's two losses on rows of their own (never averaged as if seeds).
    by_sweep = api.client.get(
        "/v1/grid", params={"ids": ",".join(ids), "rows": "sweep", "format": "csv"}, headers=headers
    )
    lines = list(csv.DictReader(io.StringIO(by_sweep.text)))
    assert {tuple(line["sweep / loss"].split(" / ")) for line in lines if line["mean"]} == {
        (sweep_id, f"tversky(alpha={alpha},beta={round(1 - alpha, 1)})")
        for sweep_id in ids
        for alpha in (0.1, 0.9)
    }
    assert {float(line["seeds"]) for line in lines if line["mean"]} == {2.0}
    latex = api.client.get("/v1/grid", params={"ids": ids, "format": "latex"}, headers=headers)
    assert "\\label{tab:table10-conll2003-table10-squad-v1}" in latex.text
    png = api.client.get("/v1/grid", params={"ids": ids, "format": "png"}, headers=headers)
    assert png.content.startswith(PNG_SIGNATURE)
    # Another owner's sweep, or none, is named; too many ids are refused.
    theirs = create_sweep(session, bob.id, make_draft("bobs")).sweep
    hidden = api.client.get("/v1/grid", params={"ids": [ids[0], theirs.id]}, headers=headers)
    assert hidden.status_code == 404 and hidden.json()["detail"] == f"no sweep {theirs.id!r}"
    many = api.client.get(
        "/v1/grid", params={"ids": [f"sw-{i}" for i in range(21)]}, headers=headers
    )
    assert many.status_code == 422
    assert many.json()["detail"][0]["msg"] == "give 1 to 20 sweep ids; got 21"


def test_the_grid_marks_significant_differences_from_ce(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    sweep = create_sweep(session, alice.id, make_draft("marks")).sweep
    # dsc - ce by seed: 5, 4, 6: t = 5√3 with 2 degrees of freedom, p = 0.0131 (†).
    f1 = {"ce": (70.0, 71.0, 72.0), "dsc": (75.0, 75.0, 78.0)}
    trials = [
        FakeTrial(
            {"name": name} if name == "ce" else {"name": name, "alpha": 0.1},
            seed=seed,
            eval_f1=value,
        )
        for name, values in f1.items()
        for seed, value in enumerate(values)
    ]
    write_trials(tracking, sweep.id, trials)
    text = api.client.get(f"/v1/sweeps/{sweep.id}/grid?format=markdown", headers=headers).text
    assert "**76.00 ± 1.73 (+5.00)**†" in text
    cells = api.client.get(f"/v1/sweeps/{sweep.id}/grid", headers=headers).json()["cells"]
    assert {cell["row"]: cell["p_value"] for cell in cells}["dsc(alpha=0.1)"] == pytest.approx(
        2 * stats.t.sf(5 * math.sqrt(3), df=2)
    )


def test_a_merged_table_names_the_sweep_of_each_listed_trial(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    # The same loss, seed and data set in two sweeps: only the sweep tells them apart.
    headers = bearer(create_api_key(session, alice.id).plain_key)
    ids = []
    for name in ("first", "second"):
        sweep = create_sweep(session, alice.id, make_draft(name)).sweep
        trials = [
            FakeTrial({"name": "ce"}, eval_f1=80.0),
            FakeTrial({"name": "dice"}, status="FAILED", reason=f"diverged in {name}"),
        ]
        write_trials(tracking, sweep.id, trials)
        ids.append(sweep.id)
    merged = api.client.get("/v1/grid", params={"ids": ids}, headers=headers)
    assert merged.status_code == 200, merged.text
    failed = {entry["sweep"]: entry["reason"] for entry in merged.json()["failed"]}
    assert failed == {ids[0]: "diverged in first", ids[1]: "diverged in second"}
    text = api.client.get("/v1/grid", params={"ids": ids, "format": "markdown"}, headers=headers)
    assert f"- dice seed=0 on mrpc original in sweep {ids[1]}: diverged in second" in text.text
    alone = api.client.get(
        f"/v1/sweeps/{ids[0]}/grid", params={"format": "markdown"}, headers=headers
    )
    assert "- dice seed=0 on mrpc original: diverged in first" in alone.text
