"""Many sweeps at once on one Ray head: ``--sweeps`` ``smoke`` sweeps submitted together
to ``dicesweep serve`` (its own local head), each to the end; the memory of the head's
process tree (the head, its drivers and trial workers) sampled every second.

    python benchmarks/bench_many_sweeps.py [--sweeps 20] [--datasets ../shared/data]
    # writes docs/reliability.md
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil
from bench_api import free_port, tree_rss_mb
from bench_load import answers, wait_until

from docs_table import machine_description, write_section

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--datasets", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "reliability.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsm-", dir="/tmp") as folder:
        home, port = Path(folder), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
        env.update(
            DICESWEEP_HOME=str(home),
            DICESWEEP_PORT=str(port),
            DICESWEEP_DATASETS_DIR=str(args.datasets),
            DICESWEEP_RAY_DASHBOARD_PORT=str(free_port()),
            OMP_NUM_THREADS="1",
        )
        keys = [sys.executable, "-m", "sweep_service.cli", "keys", "create", "--owner", "many"]
        quota = ["--max-concurrent-sweeps", str(args.sweeps)]
        made = subprocess.run([*keys, *quota], env=env, capture_output=True, text=True, check=True)
        auth = {"Authorization": f"Bearer {made.stdout.strip()}"}
        server = subprocess.Popen(
            [sys.executable, "-m", "sweep_service.cli", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: answers(f"{base}/healthz"), "the service", 180)
            service = psutil.Process(server.pid)
            idle = tree_rss_mb(server.pid) - service.memory_info().rss / 2**20
            started = time.monotonic()
            ids = []
            for _ in range(args.sweeps):
                spec = {"extends": "smoke"}
                created = httpx.post(f"{base}/v1/sweeps", json=spec, headers=auth, timeout=60)
                assert created.status_code == 201, created.text
                ids.append(created.json()["id"])
            peak, statuses = 0.0, Counter[str]()
            while True:
                peak = max(peak, tree_rss_mb(server.pid) - service.memory_info().rss / 2**20)
                page = {"limit": 100}
                listed = httpx.get(f"{base}/v1/sweeps", params=page, headers=auth, timeout=60)
                statuses = Counter(sweep["status"] for sweep in listed.json()["data"])
                done = statuses["succeeded"] + statuses["failed"]
                print(f"{time.monotonic() - started:.0f} s: {dict(statuses)}", flush=True)
                if done == args.sweeps or time.monotonic() - started > 3600:
                    break
                time.sleep(1)
            seconds = time.monotonic() - started
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)
    table = (
        "| sweeps at once | trials | succeeded | failed | wall time (s) | head tree idle (MB) "
        "| head tree peak (MB) |\n|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {args.sweeps} | {2 * args.sweeps} | {statuses['succeeded']} | {statuses['failed']} "
        f"| {seconds:.0f} | {idle:.0f} | {peak:.0f} |"
    )
    print(table)
    write_section(
        args.docs,
        f"{args.sweeps} sweeps at once on one head",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_many_sweeps.py "
        f"--sweeps {args.sweeps}`. `dicesweep serve` with its own local Ray head; "
        f"{args.sweeps} `smoke` sweeps (tiny-bert, 2 trials each) submitted at once over "
        "REST, each followed to its end. The head tree is every process under the service "
        "but the service itself: the Ray head, its drivers (one per running sweep) and "
        "the trials' workers, sampled every second.\n\n" + table + "\n",
    )


if __name__ == "__main__":
    main()
