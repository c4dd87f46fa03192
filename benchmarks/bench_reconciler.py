"""The reconciler with many active sweeps: the time of one pass and the MLflow and Jobs
API requests it makes, against the reconcile interval (2 s by default).

Builds a store (SQLite) holding ``--sweeps`` running sweeps of ``smoke`` (2 trials
each), a Ray Jobs API that accepts and records jobs (``jobs_api.py``; the reconciler
submits every sweep on its first pass), and an MLflow server (``mlflow server`` on a
SQLite backend, read over HTTP as the service reads it in deployment) holding each
sweep's parent run and trial runs, still running, with their params and an
``eval_f1``. Then times the first pass (submitting every sweep) and three steady
passes (each sweep's job state, and its progress read from MLflow), counting the
requests by kind.

    python benchmarks/bench_reconciler.py [--sweeps 500]   # writes docs/reliability.md
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import httpx
from bench_api import free_port
from bench_load import wait_until
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from docs_table import machine_description, write_section
from search_spaces.contract import EXPERIMENT, LOSS_LABEL_TAG, ROLE_TAG, SWEEP_TAG, TRIAL_TAG
from search_spaces.resolve import resolve_submission
from sweep_service import store
from sweep_service.progress import read_progress
from sweep_service.reconciler import Reconciler
from sweep_service.runner import RayJobRunner
from sweep_service.store.sweeps import SweepDraft

HERE = Path(__file__).parent
TRIALS = 2  # per sweep: the smoke preset's
JOBS_API = [sys.executable, str(HERE / "jobs_api.py")]


class CountingClient(MlflowClient):
    """An MLflow client that counts the tracking server's requests it makes, by kind."""

    calls: ClassVar[Counter[str]] = Counter()

    def get_experiment_by_name(self, name: str) -> Any:
        self.calls["get_experiment_by_name"] += 1
        return super().get_experiment_by_name(name)

    def search_runs(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["search_runs"] += 1
        return super().search_runs(*args, **kwargs)


def fill_mlflow(client: MlflowClient, sweep_ids: list[str]) -> None:
    experiment = client.create_experiment(EXPERIMENT)
    now = int(time.time() * 1000)
    for sweep_id in sweep_ids:
        client.create_run(experiment, tags={SWEEP_TAG: sweep_id, ROLE_TAG: "sweep"})
        for trial in range(TRIALS):
            tags = {
                SWEEP_TAG: sweep_id,
                ROLE_TAG: "trial",
                TRIAL_TAG: f"t{trial}",
                LOSS_LABEL_TAG: "ce",
                "dicesweep.seed": str(trial),
            }
            run = client.create_run(experiment, tags=tags)
            params = [Param("loss", "ce"), Param("dataset", "mrpc"), Param("variant", "original")]
            params.append(Param("seed", str(trial)))
            metrics = [Metric("eval_f1", 80.0 + trial, now, 1)]
            client.log_batch(run.info.run_id, params=params, metrics=metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=500)
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "reliability.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dicesweep-reconcile-") as folder:
        home = Path(folder)
        jobs_port, mlflow_port = free_port(), free_port()
        jobs_url, mlflow_url = f"http://127.0.0.1:{jobs_port}", f"http://127.0.0.1:{mlflow_port}"
        started = [
            subprocess.Popen(
                # Every job runs throughout the passes.
                [*JOBS_API, "--port", str(jobs_port), "--finish-after", "86400"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"),
                    *("--port", str(mlflow_port), "--workers", "1"),
                    *("--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}"),
                    *("--default-artifact-root", str(home / "artifacts")),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
        ]
        try:
            wait_until(lambda: _answers(f"{jobs_url}/records"), "the Jobs API", 60)
            wait_until(lambda: _answers(f"{mlflow_url}/health"), "the MLflow server", 120)
            url = f"sqlite:///{home / 'dicesweep.db'}"
            store.upgrade(url)
            sessions = store.create_session_factory(store.create_engine_for(url))
            spec = {"extends": "smoke"}
            draft = SweepDraft.from_spec(spec, resolve_submission(spec))
            with sessions() as session:
                owner = store.create_owner(session, "scale", max_concurrent_sweeps=100_000)
                made = [store.create_sweep(session, owner.id, draft) for _ in range(args.sweeps)]
                ids = [sweep.id for sweep, _ in made]
            print(f"{args.sweeps} sweeps stored; writing their runs to MLflow", flush=True)
            client = CountingClient(mlflow_url)
            fill_mlflow(client, ids)
            runner = RayJobRunner(jobs_url, {})
            reconciler = Reconciler(
                sessions,
                runner,
                max_resubmissions=3,
                progress=lambda sweep: read_progress(
                    client, sweep.id, sweep.mlflow_parent_run_id, sweep.mlflow_experiment_id
                ),
            )
            rows = []
            for name in ("first: submit every sweep", "steady 1", "steady 2", "steady 3"):
                CountingClient.calls.clear()
                jobs_before = _jobs_requests(jobs_url)
                began = time.perf_counter()
                reconciler.run_once()
                seconds = time.perf_counter() - began
                calls = dict(CountingClient.calls)
                rows.append((name, seconds, calls, _jobs_requests(jobs_url) - jobs_before))
                print(f"{name}: {seconds:.1f} s, MLflow {calls}", flush=True)
            records = httpx.get(f"{jobs_url}/records").json()
            assert len(records["submitted"]) == args.sweeps, "every sweep submitted once"
        finally:
            for process in started:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
    lines = [
        "| pass | time (s) | per sweep (ms) | MLflow requests | Jobs API requests |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, seconds, calls, jobs in rows:
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(calls.items())) or "0"
        lines.append(
            f"| {name} | {seconds:.1f} | {seconds / args.sweeps * 1e3:.1f} | {shown} | {jobs} |"
        )
    table = "\n".join(lines)
    print(table)
    steady = min(seconds for name, seconds, _, _ in rows[1:])
    write_section(
        args.docs,
        f"The reconciler with {args.sweeps} active sweeps",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_reconciler.py "
        f"--sweeps {args.sweeps}`. {args.sweeps} running `smoke` sweeps in a SQLite store; "
        f"a Jobs API that records jobs (`benchmarks/jobs_api.py`); an MLflow server "
        f"(`mlflow server`, SQLite backend, one worker) holding each sweep's parent run and "
        f"its {TRIALS} trial runs, read over HTTP. One pass of `Reconciler.run_once`: the "
        "first submits every sweep (a package upload and a submission each), the next "
        "read each job's state and each sweep's progress from MLflow. Jobs API requests are "
        "those the recording server answered (uploads included).\n\n"
        + table
        + f"\n\nA steady pass over {args.sweeps} sweeps takes {steady:.1f} s against a "
        "reconcile interval of 2 s (`DICESWEEP_RECONCILE_INTERVAL_S`): the passes run back to "
        "back, so each sweep's status and progress are that much older than the interval "
        "says, and the cost grows linearly with the active sweeps.\n",
    )


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _jobs_requests(jobs_url: str) -> int:
    """Requests the recording Jobs API has answered so far (from its access counts)."""
    records = httpx.get(f"{jobs_url}/records").json()
    return int(records.get("requests", 0))


if __name__ == "__main__":
    main()
