"""The Python client's DataFrames against the API's JSON they are made of: a sweep's
trials, its table, several sweeps merged, its budget curves (none without stage 1) and
its MLflow runs read with MLflow's own client. The app here is the real one over a
real store and MLflow; a real server and a real sweep are in test_notebook.py."""

from __future__ import annotations

import math
import threading
import time

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from search_spaces.contract import SWEEP_TAG
from sweep_service import Client, Sweep
from sweep_service.client import ClientError
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

TRIALS = [
    FakeTrial({"name": "ce"}, seed=0, eval_f1=80.0, metrics={"optimizer_steps": 63.0}),
    FakeTrial({"name": "ce"}, seed=1, eval_f1=82.0, metrics={"optimizer_steps": 63.0}),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=0, eval_f1=84.0),
    FakeTrial({"name": "dsc", "alpha": 0.1}, seed=1, eval_f1=86.0),
    FakeTrial({"name": "focal", "gamma": 2}, seed=0, status="FAILED", reason="diverged"),
]


@pytest.fixture
def client(api: Api, session: Session, alice: Owner, tracking: MlflowClient) -> Client:
    api.client.headers.update(bearer(create_api_key(session, alice.id).plain_key))
    return Client(http=api.client, tracking_uri=tracking.tracking_uri)


@pytest.fixture
def sweep(client: Client, session: Session, alice: Owner, tracking: MlflowClient) -> Sweep:
    stored = create_sweep(session, alice.id, make_draft(trials=5)).sweep
    write_trials(tracking, stored.id, TRIALS)
    return client.sweep(stored.id)


def test_trials_are_one_typed_row_per_trial_as_the_api_gives_them(
    client: Client, sweep: Sweep
) -> None:
    served = client.request("GET", f"/v1/sweeps/{sweep.id}/trials", params={"limit": 100})
    frame = sweep.trials()
    assert len(frame) == served["count"] == len(TRIALS)
    assert list(frame["run_id"]) == [trial["run_id"] for trial in served["data"]]
    assert frame["seed"].dtype == "int64" and frame["eval_f1"].dtype == "float64"
    assert frame["degenerate"].dtype == bool
    for (_, row), trial in zip(frame.iterrows(), served["data"], strict=True):
        assert (row["loss"], row["status"], row["seed"]) == (
            trial["loss"],
            trial["status"],
            trial["seed"],
        )
        assert row["degenerate"] == (trial["degenerate_reason"] is not None)
        for name, value in trial["metrics"].items():
            assert row[name] == pytest.approx(value)
        for name, value in trial["params"].items():
            assert row[f"param_{name}"] == value
    failed = frame[frame["status"] == "FAILED"]
    assert list(failed["failure_reason"]) == ["diverged"] and math.isnan(failed["eval_f1"].iloc[0])


def test_the_table_is_one_row_per_cell_as_the_api_gives_it(client: Client, sweep: Sweep) -> None:
    served = client.request("GET", f"/v1/sweeps/{sweep.id}/grid")
    frame = sweep.grid()
    assert len(frame) == len(served["cells"])
    assert (
        list(frame.columns[:2]) == [served["rows_key"], served["cols_key"]] == ["loss", "dataset"]
    )
    assert frame["mean"].dtype == "float64" and frame["seeds"].dtype == "int64"
    for (_, row), cell in zip(frame.iterrows(), served["cells"], strict=True):
        assert (row["loss"], row["dataset"]) == (cell["row"], cell["column"])
        for stat in ("mean", "std", "count", "seeds", "delta", "p_value", "degenerate"):
            expected = math.nan if cell[stat] is None else cell[stat]
            assert row[stat] == pytest.approx(expected, nan_ok=True)
    assert frame.attrs["metric"] == "eval_f1" and frame.attrs["baseline"] == "ce"
    assert [entry["loss"] for entry in frame.attrs["failed"]] == ["focal(gamma=2)"]
    # Stage 1's curves: none in a sweep without tune, as an empty frame of their columns.
    curves = sweep.budget_curves()
    assert curves.empty and list(curves.columns) == ["curve", "trials", "mean", "std"]


