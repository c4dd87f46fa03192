"""The compose topology run for real: images built, the stack up with two Ray worker
containers, sweeps submitted over REST, their trials traced to both workers, the grid
and MLflow's nested runs read back, everything torn down. Prints its phases with their
wall times and exits non-zero at the first failed check.

    python infra/compose/check.py [--budget 2400] [--keep] [--no-build] [--project NAME]

Needs the Docker engine and the base image (scripts/docker-engine.sh) and the
wheelhouse (make wheels); `make compose-check` does all three. Secrets are made
fresh for the run and passed through the environment only; published ports are
free ones on 127.0.0.1. Everything the run makes and removes (containers, volumes,
the network) belongs to its compose project: ``--project``, else
COMPOSE_PROJECT_NAME, else ``dicesweep-check``; runs under other names on the same
engine are left alone. The budget counts from the stack's start: the image build
(minutes, longer on a loaded host) is timed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from mlflow_isolation import ADMIN_PASSWORD, check_isolation, owner_auth

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "dicesweep-check"  # the compose project, unless named otherwise
BUILD_TIMEOUT_S = 3600  # make images, outside the budget
WORKERS = ("ray-worker-1", "ray-worker-2")
FOUR_TRIALS = {
    "extends": "smoke",
    "name": "compose-four",
    "search_space": {
        "losses": [
            {"name": "ce"},
            {"name": "focal"},
            {"name": "dice"},
            {"name": "dsc", "alpha": 0.1},
        ]
    },
}
T = TypeVar("T")


class Phases:
    """Named phases with their wall times, printed as they end and as a table. A phase
    outside the budget (the image build) moves the deadline by its own time."""

    def __init__(self, budget_s: float) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + budget_s
        self.done: list[tuple[str, float, str]] = []
        self.unbudgeted = 0.0  # seconds spent in phases outside the budget

    @contextmanager
    def phase(self, name: str, budgeted: bool = True) -> Iterator[None]:
        began = time.monotonic()
        print(f"--> {name}", flush=True)
        status = "failed"
        try:
            yield
            status = "ok"
        finally:
            took = time.monotonic() - began
            if not budgeted:
                self.deadline += took
                self.unbudgeted += took
            self.done.append((name, took, status))
            print(f"    {name}: {status} in {took:.0f} s", flush=True)

    def budgeted_s(self) -> float:
        """Seconds since the start, the phases outside the budget left out."""
        return time.monotonic() - self.started - self.unbudgeted

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the time budget is spent")
        return left

    def table(self) -> str:
        lines = ["| phase | wall time (s) | result |", "|---|---:|---|"]
        lines += [f"| {name} | {took:.0f} | {status} |" for name, took, status in self.done]
        total = time.monotonic() - self.started
        lines.append(f"| **total** | **{total:.0f}** | |")
        if self.unbudgeted:
            lines.append(f"| **total without the build** | **{self.budgeted_s():.0f}** | |")
        return "\n".join(lines)


OWNER = "compose-check"  # who submits the check's sweeps


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(command: list[str], env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:6])} ... failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def wait_for(check: Callable[[], T | None], what: str, phases: Phases, limit: float) -> T:
    deadline = time.monotonic() + min(limit, phases.left())
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {limit:.0f} s")
        time.sleep(3)


def project_name(given: str | None) -> str:
    """The compose project: ``given`` (``--project``), else COMPOSE_PROJECT_NAME, else
    ``PROJECT``."""
    return given or os.environ.get("COMPOSE_PROJECT_NAME") or PROJECT


class Stack:
    """The compose project ``project``, with the environment its file asks for. Every
    command names the project, so it sees and removes that project's containers,
    volumes and network only."""

    def __init__(self, datasets: Path, project: str = PROJECT) -> None:
        self.project = project
        self.api_port, self.mlflow_port, self.dashboard_port = free_port(), free_port(), free_port()
        self.env = {
            **os.environ,
            "POSTGRES_PASSWORD": secrets.token_hex(16),
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "DICESWEEP_DATASETS_DIR": str(datasets),
            "DICESWEEP_API_PORT": str(self.api_port),
            "MLFLOW_PORT": str(self.mlflow_port),
            "RAY_DASHBOARD_PORT": str(self.dashboard_port),
            "DICESWEEP_MLFLOW_UI_URL": f"http://127.0.0.1:{self.mlflow_port}",
            "COMPOSE_PROFILES": "cpu",
        }
        self.base = [
            "docker-compose",
            "-p",
            project,
            "-f",
            "docker-compose.yml",
            "-f",
            "docker-compose.ci.yml",
        ]

    def compose(self, *args: str, timeout: float = 900) -> str:
        return run([*self.base, *args], self.env, timeout)

    def container(self, service: str) -> str:
        """The id of ``service``'s container in this project."""
        found = self.compose("ps", "-q", service).strip()
        if not found:
            raise RuntimeError(f"{self.project}: no container for {service}")
        return found

    def down(self) -> None:
        """This project's containers, network and volumes removed (no other's)."""
        self.compose("down", "-v", "--remove-orphans", timeout=300)

    def mlflow_auth(self, owner: str) -> tuple[str, str]:
        """``owner``'s MLflow user and password: the stack's MLflow asks for one."""
        if not hasattr(self, "_mlflow_admin"):
            self._mlflow_admin = self.compose("exec", "-T", "mlflow", "cat", ADMIN_PASSWORD).strip()
        return owner_auth(self._mlflow_admin, owner)

    def container_ip(self, service: str) -> str:
        inspected = run(["docker", "inspect", self.container(service)])
        networks = json.loads(inspected)[0]["NetworkSettings"]["Networks"]
        return str(next(iter(networks.values()))["IPAddress"])


