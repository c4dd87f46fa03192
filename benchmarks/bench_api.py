"""Latency of the REST API under 50 concurrent clients, and the service's memory.

Starts ``dicesweep serve`` on embedded defaults (SQLite store, a local Ray head
owned by the service) in a temporary home, waits until it answers (Ray start-up
is not timed), then drives ``POST /v1/sweeps`` and ``GET /v1/sweeps/{id}`` from 50
concurrent closed-loop clients (each sends its next request as soon as the last
answer arrives) on loopback. The reconciler's interval is set past the run, so no
sweep is started on Ray while the API is measured; after each round of POSTs its
sweeps are marked succeeded in the store, as if they had run, so the owner's
active-sweep count (checked by every POST) stays what a real owner has.

The clients are plain asyncio streams speaking HTTP/1.1 with keep-alive, in this
process: the load generator shares the machine with the service, so it must cost
as little as possible per request (an HTTP client library costs several times more
CPU than the request it measures on a 2-core machine). On a machine with two or
more cores the service runs on one core and the clients on another, so neither
measures the other's scheduling.

    python benchmarks/bench_api.py [--requests 2000] [--rounds 3]   # writes docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from sqlalchemy import update

from docs_table import machine_description, write_section
from sweep_service import store
from sweep_service.store.models import Sweep, SweepStatus

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


def finish_pending(home: Path) -> None:
    """Mark every pending sweep succeeded, as if it had run: an owner has a few
    sweeps active at a time, not thousands, and the quota check counts them."""
    engine = store.create_engine_for(f"sqlite:///{home / 'dicesweep.db'}")
    with engine.begin() as connection:
        connection.execute(
            update(Sweep)
            .where(Sweep.status == SweepStatus.PENDING)
            .values(status=SweepStatus.SUCCEEDED)
        )
    engine.dispose()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Connection:
    """One keep-alive HTTP/1.1 connection: a request out, its status and body back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def raw_request(
    method: str, path: str, key: str, body: bytes = b"", headers: tuple[str, ...] = ()
) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {key}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def drive(port: int, key: str, requests: int, make: str, sweep_ids: list[str]) -> list[float]:
    """``requests`` calls from ``CLIENTS`` concurrent clients; returns latencies (s)."""
    latencies: list[float] = []
    post = raw_request("POST", "/v1/sweeps", key, json.dumps({"extends": "smoke"}).encode())
    gets = [raw_request("GET", f"/v1/sweeps/{sweep_id}", key) for sweep_id in sweep_ids]
    connections = [await Connection.open(port) for _ in range(CLIENTS)]

    async def client(index: int) -> None:
        connection = connections[index]
        for n in range(index, requests, CLIENTS):
            start = time.perf_counter()
            status, body = await connection.request(post if make == "post" else gets[n % len(gets)])
            latencies.append(time.perf_counter() - start)
            assert status in (200, 201), body
            if make == "post":
                sweep_ids.append(json.loads(body)["id"])

    try:
        await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    finally:
        for connection in connections:
            connection.close()
    return latencies


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB."""
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_info().rss
    return total / 2**20


@dataclass
class Measured:
    """One endpoint's requests over every round."""

    name: str
    target_ms: float
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0  # wall time of its rounds
    cpu_seconds: float = 0.0  # the service process's CPU time in its rounds
    round_p99s: list[float] = field(default_factory=list)

    def run(self, server: psutil.Process, work: Callable[[], list[float]]) -> None:
        cpu, started = _cpu_seconds(server), time.perf_counter()
        latencies = work()
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += _cpu_seconds(server) - cpu
        self.latencies += latencies
        self.round_p99s.append(percentile(latencies, 0.99))

    def p(self, q: float) -> float:
        return percentile(self.latencies, q) * 1e3

    def row(self) -> str:
        count = len(self.latencies)
        return (
            f"| {self.name} | {count} | {count / self.seconds:.0f} | {self.p(0.5):.1f} | "
            f"{self.p(0.99):.1f} | {statistics.mean(self.latencies) * 1e3:.1f} | "
            f"{self.cpu_seconds / count * 1e3:.2f} | {self.target_ms:.0f} |"
        )

    def verdict(self) -> str:
        met = "met" if self.p(0.99) <= self.target_ms else "**not met**"
        rounds = ", ".join(f"{p99 * 1e3:.1f}" for p99 in self.round_p99s)
        limit = f"≤ {self.target_ms:.0f}"
        return f"{self.name} p99 {self.p(0.99):.1f} ms: {met} ({limit}; rounds: {rounds})"


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per endpoint and round")
    parser.add_argument("--rounds", type=int, default=3, help="POST then GET, this many times")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "benchmarks.md")
    args = parser.parse_args()
    # The targets of a service whose trials run for hours: no user notices less.
    gets = Measured("GET /v1/sweeps/{id}", 100.0)
    posts = Measured("POST /v1/sweeps", 250.0)
    with tempfile.TemporaryDirectory(prefix="dicesweep-bench-") as folder:
        home = Path(folder)
        key = bench_key(home)
        port = free_port()
        cores = sorted(os.sched_getaffinity(0))
        pinned = len(cores) >= 2
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
            preexec_fn=(lambda: os.sched_setaffinity(0, {cores[0]})) if pinned else None,
        )
        if pinned:
            os.sched_setaffinity(0, {cores[1]})
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
            service = psutil.Process(server.pid)
            ids: list[str] = []
            asyncio.run(drive(port, key, 100, "post", ids))  # warm-up, not counted
            finish_pending(home)
            asyncio.run(drive(port, key, 100, "get", list(ids)))
            for round_number in range(1, args.rounds + 1):
                posts.run(
                    service, lambda: asyncio.run(drive(port, key, args.requests, "post", ids))
                )
                finish_pending(home)
                gets.run(
                    service, lambda: asyncio.run(drive(port, key, args.requests, "get", list(ids)))
                )
                post_p99, get_p99 = posts.round_p99s[-1] * 1e3, gets.round_p99s[-1] * 1e3
                print(
                    f"round {round_number}/{args.rounds}: POST p99 {post_p99:.1f} ms, "
                    f"GET p99 {get_p99:.1f} ms",
                    flush=True,
                )
            rss = service.memory_info().rss / 2**20
            head_rss = tree_rss_mb(server.pid) - rss
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    lines = [
        "| endpoint | requests | req/s | p50 (ms) | p99 (ms) | mean (ms) | service CPU per "
        "request (ms) | target p99 (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        gets.row(),
        posts.row(),
    ]
    verdicts = [gets.verdict(), posts.verdict()]
    verdicts.append(f"RSS {rss:.0f} MB: " + ("met" if rss <= 300 else "**not met**") + " (≤ 300)")
    table = (
        "\n".join(lines)
        + f"\n\nService process RSS after the run: **{rss:.0f} MB** (target ≤ 300). "
        f"The local Ray head it owns runs in child processes: {head_rss:.0f} MB more.\n\n"
        "Targets, p99 over every round's requests:\n\n"
        + "\n".join(f"- {verdict}" for verdict in verdicts)
    )
    print(table)
    write_section(
        args.docs,
        "Service: API latency and memory",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_api.py "
        f"--requests {args.requests} --rounds {args.rounds}`. `dicesweep serve` on embedded "
        f"defaults (SQLite store), {CLIENTS} concurrent closed-loop keep-alive clients (raw "
        "asyncio HTTP/1.1, each sending its next request when the last answer arrives) in a "
        "second process; the service (and the Ray head it starts) on one core, the clients on "
        "another. Each round sends "
        f"{args.requests} POSTs, bodies "
        '`{"extends": "smoke"}` (validated, checked and stored as pending, one transaction '
        f"each; afterwards they are marked succeeded, as if they had run, so that the "
        "active-sweep count every POST checks stays an owner's real few), then "
        f"{args.requests} GETs of the sweeps created so far (the owner and the "
        "sweep through FastAPI's dependencies and the ORM: the plain path; the reconciler "
        "keeps the trials' progress in the store). No access log (the default). The "
        "service's CPU per request is its process time over the requests.\n\n" + table + "\n",
    )


if __name__ == "__main__":
    main()