def test_sweeps_merge_as_the_api_merges_them(
    client: Client, sweep: Sweep, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    other = create_sweep(session, alice.id, make_draft("other")).sweep
    write_trials(tracking, other.id, TRIALS[:2])
    ids = [sweep.id, other.id]
    frame = client.grid(ids, rows="sweep")
    served = client.grid_json(ids, rows="sweep")
    assert frame.attrs["rows_key"] == served["rows_key"] == "sweep / loss"
    assert frame[["sweep / loss", "dataset", "mean"]].to_dict("records") == [
        {"sweep / loss": cell["row"], "dataset": cell["column"], "mean": cell["mean"]}
        for cell in served["cells"]
    ]


def test_mlflow_runs_come_from_mlflows_own_client(
    client: Client, sweep: Sweep, tracking: MlflowClient
) -> None:
    runs = sweep.mlflow_runs()
    served = client.request("GET", f"/v1/sweeps/{sweep.id}/trials", params={"limit": 100})
    assert set(runs["run_id"]) == {trial["run_id"] for trial in served["data"]}
    assert set(runs[f"tags.{SWEEP_TAG}"]) == {sweep.id}
    assert isinstance(runs["start_time"].iloc[0], pd.Timestamp)


def test_a_refusal_and_an_absent_service_are_one_line(client: Client) -> None:
    with pytest.raises(ClientError, match=r"GET /v1/sweeps/sw-none: HTTP 404: no sweep"):
        client.sweep("sw-none")
    with (
        Client("http://127.0.0.1:9", timeout_s=2) as nowhere,
        pytest.raises(ClientError, match="cannot reach the dicesweep service at"),
    ):
        nowhere.presets()


def test_ctrl_c_stops_the_waiting_not_the_sweep(
    client: Client,
    sweep: Sweep,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sweep stays pending (no cluster here): Ctrl-C lands, as it mostly does, in the
    # sleep between two polls. Raised there rather than by a timer signal, it cannot land
    # inside the test client's own calls, nor take over the timeout's SIGALRM.
    real_sleep, slept = time.sleep, []

    def interrupted_sleep(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread():
            slept.append(seconds)
            if len(slept) == 2:
                raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", interrupted_sleep)
    with pytest.raises(KeyboardInterrupt):
        sweep.wait(progress=True, poll_s=0.05)
    monkeypatch.undo()
    assert slept == [0.05, 0.05]  # it polled twice before the interrupt
    said = capsys.readouterr().err
    assert f"stopped waiting; sweep {sweep.id} goes on running on the service" in said
    assert "trials:" in said  # the bar was drawn
    assert client.sweep(sweep.id).status == "pending"


def test_a_resolvable_range_is_two_numbers_or_none_in_the_json_and_the_frame(
    client: Client, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    # mrpc: dsc paired with ce at three seeds; ud_en_ewt: at one; ce is never tested.
    f1 = {
        ("ce", "mrpc"): (80.0, 81.0, 82.0),
        ("dsc", "mrpc"): (81.0, 81.5, 83.0),
        ("ce", "ud_en_ewt"): (80.0,),
        ("dsc", "ud_en_ewt"): (81.0,),
    }
    trials = [
        FakeTrial({"name": loss}, seed=seed, dataset=dataset, eval_f1=value)
        for (loss, dataset), values in f1.items()
        for seed, value in enumerate(values)
    ]
    stored = create_sweep(session, alice.id, make_draft(trials=len(trials))).sweep
    write_trials(tracking, stored.id, trials)
    sweep = client.sweep(stored.id)
    served = {(c["row"], c["column"]): c["resolvable_range"] for c in sweep.grid_json()["cells"]}
    low, high = served[("dsc", "mrpc")]
    assert 0 < low < high
    assert served[("dsc", "ud_en_ewt")] is None  # one pair: no spread to range over
    assert served[("ce", "mrpc")] is None and served[("ce", "ud_en_ewt")] is None
    frame = sweep.grid().set_index(["loss", "dataset"])["resolvable_range"]
    assert frame[("dsc", "mrpc")] == [low, high]
    assert frame[("dsc", "ud_en_ewt")] is None and frame[("ce", "mrpc")] is None
    untested = create_sweep(session, alice.id, make_draft(trials=1)).sweep
    write_trials(tracking, untested.id, [FakeTrial({"name": "ce"}, eval_f1=80.0)])
    (only,) = client.sweep(untested.id).grid()["resolvable_range"]
    assert only is None  # not NaN where no cell of the table was tested