def healthy(stack: Stack) -> bool | None:
    states = {}
    for line in stack.compose("ps").splitlines()[2:]:
        parts = line.split()
        if parts:
            states[parts[0]] = line
    if states and all("(healthy)" in s or "worker" in name for name, s in states.items()):
        return True
    return None


def sweep_runs(stack: Stack, sweep: str) -> list[dict[str, Any]]:
    """MLflow's runs of ``sweep`` (its parent and its trials) in the submitting owner's
    experiment, as the tracking server's REST API returns them to that owner."""
    mlflow = httpx.Client(
        base_url=f"http://127.0.0.1:{stack.mlflow_port}", auth=stack.mlflow_auth(OWNER), timeout=30
    )
    experiment = mlflow.get(
        "/api/2.0/mlflow/experiments/get-by-name",
        params={"experiment_name": f"dicesweep/{OWNER}"},
    ).json()["experiment"]
    found = mlflow.post(
        "/api/2.0/mlflow/runs/search",
        json={
            "experiment_ids": [experiment["experiment_id"]],
            "filter": f"tags.`dicesweep.sweep_id` = '{sweep}'",
            "max_results": 100,
        },
    ).json()
    return list(found.get("runs", []))


def submit_and_check(stack: Stack, key: str, phases: Phases) -> dict[str, Any]:
    api = httpx.Client(
        base_url=f"http://127.0.0.1:{stack.api_port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    results: dict[str, Any] = {}
    with phases.phase("submit smoke and a 4-trial sweep over REST"):
        ids = []
        for body in ({"extends": "smoke"}, FOUR_TRIALS):
            answer = api.post("/v1/sweeps", json=body)
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
        print(f"    sweeps {ids}")

    with phases.phase("wait for both sweeps to succeed"):

        def finished() -> list[dict[str, Any]] | None:
            states = [api.get(f"/v1/sweeps/{sweep}").json() for sweep in ids]
            for state in states:
                assert state["status"] not in ("failed", "cancelled"), state
            return states if all(s["status"] == "succeeded" for s in states) else None

        states = wait_for(finished, "both sweeps succeeded", phases, 1500)
        results["sweeps"] = {s["id"]: s["trials"] for s in states}

    with phases.phase("read the grids back"):
        for sweep in ids:
            grid = api.get(f"/v1/sweeps/{sweep}/grid", params={"format": "markdown"})
            assert grid.status_code == 200, grid.text
            print(grid.text)
        four = api.get(f"/v1/sweeps/{ids[1]}/grid").json()
        assert four, "the 4-trial grid is empty"
        page = api.get(f"/sweeps/{ids[1]}")
        assert page.status_code == 200 and "dsc(alpha=0.1)" in page.text, page.status_code

    with phases.phase("MLflow holds the nested runs, trained on both workers"):
        nodes: dict[str, str] = {}
        for sweep, expected in zip(ids, (2, 4), strict=True):
            found = sweep_runs(stack, sweep)
            tags_of = [{t["key"]: t["value"] for t in r["data"]["tags"]} for r in found]
            by_role: dict[str, list[tuple[dict[str, str], dict[str, Any]]]] = {}
            for tags, found_run in zip(tags_of, found, strict=True):
                by_role.setdefault(tags["dicesweep.role"], []).append((tags, found_run))
            parents, trials = by_role.get("sweep", []), by_role.get("trial", [])
            assert len(parents) == 1 and len(trials) == expected, (sweep, len(found))
            parent_id = parents[0][1]["info"]["run_id"]
            for tags, trial_run in trials:
                assert tags["mlflow.parentRunId"] == parent_id, tags
                assert trial_run["info"]["status"] == "FINISHED", trial_run["info"]
                nodes[tags["dicesweep.node_id"]] = tags["dicesweep.hostname"]
        worker_ips = {stack.container_ip(w): w for w in WORKERS}
        listed = json.loads(
            stack.compose("exec", "-T", "ray-head", "ray", "list", "nodes", "--format", "json")
        )
        worker_nodes = {
            n["node_id"]: worker_ips[n["node_ip"]]
            for n in listed
            if n["node_ip"] in worker_ips and n["state"] == "ALIVE"
        }
        print(f"    trials per node: {nodes}; the workers' Ray nodes: {worker_nodes}")
        assert set(nodes) == set(worker_nodes), "the trials did not run on both workers"
        assert set(nodes.values()) == set(WORKERS)
        results["nodes"] = nodes

    with phases.phase("MLflow: an owner's own experiment only; no credential, no access"):
        other = "compose-other"  # the service makes it an MLflow user with its key
        stack.compose("exec", "-T", "api", "dicesweep", "keys", "create", "--owner", other)
        found = sweep_runs(stack, ids[1])
        parent = next(r for r in found if _tag(r, "dicesweep.role") == "sweep")
        seen = check_isolation(
            f"http://127.0.0.1:{stack.mlflow_port}",
            stack.mlflow_auth(OWNER),
            stack.mlflow_auth(other),
            parent,
        )
        print(f"    {seen}")
        results["mlflow_isolation"] = seen

    with phases.phase("no secret in the process list"):
        processes = run(["ps", "axww", "-o", "args"])  # the containers' processes too
        for name in ("POSTGRES_PASSWORD", "RAY_AUTH_TOKEN"):
            assert stack.env[name] not in processes, f"{name} shows in ps"
        assert key not in processes, "the API key shows in ps"
        assert stack.mlflow_auth(OWNER)[1] not in processes, "an MLflow password shows in ps"
    return results


def _tag(found_run: dict[str, Any], key: str) -> str | None:
    tags = {t["key"]: t["value"] for t in found_run["data"].get("tags", [])}
    return tags.get(key)


def datasets_dir() -> Path:
    """The data sets' folder the stack mounts: DICESWEEP_DATASETS_DIR, else ../shared/data."""
    return Path(os.environ.get("DICESWEEP_DATASETS_DIR", ROOT.parent / "shared" / "data")).resolve()


def bring_up(stack: Stack, phases: Phases, build: bool) -> str:
    """The images built (unless ``build`` is false; outside the budget), the stack up
    and healthy, and an API key for ``OWNER``, which it returns."""
    if build:
        with phases.phase("build the images (make images)", budgeted=False):
            run(["make", "images"], timeout=BUILD_TIMEOUT_S)
    with phases.phase("compose up (postgres, mlflow, ray head, two workers, api)"):
        stack.compose("up", "-d", timeout=phases.left())
        # A loaded 2-core host may take minutes to start MLflow, the head and the API.
        wait_for(lambda: healthy(stack), "every service healthy", phases, 900)
        print(stack.compose("ps"))
    with phases.phase("an API key for the run"):
        create = ("exec", "-T", "api", "dicesweep", "keys", "create", "--owner", OWNER)
        return stack.compose(*create).strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--budget", type=float, default=2400, help="seconds for the run, the image build aside"
    )
    parser.add_argument("--keep", action="store_true", help="leave the stack up at the end")
    parser.add_argument("--no-build", action="store_true", help="use the images already built")
    parser.add_argument(
        "--project", help=f"compose project (default: $COMPOSE_PROJECT_NAME, {PROJECT})"
    )
    args = parser.parse_args()
    phases = Phases(args.budget)
    stack = Stack(datasets_dir(), project_name(args.project))
    try:
        key = bring_up(stack, phases, build=not args.no_build)
        submit_and_check(stack, key, phases)
    except BaseException:
        print("---- logs of the failed run ----")
        print(
            subprocess.run(
                [*stack.base, "logs", "--tail", "60"],
                cwd=ROOT,
                env=stack.env,
                capture_output=True,
                text=True,
            ).stdout[-12000:]
        )
        raise
    finally:
        if not args.keep:
            with phases.phase("compose down (volumes removed)"):
                stack.down()
        print(phases.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
