"""The first sweep a newcomer runs: the ``smoke`` preset, timed end to end.

Two ways, interleaved (foreground, service, foreground, service, ...), each in a fresh
home, on the embedded defaults ``make demo`` uses:

- foreground: ``dicesweep run --preset smoke``, from the command to its exit (its own
  Ray head started and stopped inside it);
- service: ``POST /v1/sweeps {"extends": "smoke"}`` to a running ``dicesweep serve``
  (started before the clock, as ``make demo`` has it), from the POST until the sweep
  reads ``succeeded``.

Each run's table is read (the one ``run`` prints, or the API's grid) and checked: a
number in every cell, no degenerate trial. Prints a table and writes the "First
sweep: smoke" section of docs/benchmarks.md.

    python benchmarks/bench_smoke.py --pairs 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_table import machine_description, write_section

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "sweep_service.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(home: Path, datasets: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_"))}
    env.update(DICESWEEP_HOME=str(home), DICESWEEP_DATASETS_DIR=str(datasets))
    return env


def check_table(table: dict[str, Any]) -> str:
    """``"2 cells, 0 degenerate"`` after checking every cell holds a number."""
    cells = table["cells"]
    if not cells or not all(isinstance(cell["mean"], float) for cell in cells):
        raise SystemExit(f"a cell without a number: {table}")
    degenerate = [cell for cell in cells if cell["degenerate"]] + list(table["degenerate"])
    if degenerate:
        raise SystemExit(f"degenerate trials in the smoke sweep: {degenerate}")
    return f"{len(cells)} cells, " + ", ".join(
        f"{cell['row']} {cell['mean']:.2f}" for cell in cells
    )


def foreground(datasets: Path) -> tuple[float, str]:
    home = Path(tempfile.mkdtemp(prefix="dsw-b-", dir="/tmp"))
    try:
        env = environment(home, datasets)
        started = time.perf_counter()
        ran = subprocess.run(
            [*CLI, "run", "--preset", "smoke"], env=env, capture_output=True, text=True
        )
        elapsed = time.perf_counter() - started
        if ran.returncode != 0:
            raise SystemExit(f"dicesweep run failed ({ran.returncode}):\n{ran.stderr[-3000:]}")
        # The table it prints: a number in every cell (bold for the best), none flagged.
        cells = re.findall(r"^\| (\S+) +\| \**(\d+\.\d\d)\**.*?\|$", ran.stdout, re.M)
        if len(cells) != 2 or "degenerate" in ran.stdout:
            raise SystemExit(f"the smoke table does not show two learned cells:\n{ran.stdout}")
        return elapsed, "2 cells, " + ", ".join(f"{loss} {mean}" for loss, mean in cells)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def through_service(datasets: Path) -> tuple[float, str]:
    home = Path(tempfile.mkdtemp(prefix="dsw-b-", dir="/tmp"))
    port = free_port()
    env = environment(home, datasets) | {"DICESWEEP_PORT": str(port)}
    env["DICESWEEP_RAY_DASHBOARD_PORT"] = "0"
    log = (home / "serve.log").open("ab")
    service = subprocess.Popen([*CLI, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    try:
        deadline = time.monotonic() + 180
        while True:  # the service as `make demo` leaves it: up, its Ray head started
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if service.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the service did not start; see {home / 'serve.log'}")
            time.sleep(0.5)
        started = time.perf_counter()
        created = http.post("/v1/sweeps", json={"extends": "smoke"})
        created.raise_for_status()
        sweep_id = created.json()["id"]
        while True:
            status = http.get(f"/v1/sweeps/{sweep_id}").json()["status"]
            if status in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
        if status != "succeeded":
            raise SystemExit(f"the smoke sweep ended {status}; see {home / 'serve.log'}")
        table = http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "json"}).json()
        return elapsed, check_table(table)
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--datasets",
        type=Path,
        default=Path(os.environ.get("DICESWEEP_DATASETS_DIR", ROOT.parent / "shared" / "data")),
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {"foreground": [], "service": []}
    tables: dict[str, str] = {}
    for pair in range(args.pairs):
        for way, measure in (("foreground", foreground), ("service", through_service)):
            elapsed, table = measure(args.datasets)
            times[way].append(elapsed)
            tables[way] = table
            print(f"pair {pair + 1}: {way} {elapsed:.1f} s ({table})", flush=True)
    rows = [
        "| way | what is timed | median (s) | range (s) | the table |",
        "|---|---|---|---|---|",
        f"| foreground | `dicesweep run --preset smoke`, command to exit | "
        f"{statistics.median(times['foreground']):.1f} | "
        f"{min(times['foreground']):.1f}-{max(times['foreground']):.1f} | {tables['foreground']} |",
        '| service | `POST {"extends": "smoke"}` to `succeeded` on a running `dicesweep serve` | '
        f"{statistics.median(times['service']):.1f} | "
        f"{min(times['service']):.1f}-{max(times['service']):.1f} | {tables['service']} |",
    ]
    table = "\n".join(rows)
    print(table)
    body = (
        f"Machine: {machine_description()}, no GPU. Command: "
        f"`python benchmarks/bench_smoke.py --pairs {args.pairs}` ({args.pairs} runs each, "
        "interleaved, each in a fresh home on the embedded defaults; a trial's table read "
        "back and checked: a number in every cell, no degenerate trial). The target for a "
        "newcomer's first sweep is 90 s on 2 cores.\n\n" + table
    )
    write_section(ROOT / "docs" / "benchmarks.md", "First sweep: smoke", body)


if __name__ == "__main__":
    main()
