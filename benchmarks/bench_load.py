"""Submissions under load: 200 sweeps from 20 concurrent clients while 50 clients poll,
against the real service (``dicesweep serve``: its store, its reconciler) submitting to
a Ray Jobs API that accepts and records jobs (``jobs_api.py``), on SQLite and then on
PostgreSQL. Nothing may be lost or duplicated: every accepted submission is stored
once, every stored sweep is submitted to the Jobs API exactly once, and a client's
retry (the same ``Idempotency-Key``, sent again for one submission in four, as a
client does after a timeout) answers the first sweep.

    python benchmarks/bench_load.py [--stores sqlite,postgresql]   # writes docs/reliability.md

PostgreSQL: the server of ``DICESWEEP_TEST_POSTGRES_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``); the run creates its own
database there and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench_api import Connection, free_port, percentile, raw_request
from sqlalchemy import func, select

from docs_table import machine_description, write_section
from search_spaces.datasets import DATASETS
from sweep_service import store
from sweep_service.store.models import Sweep

HERE = Path(__file__).parent
SUBMISSIONS = 200
SUBMITTERS = 20
POLLERS = 50
RETRY_EVERY = 4  # one submission in four is sent twice with its Idempotency-Key
POSTGRES_URL = os.environ.get(
    "DICESWEEP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@contextmanager
def database(kind: str, home: Path) -> Iterator[str]:
    """The store's URL: a file under ``home``, or a new database on the server."""
    if kind == "sqlite":
        yield f"sqlite:///{home / 'dicesweep.db'}"
        return
    server = store.normalise_url(POSTGRES_URL)
    admin = store.create_engine_for(server, isolation_level="AUTOCOMMIT")
    name = f"dicesweep_load_{secrets.token_hex(4)}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def placeholder_datasets(root: Path) -> Path:
    """The catalogue's MRPC files, present (submission checks they exist; nothing
    reads them, since no trial runs)."""
    for relative in DATASETS["mrpc"].files.values():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("placeholder: no trial runs in this benchmark\n")
    return root


def owner_key(url: str) -> str:
    store.upgrade(url)
    engine = store.create_engine_for(url)
    with store.create_session_factory(engine)() as session:
        owner = store.create_owner(session, "load", max_concurrent_sweeps=1_000_000)
        key = store.create_api_key(session, owner.id).plain_key
    engine.dispose()
    return key


def wait_until(check: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.5)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


@dataclass
class Outcome:
    store: str
    post_latencies: list[float] = field(default_factory=list)
    poll_latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    accepted: dict[str, str] = field(default_factory=dict)  # idempotency key -> sweep id
    retries_same: int = 0
    retries: int = 0
    seconds: float = 0.0
    stored: int = 0
    submitted_once: int = 0
    submitted_more: int = 0
    never_submitted: int = 0
    to_submit_s: float = 0.0

    def row(self) -> str:
        def ms(values: list[float], q: float) -> str:
            return f"{percentile(values, q) * 1e3:.0f}"

        lost = SUBMISSIONS - len(set(self.accepted.values()))
        duplicated = self.stored - len(set(self.accepted.values()))
        return (
            f"| {self.store} | {SUBMISSIONS} (+{self.retries} retries) | "
            f"{len(self.poll_latencies)} | {lost} | {duplicated} | "
            f"{self.retries_same}/{self.retries} | {self.submitted_once}/{self.stored} | "
            f"{self.submitted_more} | {ms(self.post_latencies, 0.5)} | "
            f"{ms(self.post_latencies, 0.99)} | {ms(self.poll_latencies, 0.5)} | "
            f"{ms(self.poll_latencies, 0.99)} | {self.seconds:.1f} | {self.to_submit_s:.1f} |"
        )


async def load(port: int, key: str, outcome: Outcome) -> None:
    done = asyncio.Event()
    rng = random.Random(0)

    async def submitter(index: int) -> None:
        connection = await Connection.open(port)
        try:
            for n in range(index, SUBMISSIONS, SUBMITTERS):
                idempotency = f"load-{n}"
                body = json.dumps({"extends": "smoke", "description": f"load {n}"}).encode()
                raw = raw_request(
                    "POST", "/v1/sweeps", key, body, (f"Idempotency-Key: {idempotency}",)
                )
                sends = 2 if n % RETRY_EVERY == 0 else 1
                for attempt in range(sends):
                    started = time.perf_counter()
                    status, answer = await connection.request(raw)
                    outcome.post_latencies.append(time.perf_counter() - started)
                    outcome.statuses[status] += 1
                    if status not in (200, 201):
                        continue
                    sweep_id = json.loads(answer)["id"]
                    if attempt == 0:
                        outcome.accepted[idempotency] = sweep_id
                    else:
                        outcome.retries += 1
                        outcome.retries_same += outcome.accepted.get(idempotency) == sweep_id
        finally:
            connection.close()

    async def poller(index: int) -> None:
        connection = await Connection.open(port)
        listing = raw_request("GET", "/v1/sweeps?limit=20", key)
        try:
            while not done.is_set():
                ids = list(outcome.accepted.values())
                if ids and rng.random() < 0.7:
                    raw = raw_request("GET", f"/v1/sweeps/{rng.choice(ids)}", key)
                else:
                    raw = listing
                started = time.perf_counter()
                status, _ = await connection.request(raw)
                outcome.poll_latencies.append(time.perf_counter() - started)
                outcome.statuses[status] += 1
        finally:
            connection.close()

    pollers = [asyncio.create_task(poller(i)) for i in range(POLLERS)]
    started = time.perf_counter()
    await asyncio.gather(*(submitter(i) for i in range(SUBMITTERS)))
    outcome.seconds = time.perf_counter() - started
    done.set()
    await asyncio.gather(*pollers)


