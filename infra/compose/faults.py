"""Faults injected into the compose topology mid-sweep, one scenario each, and what
must hold afterwards: the sweep succeeded, every trial finished, every grid cell holds
both seeds, and MLflow holds one parent run and exactly one run per trial (no
duplicate from a retry or a resumed driver), none of them left marked failed, and the
sweep's message keeps no stale failure from a resubmitted driver.

    python infra/compose/faults.py [--only head-killed,...] [--write] [--no-build] [--keep]

Each scenario submits the same 4-trial sweep (the smoke task trained longer on fewer
sentences: ce and dsc, two seeds, two trials at a time, ``max_failures: 2``), waits
until a trial has reported progress, injects its fault with docker, and waits for the
sweep to end. The stack is brought up once (as ``check.py`` does) and shared by the
scenarios in turn. Prints a table, one row per fault; ``--write`` also puts it into
docs/reliability.md between its ``compose-faults`` markers. Exits non-zero when any
scenario did not survive. ``make compose-faults`` builds the images and runs it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from check import ROOT, Phases, Stack, bring_up, datasets_dir, healthy, sweep_runs, wait_for

SPEC = {
    "extends": "smoke",
    "name": "compose-fault",
    "training": {"epochs": 40, "max_train_examples": 512, "max_eval_examples": 64},
    "seeds": [0, 1],
    "max_failures": 2,
}
TRIALS = 4  # 2 losses x 2 seeds
CELLS = {"ce", "dsc(alpha=0.1,scope=set)"}
REPORT = ROOT / "docs" / "reliability.md"
MARKS = ("<!-- compose-faults: start -->", "<!-- compose-faults: end -->")
# Kills the sweep's driver inside the head's container: every process whose command
# line runs the driver module (Ray's job supervisor is left alone and sees it die).
KILL_DRIVER = (
    "import os, signal\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        line = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ')\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'-m trainables.driver' in line and int(pid) != os.getpid():\n"
    "        os.kill(int(pid), signal.SIGKILL); print('killed', pid)\n"
)


@dataclass(frozen=True)
class Fault:
    name: str
    what: str  # the fault, as the table says it
    inject: Callable[[Stack], object]
    recovery: str  # what recovers the sweep from it


def _pause(stack: Stack, service: str, seconds: int) -> None:
    stack.compose("pause", service)
    time.sleep(seconds)
    stack.compose("unpause", service)


def _stop(stack: Stack, service: str, seconds: int) -> None:
    stack.compose("stop", "-t", "5", service)
    time.sleep(seconds)
    stack.compose("start", service)


def _kill_and_start(stack: Stack, service: str, down_s: int = 5) -> None:
    stack.compose("kill", service)
    time.sleep(down_s)
    stack.compose("start", service)


def _kill_driver(stack: Stack) -> None:
    out = stack.compose("exec", "-T", "ray-head", "python", "-c", KILL_DRIVER)
    if "killed" not in out:
        raise RuntimeError("no driver process found on the head to kill")


FAULTS = (
    Fault(
        "worker-killed",
        "`docker kill` of a Ray worker, started again 10 s later",
        lambda s: _kill_and_start(s, "ray-worker-1", 10),
        "Ray retries its trial (`max_failures`) on a live worker; the MLflow run is reused",
    ),
    Fault(
        "worker-paused-60s",
        "a Ray worker paused 60 s (`docker pause`)",
        lambda s: _pause(s, "ray-worker-1", 60),
        "the trial goes on when the worker does, or Ray reruns it",
    ),
    Fault(
        "worker-paused-120s",
        "a Ray worker paused 120 s",
        lambda s: _pause(s, "ray-worker-1", 120),
        "Ray declares the node dead and reruns its trial elsewhere; the worker rejoins",
    ),
    Fault(
        "driver-killed",
        "the sweep's driver killed (SIGKILL) on the head",
        _kill_driver,
        "the reconciler resubmits the driver, which resumes from Tune's storage",
    ),
    Fault(
        "api-restarted",
        "the API container restarted (reconciler included)",
        lambda s: s.compose("restart", "-t", "5", "api"),
        "the driver runs on; the restarted reconciler takes the sweep up again",
    ),
    Fault(
        "mlflow-stopped-60s",
        "the MLflow server stopped 60 s",
        lambda s: _stop(s, "mlflow", 60),
        "the trial logger holds its writes and flushes them after; the reconciler skips"
        " its progress reads meanwhile",
    ),
    Fault(
        "postgres-restarted",
        "PostgreSQL (the service's and MLflow's store) restarted",
        lambda s: s.compose("restart", "-t", "5", "postgres"),
        "the API answers 503 `store_unavailable` until the store is back",
    ),
    Fault(
        "head-killed",
        "`docker kill` of the Ray head, then `docker start`",
        lambda s: _kill_and_start(s, "ray-head", 5),
        "the workers rejoin; the resubmitted driver waits for capacity and resumes from"
        " Tune's storage",
    ),
)


class Api:
    """The service's REST API with the run's key; a request while the API or its store
    is down answers None instead of raising."""

    def __init__(self, stack: Stack, key: str) -> None:
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{stack.api_port}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=15,
        )

    def get(self, path: str, **params: str) -> Any | None:
        try:
            answer = self.client.get(path, params=params)
        except httpx.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        return answer.text if params.get("format") else answer.json()


def _trial_has_progress(api: Api, sweep: str) -> bool | None:
    trials = api.get(f"/v1/sweeps/{sweep}/trials")
    if trials is None:
        return None
    running = [t for t in trials["data"] if t["status"] == "RUNNING" and t["metrics"]]
    return True if running else None


def _mlflow_runs(stack: Stack, sweep: str) -> list[dict[str, Any]]:
    runs = []
    for found_run in sweep_runs(stack, sweep):
        tags = {t["key"]: t["value"] for t in found_run["data"].get("tags", [])}
        runs.append({"status": found_run["info"]["status"], "tags": tags})
    return runs


def _line(text: object, limit: int = 300) -> str:
    """``text`` on one line for a table cell, cut at ``limit`` characters."""
    line = " ".join(str(text).split()).replace("|", "/")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def verdict(stack: Stack, api: Api, sweep: str) -> tuple[bool, str]:
    """Whether the sweep survived, and what was found (the table's cell)."""
    state = api.get(f"/v1/sweeps/{sweep}")
    trials = (api.get(f"/v1/sweeps/{sweep}/trials") or {"data": []})["data"]
    grid = api.get(f"/v1/sweeps/{sweep}/grid", format="csv") or ""
    runs = _mlflow_runs(stack, sweep)
    trial_runs = [r for r in runs if r["tags"].get("dicesweep.role") == "trial"]
    parents = [r for r in runs if r["tags"].get("dicesweep.role") == "sweep"]
    keys = [
        (r["tags"].get("dicesweep.loss_label"), r["tags"].get("dicesweep.seed")) for r in trial_runs
    ]
    finished = sum(t["status"] == "FINISHED" for t in trials)
    marked = sum("dicesweep.failure" in r["tags"] for r in trial_runs if r["status"] == "FINISHED")
    # One line per cell (loss, data set, mean, std, count, ...): both seeds in each.
    lines = list(csv.DictReader(io.StringIO(grid)))
    cells = sum(1 for line in lines if line["loss"] in CELLS and line["count"] == "2")
    problems = []
    if state is None or state["status"] != "succeeded":
        problems.append(f"sweep {state and state['status']}: {_line(state and state['message'])}")
    if finished != TRIALS:
        problems.append(f"{finished}/{TRIALS} trials finished")
    if cells != len(CELLS):
        problems.append(f"{cells}/{len(CELLS)} grid cells")
    if len(parents) != 1 or len(trial_runs) != TRIALS or len(set(keys)) != len(keys):
        problems.append(f"MLflow: {len(parents)} parent(s), {len(trial_runs)} trial runs")
    if marked:
        problems.append(f"{marked} finished run(s) still tagged dicesweep.failure")
    message = (state or {}).get("message") or ""
    succeeded = state is not None and state["status"] == "succeeded"
    if succeeded and ("\x1b[" in message or "failed" in message):  # a stale reason
        problems.append(f"the succeeded sweep's message: {_line(message)}")
    summary = (
        f"{finished}/{TRIALS} trials, {cells}/{len(CELLS)} cells, "
        f"{len(trial_runs) - len(set(keys))} duplicate runs"
    )
    return not problems, "; ".join(problems) or summary


class Watch:
    """The sweep's status as its API answers it once a second while a fault is
    injected and 20 s after: how often each answer came (``running`` 50, ``503`` 4,
    ``no answer`` 3), and whether it answered within the 15 s timeout each time."""

    def __init__(self, api: Api, sweep: str) -> None:
        self.api, self.sweep = api, sweep
        self.seen: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stopping.wait(1):
            try:
                answer = self.api.client.get(f"/v1/sweeps/{self.sweep}")
                code = answer.status_code
                self.seen[answer.json()["status"] if code == 200 else str(code)] += 1
            except (httpx.HTTPError, ValueError):
                self.seen["no answer"] += 1

    def __enter__(self) -> Watch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(20)
        self.stopping.set()
        self.thread.join(timeout=30)

    def summary(self) -> str:
        return ", ".join(f"{seen} {count}" for seen, count in self.seen.most_common())


def scenario(stack: Stack, api: Api, fault: Fault, phases: Phases) -> dict[str, Any]:
    with phases.phase(f"fault: {fault.name}"):
        answer = api.client.post("/v1/sweeps", json={**SPEC, "name": f"fault-{fault.name}"})
        assert answer.status_code == 201, answer.text
        sweep = answer.json()["id"]
        began = time.monotonic()
        wait_for(lambda: _trial_has_progress(api, sweep), "a trial's progress", phases, 600)
        injected = time.monotonic()
        print(f"    {sweep}: injecting after {injected - began:.0f} s", flush=True)
        with Watch(api, sweep) as watch:
            fault.inject(stack)

        def ended() -> dict[str, Any] | None:
            state = api.get(f"/v1/sweeps/{sweep}")
            if state and state["status"] in ("succeeded", "failed", "cancelled"):
                return dict(state)
            return None

        state = wait_for(ended, f"{sweep} ended", phases, 1200)
        survived, found = verdict(stack, api, sweep)
        took = time.monotonic() - injected
        print(f"    {sweep}: {state['status']} {took:.0f} s after the fault; {found}")
        if not survived:
            print(stack.compose("logs", "--tail", "40", "api", "ray-head")[-6000:])
        return {
            "fault": fault,
            "sweep": sweep,
            "survived": survived,
            "found": found,
            "watched": watch.summary(),
            "after": took,
            "total": time.monotonic() - began,
        }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| fault | how it is recovered | survived | found | the sweep's status during the fault |"
        " ended after the fault (s) | sweep wall (s) |",
        "|---|---|---|---|---|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['fault'].what} | {r['fault'].recovery} | "
            f"{'yes' if r['survived'] else '**no**'} | {r['found']} | {r['watched']} | "
            f"{r['after']:.0f} | {r['total']:.0f} |"
        )
    survived = sum(r["survived"] for r in results)
    lines.append(f"| **{survived}/{len(results)} survived** | | | | | | |")
    return "\n".join(lines)


