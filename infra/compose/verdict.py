"""What must hold after a fault scenario of ``faults.py``: the sweep succeeded, every
trial finished, every grid cell holds every seed, MLflow holds one parent run and
exactly one run per trial (no duplicate from a retry or a resumed driver), none left
marked failed, every trial's metric history holds one point per evaluation (none lost,
none written twice), and the sweep's message keeps no stale failure. The out-of-memory
scenario adds its own checks (``oom_problems``)."""

from __future__ import annotations

import csv
import io
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from check import OWNER, Stack, sweep_runs

# The metrics each evaluation writes (trainables.loop): a run's history of each holds
# one point per evaluation. Keys written once at the end (best_*, final) are left out.
PER_EVALUATION = ("step", "epoch", "train_loss")
EVAL_PREFIX = "eval_"
OOM_WORDS = re.compile(r"out of memory", re.I)
OOM_WORKER = "ray-worker-1"  # the worker whose memory the oom-trial scenario limits
FREE_WORKER = "ray-worker-2"


@dataclass(frozen=True)
class Expect:
    """What a sweep of ``spec`` (the smoke preset's ce and dsc, FIFO, one evaluation a
    epoch, no early stopping) ends with: ``trials`` runs, the grid's ``cells`` each
    holding ``seeds`` seeds, ``evaluations`` per trial."""

    trials: int
    cells: frozenset[str]
    seeds: int
    evaluations: int

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Expect:
        seeds = len(spec.get("seeds", [0]))
        cells = frozenset({"ce", "dsc(alpha=0.1,scope=set)"})  # the smoke preset's losses
        return cls(len(cells) * seeds, cells, seeds, int(spec["training"]["epochs"]))