def run(kind: str) -> Outcome:
    outcome = Outcome(kind)
    with tempfile.TemporaryDirectory(prefix="dicesweep-load-") as folder:
        home = Path(folder)
        jobs_port, port = free_port(), free_port()
        jobs = subprocess.Popen(
            [sys.executable, str(HERE / "jobs_api.py"), "--port", str(jobs_port)],
            stdout=subprocess.DEVNULL,
        )
        with database(kind, home) as url:
            key = owner_key(url)
            env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
            env.update(
                DICESWEEP_HOME=str(home),
                DICESWEEP_PORT=str(port),
                DICESWEEP_DATABASE_URL=url,
                DICESWEEP_DATASETS_DIR=str(placeholder_datasets(home / "datasets")),
                DICESWEEP_RAY_JOBS_URL=f"http://127.0.0.1:{jobs_port}",
                DICESWEEP_RECONCILE_INTERVAL_S="1",
            )
            wait_until(lambda: answers(f"http://127.0.0.1:{jobs_port}/records"), "jobs API", 60)
            server = subprocess.Popen(
                [sys.executable, "-m", "sweep_service.cli", "serve"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_until(lambda: answers(f"http://127.0.0.1:{port}/healthz"), "service", 120)
                asyncio.run(load(port, key, outcome))
                ids = set(outcome.accepted.values())
                started = time.monotonic()

                def all_submitted() -> bool:
                    records = httpx.get(f"http://127.0.0.1:{jobs_port}/records").json()
                    return ids <= set(records["submitted"])

                wait_until(all_submitted, "every sweep submitted to the Jobs API", 300)
                outcome.to_submit_s = time.monotonic() - started
                time.sleep(3)  # a few more reconciler passes: nothing may be submitted again
                records = httpx.get(f"http://127.0.0.1:{jobs_port}/records").json()
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=60)
                jobs.send_signal(signal.SIGTERM)
                jobs.wait(timeout=60)
            engine = store.create_engine_for(url)
            with engine.connect() as connection:
                outcome.stored = connection.scalar(select(func.count()).select_from(Sweep)) or 0
            engine.dispose()
    counts = records["submitted"]
    outcome.submitted_once = sum(1 for job in counts if counts[job] == 1 and job in ids)
    outcome.submitted_more = sum(1 for job in counts if counts[job] > 1 or job not in ids)
    outcome.never_submitted = len(ids - set(counts))
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "reliability.md")
    args = parser.parse_args()
    outcomes = []
    for kind in args.stores.split(","):
        print(f"{kind}: {SUBMISSIONS} submissions, {SUBMITTERS} submitters, {POLLERS} pollers")
        outcomes.append(run(kind))
        print(f"{kind}: statuses {dict(outcomes[-1].statuses)}", flush=True)
    table = "\n".join(
        [
            "| store | submissions | polls | lost | duplicated | retries answered the "
            "first sweep | sweeps submitted to the Jobs API once | submitted twice or "
            "unknown | POST p50 (ms) | POST p99 (ms) | poll p50 (ms) | poll p99 (ms) | "
            "load (s) | last submission reached the Jobs API after (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(outcome.row() for outcome in outcomes),
        ]
    )
    statuses = "; ".join(
        f"{o.store}: " + ", ".join(f"{s} × {n}" for s, n in sorted(o.statuses.items()))
        for o in outcomes
    )
    print(table)
    write_section(
        args.docs,
        "Load: 200 submissions under polling",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_load.py`. "
        f"`dicesweep serve` (its store, its reconciler every 1 s) submitting to a Jobs API "
        f"that accepts and records jobs (`benchmarks/jobs_api.py`); {SUBMISSIONS} "
        f"submissions of `smoke` from {SUBMITTERS} concurrent keep-alive clients, each "
        f"with its own `Idempotency-Key`, one in {RETRY_EVERY} sent a second time as a "
        f"client's retry, while {POLLERS} clients poll (a sweep's detail, or the first "
        "page of the list) until the last submission is answered; clients, service and "
        "Jobs API share the machine. Lost: an accepted submission missing from the "
        "store; duplicated: a stored sweep no client was answered with.\n\n"
        + table
        + f"\n\nStatuses answered: {statuses}.\n",
    )


if __name__ == "__main__":
    main()
