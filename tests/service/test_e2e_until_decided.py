"""Seeds until decided end to end over REST: ``dicesweep serve`` as a process, a real
local Ray head, real MLflow, tiny-bert on the packaged UD English EWT sample. One loss
stops at its first look (focal with gamma 0 is ce: futile), another runs on to the
second; the service (its Ray head and the sweep's driver with it) is stopped between
the looks, and the resumed driver reruns no finished seed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from search_spaces.contract import ATTEMPT_TAG
from tests.service.test_e2e import Service, trial_runs, wait

pytestmark = [pytest.mark.data, pytest.mark.e2e]

FUTILE, GOING = "focal(gamma=0)", "dsc(alpha=0.1,scope=set)"
SPEC = {
    "extends": "smoke",
    "name": "smoke-until-decided",
    # Not auto: a probe near bf16's bar could choose either, and the looks' figures with it.
    "training": {"precision": "fp32"},
    "search_space": {
        "losses": [
            {"name": "ce"},
            {"name": "focal", "gamma": 0},
            {"name": "dsc", "alpha": 0.1, "scope": "set"},
        ]
    },
    "seeds": {"min": 3, "max": 5, "until": "decided", "looks": [3, 5], "delta_min": 1.0},
}


@pytest.fixture
def service(short_home: Path, datasets_dir: Path) -> Iterator[Service]:
    running = Service(short_home, datasets_dir)
    running.start_timeout_s = 300  # started twice, the second time beside the sweep's work
    running.start()
    try:
        yield running
    finally:
        running.stop()


def steps(client: MlflowClient, run_id: str) -> list[int]:
    return [int(m.step) for m in client.get_metric_history(run_id, "eval_f1")]


def finished(service: Service, sweep_id: str) -> list[object]:
    return [r for r in trial_runs(service.home, sweep_id) if r.info.status == "FINISHED"]


def test_one_loss_stops_at_its_first_look_another_runs_on_through_a_restart(
    service: Service,
) -> None:
    created = service.http.post("/v1/sweeps", json=SPEC)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    assert created.json()["trial_count"] == 15  # the cap's count: 3 losses at max 5 seeds

    # Look 1 taken (its 9 trials finished): the driver goes down before look 2 is.
    wait(lambda: len(finished(service, sweep_id)) >= 9, 900, "the first round")
    client = MlflowClient(f"sqlite:///{service.home / 'mlflow.db'}")
    before = {
        run.info.run_id: steps(client, run.info.run_id) for run in finished(service, sweep_id)
    }
    service.stop()
    assert len(before) < 13, "the second round finished before the restart: nothing to resume"
    service.start()
    wait(lambda: service.sweep(sweep_id)["status"] in ("succeeded", "failed"), 900, "the sweep")
    sweep = service.sweep(sweep_id)
    assert sweep["status"] == "succeeded", sweep["message"][-3000:]
    # 13 of the cap's 15 ran; none is left pending once the rule stopped.
    assert sweep["trials"] == {"pending": 0, "running": 0, "done": 13, "failed": 0, "stopped": 0}

    runs = trial_runs(service.home, sweep_id)
    ran = Counter(
        (r.data.tags["dicesweep.loss_label"], r.data.tags["dicesweep.seed"]) for r in runs
    )
    # The futile loss ran look 1's seeds only; ce ran every seed the other needed; none twice.
    assert ran == Counter(
        {(FUTILE, str(s)): 1 for s in range(3)}
        | {(loss, str(s)): 1 for loss in ("ce", GOING) for s in range(5)}
    )
    for run in runs:
        assert run.info.status == "FINISHED"
        assert (
            run.data.params["setup.seeds"] == "until decided: looks 3, 5; alpha 0.05; delta_min 1"
        )
        if run.info.run_id in before:  # finished before the restart: never run again
            assert run.data.tags[ATTEMPT_TAG] == "1"
            assert steps(client, run.info.run_id) == before[run.info.run_id]

    grid = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "json"})
    assert grid.status_code == 200, grid.text
    cells = {cell["row"]: cell for cell in grid.json()["cells"]}
    futile, going = cells[FUTILE]["stopped"], cells[GOING]["stopped"]
    assert (futile["look"], futile["seeds"], futile["verdict"]) == (1, 3, "futile")
    assert futile["reason"]
    assert (going["look"], going["seeds"]) == (2, 5) and going["verdict"] in ("decided", "max")
    for cell in (cells[FUTILE], cells[GOING]):  # the repeated CI and p, not the fixed-k ones
        assert cell["ci"] == cell["stopped"]["ci"] and cell["p_value"] == cell["stopped"]["p"]
        assert cell["ci"][0] <= cell["delta"] <= cell["ci"][1]
    assert cells["ce"]["stopped"] is None and cells["ce"]["seeds"] == 5
    assert cells[FUTILE]["seeds"] == 3

    markdown = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "markdown"}).text
    assert f"{FUTILE} at look 1 of 2 (3 seeds), futile (" in markdown
    assert f"{GOING} at look 2 of 2 (5 seeds), {going['verdict']} (" in markdown
    page = service.http.get(f"/sweeps/{sweep_id}")  # its description and its table name the rule
    assert page.status_code == 200, page.text
    assert "seeds until decided (looks 3, 5; alpha 0.05; delta_min 1)" in page.text
    assert f"{FUTILE} at look 1 of 2 (3 seeds), futile" in page.text