def line(text: object, limit: int = 300) -> str:
    """``text`` on one line for a table cell, cut at ``limit`` characters."""
    flat = " ".join(str(text).split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tags_of(found_run: Mapping[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in found_run["data"].get("tags", [])}


def trial_runs(stack: Stack, sweep: str) -> list[dict[str, Any]]:
    """The sweep's runs in MLflow, each as its id, status and tags."""
    return [
        {"id": r["info"]["run_id"], "status": r["info"]["status"], "tags": tags_of(r)}
        for r in sweep_runs(stack, sweep)
    ]


def lost_points(stack: Stack, runs: list[dict[str, Any]], evaluations: int) -> list[str]:
    """For each trial run, each per-evaluation metric whose history does not hold
    exactly ``evaluations`` points at distinct steps: ``ce/0 eval_f1 38/40``."""
    mlflow = httpx.Client(
        base_url=f"http://127.0.0.1:{stack.mlflow_port}", auth=stack.mlflow_auth(OWNER), timeout=30
    )
    found = []
    for found_run in runs:
        got = mlflow.get("/api/2.0/mlflow/runs/get", params={"run_id": found_run["id"]}).json()
        keys = [m["key"] for m in got["run"]["data"].get("metrics", [])]
        keys = [k for k in keys if k in PER_EVALUATION or k.startswith(EVAL_PREFIX)]
        tags = found_run["tags"]
        label = f"{tags.get('dicesweep.loss_label')}/{tags.get('dicesweep.seed')}"
        if "step" not in keys:
            found.append(f"{label} no step history")
        for key in sorted(keys):
            history = mlflow.get(
                "/api/2.0/mlflow/metrics/get-history",
                params={"run_id": found_run["id"], "metric_key": key, "max_results": 25000},
            ).json()
            steps = [int(point["step"]) for point in history.get("metrics", [])]
            if len(steps) != evaluations or len(set(steps)) != len(steps):
                found.append(
                    f"{label} {key} {len(set(steps))}/{evaluations} steps, {len(steps)} points"
                )
    return found


def verdict(stack: Stack, api: Any, sweep: str, expect: Expect) -> tuple[bool, str]:
    """Whether the sweep survived, and what was found (the table's cell). ``api``: the
    run's ``faults.Api``."""
    state = api.get(f"/v1/sweeps/{sweep}")
    trials = (api.get(f"/v1/sweeps/{sweep}/trials") or {"data": []})["data"]
    grid = api.get(f"/v1/sweeps/{sweep}/grid", format="csv") or ""
    runs = trial_runs(stack, sweep)
    in_trials = [r for r in runs if r["tags"].get("dicesweep.role") == "trial"]
    parents = [r for r in runs if r["tags"].get("dicesweep.role") == "sweep"]
    keys = [
        (r["tags"].get("dicesweep.loss_label"), r["tags"].get("dicesweep.seed")) for r in in_trials
    ]
    finished = sum(t["status"] == "FINISHED" for t in trials)
    marked = sum("dicesweep.failure" in r["tags"] for r in in_trials if r["status"] == "FINISHED")
    # One line per cell (loss, data set, mean, std, count, ...): every seed in each.
    lines = list(csv.DictReader(io.StringIO(grid)))
    cells = sum(
        1 for row in lines if row["loss"] in expect.cells and row["count"] == str(expect.seeds)
    )
    lost = lost_points(stack, in_trials, expect.evaluations)
    problems = []
    if state is None or state["status"] != "succeeded":
        problems.append(f"sweep {state and state['status']}: {line(state and state['message'])}")
    if finished != expect.trials:
        problems.append(f"{finished}/{expect.trials} trials finished")
    if cells != len(expect.cells):
        problems.append(f"{cells}/{len(expect.cells)} grid cells")
    if len(parents) != 1 or len(in_trials) != expect.trials or len(set(keys)) != len(keys):
        problems.append(f"MLflow: {len(parents)} parent(s), {len(in_trials)} trial runs")
    if marked:
        problems.append(f"{marked} finished run(s) still tagged dicesweep.failure")
    if lost:
        problems.append(f"metric history: {line('; '.join(lost), 200)}")
    message = (state or {}).get("message") or ""
    succeeded = state is not None and state["status"] == "succeeded"
    if succeeded and ("\x1b[" in message or "failed" in message):  # a stale reason
        problems.append(f"the succeeded sweep's message: {line(message)}")
    summary = (
        f"{finished}/{expect.trials} trials, {cells}/{len(expect.cells)} cells, "
        f"{len(in_trials) - len(set(keys))} duplicate runs, "
        f"{expect.evaluations} points a metric in each"
    )
    return not problems, "; ".join(problems) or summary


class Reasons:
    """Every failure reason the sweep's trials showed while it ran, read every 5 s from
    the API (``failure_reason`` of ``/v1/sweeps/{id}/trials``) and from MLflow (each
    trial run's tags): a trial that failed an attempt and finished on a retry may keep
    its reason only until then."""

    def __init__(self, stack: Stack, api: Any, sweep: str) -> None:
        self.stack, self.api, self.sweep = stack, api, sweep
        self.in_api: set[str] = set()
        self.in_mlflow: set[str] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while True:
            self.read()
            if self.stopping.wait(5):
                return

    def read(self) -> None:
        trials = self.api.get(f"/v1/sweeps/{self.sweep}/trials") or {"data": []}
        self.in_api |= {t["failure_reason"] for t in trials["data"] if t.get("failure_reason")}
        try:
            runs = trial_runs(self.stack, self.sweep)
        except (httpx.HTTPError, KeyError, ValueError, RuntimeError):  # MLflow down
            return
        for found in runs:
            if found["tags"].get("dicesweep.role") == "trial":
                self.in_mlflow |= {v for k, v in found["tags"].items() if OOM_WORDS.search(v)}
                self.in_mlflow |= {
                    found["tags"][k] for k in ("dicesweep.failure",) if k in found["tags"]
                }

    def __enter__(self) -> Reasons:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=60)
        self.read()  # the end state too


def oom_problems(stack: Stack, sweep: str, reasons: Reasons) -> tuple[list[str], str]:
    """The out-of-memory scenario's own checks: a reason naming out of memory in the API
    and in MLflow, and a trial that was retried (``dicesweep.attempt`` 2 or more) and
    finished on the worker with room (its run's ``dicesweep.hostname``). Returns the
    problems and what was seen (the reason, each retried trial's attempts and node)."""
    problems = []
    named = sorted(r for r in reasons.in_api | reasons.in_mlflow if OOM_WORDS.search(r))
    if not any(OOM_WORDS.search(r) for r in reasons.in_api):
        problems.append(
            f"no reason naming out of memory in the API (seen: {sorted(reasons.in_api)})"
        )
    if not any(OOM_WORDS.search(r) for r in reasons.in_mlflow):
        problems.append(
            f"no reason naming out of memory in MLflow (seen: {sorted(reasons.in_mlflow)})"
        )
    runs = [r for r in trial_runs(stack, sweep) if r["tags"].get("dicesweep.role") == "trial"]
    retried = [r for r in runs if int(r["tags"].get("dicesweep.attempt", "1")) >= 2]
    if not retried:
        problems.append("no trial retried")
    seen = []
    for found in retried:
        tags = found["tags"]
        host = tags.get("dicesweep.hostname")
        label = f"{tags.get('dicesweep.loss_label')}/{tags.get('dicesweep.seed')}"
        seen.append(f"{label} {found['status']} on {host} at attempt {tags['dicesweep.attempt']}")
        if found["status"] != "FINISHED" or host != FREE_WORKER:
            problems.append(f"{label}, retried, {found['status']} on {host}, not on {FREE_WORKER}")
    return problems, "; ".join([*(f"reason: {line(r, 160)}" for r in named[:1]), *seen])
