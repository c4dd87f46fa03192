"""Latency of the REST API under 50 concurrent clients, and the service's memory.

Starts ``dicesweep serve`` on embedded defaults (SQLite store, a local Ray head
owned by the service) in a temporary home, waits until it answers (Ray start-up
is not timed), then drives ``POST /v1/sweeps`` and ``GET /v1/sweeps/{id}`` from 50
concurrent clients on loopback. The reconciler's interval is set past the run,
so no sweep is started on Ray while the API is measured.

    python benchmarks/bench_api.py [--requests 2000]     # writes docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from docs_table import machine_description, write_section
from sweep_service import store

CLIENTS = 50
HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bench_key(home: Path) -> str:
    """An owner with quotas high enough for the run, and its API key."""
    url = f"sqlite:///{home / 'dicesweep.db'}"
    store.upgrade(url)
    sessions = store.create_session_factory(store.create_engine_for(url))
    with sessions() as session:
        owner = store.create_owner(
            session, "bench", max_concurrent_sweeps=1_000_000, max_trials_per_sweep=1000
        )
        return store.create_api_key(session, owner.id).plain_key


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def drive(base: str, key: str, requests: int, make: str, sweep_ids: list[str]) -> list[float]:
    """``requests`` calls from ``CLIENTS`` concurrent clients; returns latencies (s)."""
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as http:

        async def client(index: int) -> None:
            for n in range(index, requests, CLIENTS):
                start = time.perf_counter()
                if make == "post":
                    response = await http.post("/v1/sweeps", json={"extends": "smoke"})
                    sweep_ids.append(response.json()["id"])
                else:
                    response = await http.get(f"/v1/sweeps/{sweep_ids[n % len(sweep_ids)]}")
                latencies.append(time.perf_counter() - start)
                assert response.status_code in (200, 201), response.text

        await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per endpoint")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dicesweep-bench-") as folder:
        home = Path(folder)
        key = bench_key(home)
        port = free_port()
        env = dict(os.environ)
        env.update(
            DICESWEEP_HOME=str(home),
            DICESWEEP_PORT=str(port),
            DICESWEEP_RAY_DASHBOARD_PORT=str(free_port()),
            DICESWEEP_RECONCILE_INTERVAL_S="86400",
            RAY_AUTH_MODE="disabled",
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "sweep_service.cli", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if httpx.get(f"{base}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the service did not start"
                time.sleep(0.5)
            ids: list[str] = []
            asyncio.run(drive(base, key, 100, "post", ids))  # warm-up, not counted
            posts = asyncio.run(drive(base, key, args.requests, "post", ids))
            gets = asyncio.run(drive(base, key, args.requests, "get", ids))
            rss = psutil.Process(server.pid).memory_info().rss / 2**20
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    rows = [("GET /v1/sweeps/{id}", gets, 50.0), ("POST /v1/sweeps", posts, 200.0)]
    lines = [
        "| endpoint | requests | p50 (ms) | p99 (ms) | mean (ms) | target p99 (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, values, target in rows:
        lines.append(
            f"| {name} | {len(values)} | {percentile(values, 0.5) * 1e3:.1f} | "
            f"{percentile(values, 0.99) * 1e3:.1f} | {statistics.mean(values) * 1e3:.1f} | "
            f"{target:.0f} |"
        )
    table = (
        "\n".join(lines)
        + f"\n\nService process RSS after the run: **{rss:.0f} MB** (target ≤ 300)."
    )
    print(table)
    write_section(
        args.docs,
        "Service: API latency and memory",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_api.py "
        f"--requests {args.requests}`. `dicesweep serve` on embedded defaults (SQLite "
        f"store), {CLIENTS} concurrent keep-alive clients on loopback in a second process "
        'sharing the same 2 cores; POST bodies `{"extends": "smoke"}` (validated, '
        "stored as pending); GETs read the sweeps just created (store and MLflow look-ups).\n\n"
        + table
        + "\n",
    )


if __name__ == "__main__":
    main()
