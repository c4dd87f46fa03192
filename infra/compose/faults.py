"""Faults injected into the compose topology, one scenario each (``injections.py``), and
what must hold afterwards (``verdict.py``): the sweep succeeded, every trial finished,
every grid cell holds every seed, MLflow holds one parent run and exactly one run per
trial, none left marked failed, every trial's metric history holds one point per
evaluation, and the sweep's message keeps no stale failure.

    python infra/compose/faults.py [--only head-killed,...] [--write] [--no-build] [--keep]
                                   [--project NAME] [--budget 3600]

Most scenarios submit the same 4-trial sweep (the smoke task trained longer on fewer
sentences: ce and dsc, two seeds, two trials at a time, ``max_failures: 2``), wait
until a trial has reported progress, inject their fault with docker, and wait for the
sweep to end; ``mlflow-down-at-submit`` stops MLflow before the submission and
``oom-trial`` limits a worker's memory before it (and submits a sweep whose trials
need more). The stack is brought up once (as ``check.py`` does, in the compose project
``--project``, else COMPOSE_PROJECT_NAME, else ``dicesweep-check``) and shared by the
scenarios in turn. The budget counts the scenarios and the stack, not the image
build. Prints a table, one row per fault, and the wall times (build apart);
``--write`` also puts the table into docs/reliability.md between its
``compose-faults`` markers. Exits non-zero when any scenario did not survive. ``make
compose-faults`` builds the images and runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from typing import Any

import httpx
from check import (
    OWNER,
    PROJECT,
    ROOT,
    Phases,
    Stack,
    bring_up,
    datasets_dir,
    healthy,
    project_name,
    wait_for,
)
from injections import FAULTS, Fault
from verdict import Expect, Reasons, verdict

REPORT = ROOT / "docs" / "reliability.md"
MARKS = ("<!-- compose-faults: start -->", "<!-- compose-faults: end -->")


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


def _ended(api: Api, sweep: str) -> dict[str, Any] | None:
    state = api.get(f"/v1/sweeps/{sweep}")
    if state and state["status"] in ("succeeded", "failed", "cancelled"):
        return dict(state)
    return None


def scenario(stack: Stack, api: Api, fault: Fault, phases: Phases) -> dict[str, Any]:
    with phases.phase(f"fault: {fault.name}"):
        try:
            fault.prepare(stack)
            answer = api.client.post(
                "/v1/sweeps", json={**fault.spec, "name": f"fault-{fault.name}"}
            )
            assert answer.status_code == 201, answer.text
            sweep = answer.json()["id"]
            began = time.monotonic()
            with Reasons(stack, api, sweep) as reasons:
                if not fault.at_submit:
                    wait_for(
                        lambda: _trial_has_progress(api, sweep), "a trial's progress", phases, 600
                    )
                injected = time.monotonic()
                print(f"    {sweep}: injecting after {injected - began:.0f} s", flush=True)
                with Watch(api, sweep) as watch:
                    fault.inject(stack)
                state = wait_for(lambda: _ended(api, sweep), f"{sweep} ended", phases, 1200)
        finally:
            fault.undo(stack)
        survived, found = verdict(stack, api, sweep, Expect.of(fault.spec))
        own, seen = fault.checks(stack, sweep, reasons) if fault.checks else ([], "")
        survived = survived and not own
        found = "; ".join(part for part in (*own, found, seen) if part)
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
    parser.add_argument(
        "--budget", type=float, default=3600, help="seconds for the run, the image build aside"
    )
    parser.add_argument("--write", action="store_true", help="put the table in the docs")
    parser.add_argument("--keep", action="store_true", help="leave the stack up at the end")
    parser.add_argument("--no-build", action="store_true", help="use the images already built")
    parser.add_argument(
        "--project", help=f"compose project (default: $COMPOSE_PROJECT_NAME, {PROJECT})"
    )
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [f.name for f in FAULTS]
    unknown = set(names) - {f.name for f in FAULTS}
    if unknown:
        parser.error(f"--only: no scenario {sorted(unknown)}; there are {[f.name for f in FAULTS]}")
    chosen = [f for f in FAULTS if f.name in names]
    phases = Phases(args.budget)
    stack = Stack(datasets_dir(), project_name(args.project))
    results: list[dict[str, Any]] = []
    try:
        key = bring_up(stack, phases, build=not args.no_build)
        api = Api(stack, key)
        stack.mlflow_auth(OWNER)  # the admin's password, read while MLflow runs
        for fault in chosen:
            results.append(scenario(stack, api, fault, phases))
            wait_for(lambda: healthy(stack), "every service healthy again", phases, 600)
    finally:
        if not args.keep:
            with phases.phase("compose down (volumes removed)"):
                stack.down()
        print(phases.table())
    text = table(results)
    print(text)
    scenarios = sum(r["total"] for r in results)
    print(
        f"scenarios: {scenarios:.0f} s of sweeps; the run without the image build:"
        f" {phases.budgeted_s():.0f} s of its {args.budget:.0f} s budget; the build:"
        f" {phases.unbudgeted:.0f} s"
    )
    print(json.dumps({r["fault"].name: r["sweep"] for r in results}))
    if args.write:
        write_report(text)
    return 0 if results and all(r["survived"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