def write_report(text: str) -> None:
    doc = REPORT.read_text()
    start, end = (doc.index(mark) for mark in MARKS)
    REPORT.write_text(doc[: start + len(MARKS[0])] + "\n" + text + "\n" + doc[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--budget", type=float, default=3600, help="seconds for the whole run")
    parser.add_argument("--write", action="store_true", help="put the table in the docs")
    parser.add_argument("--keep", action="store_true", help="leave the stack up at the end")
    parser.add_argument("--no-build", action="store_true", help="use the images already built")
    args = parser.parse_args()
    chosen = [f for f in FAULTS if not args.only or f.name in args.only.split(",")]
    phases = Phases(args.budget)
    stack = Stack(datasets_dir())
    results: list[dict[str, Any]] = []
    try:
        key = bring_up(stack, phases, build=not args.no_build)
        api = Api(stack, key)
        for fault in chosen:
            results.append(scenario(stack, api, fault, phases))
            wait_for(lambda: healthy(stack), "every service healthy again", phases, 300)
    finally:
        if not args.keep:
            with phases.phase("compose down (volumes removed)"):
                stack.compose("down", "-v", "--remove-orphans", timeout=300)
        print(phases.table())
    text = table(results)
    print(text)
    print(json.dumps({r["fault"].name: r["sweep"] for r in results}))
    if args.write:
        write_report(text)
    return 0 if results and all(r["survived"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
