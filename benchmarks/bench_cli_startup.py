"""How long ``dicesweep submit`` takes to say a refusal: the command's start-up, before
and after the remote commands stopped importing the store (SQLAlchemy, Alembic) and
the settings' dependencies at start.

Starts ``dicesweep serve`` on embedded defaults in a temporary home (not timed), then
runs ``python -m sweep_service.cli submit`` on a spec with a misspelt key (the service
refuses it: 422, exit 2) with the sources of ``--before`` first on ``PYTHONPATH``, and
with this checkout's, interleaved, alternating which goes first in each pair, so that
a slow moment of the machine falls on both alike. Each time is the command's wall
time; both must say the same refusal.

    git archive COMMIT sweep_service search_spaces | tar -x -C /tmp/before
    python benchmarks/bench_cli_startup.py --before /tmp/before [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_api import bench_key, free_port
from bench_hostile import serve, wait_until_up

from docs_table import machine_description, write_section

HERE = Path(__file__).parent
SPEC = "name: probe\nextends: smoke\ntrainig: {epochs: 1}\n"  # misspelt: a 422


def refusal(sources: Path, spec: Path, env: dict[str, str]) -> tuple[float, str]:
    """The wall time of one ``submit`` with ``sources`` first on the path, and what
    it said (exit 2 and one line, or the run is aborted)."""
    started = time.perf_counter()
    said = subprocess.run(
        [sys.executable, "-m", "sweep_service.cli", "submit", str(spec)],
        env={**env, "PYTHONPATH": str(sources)},
        cwd=spec.parent,  # not a checkout: `-m` puts the working folder first on the path
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seconds = time.perf_counter() - started
    assert said.returncode == 2, (sources, said.returncode, said.stderr)
    return seconds, said.stderr


def summary(seconds: list[float]) -> str:
    """``0.47 | 0.45–0.52``: median and range in seconds, as table cells."""
    return f"{statistics.median(seconds):.2f} | {min(seconds):.2f}–{max(seconds):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the earlier sources")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "benchmarks.md")
    args = parser.parse_args()
    after = HERE.parent
    times: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="dicesweep-startup-") as folder:
        home, port = Path(folder), free_port()
        key = bench_key(home)
        server = serve(home, port)
        base = f"http://127.0.0.1:{port}"
        spec = home / "spec.yaml"
        spec.write_text(SPEC)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
        env.update(DICESWEEP_HOME=str(home), DICESWEEP_API_URL=base, DICESWEEP_API_KEY=key)
        try:
            wait_until_up(base)
            refusal(after, spec, env)  # warm-up: the file system's caches
            for pair in range(args.pairs):
                order = [("before", args.before), ("after", after)]
                said = {}
                for name, sources in order if pair % 2 == 0 else order[::-1]:
                    seconds, said[name] = refusal(sources, spec, env)
                    times[name].append(seconds)
                assert said["before"] == said["after"], said
                print(
                    f"pair {pair + 1}: before {times['before'][-1]:.2f} s, "
                    f"after {times['after'][-1]:.2f} s",
                    flush=True,
                )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    lines = [
        "| sources | median (s) | range (s) | runs |",
        "|---|---:|---:|---:|",
        f"| before | {summary(times['before'])} | {len(times['before'])} |",
        f"| after | {summary(times['after'])} | {len(times['after'])} |",
    ]
    body = (
        f"Measured on {machine_description()} by `python benchmarks/bench_cli_startup.py "
        f"--before DIR --pairs {args.pairs}` (DIR: the sources of the commit before the "
        "remote commands' imports were trimmed): `dicesweep submit` on a spec with a "
        "misspelt key against `dicesweep serve` on embedded defaults, which refuses it "
        "(422, exit 2, the same line from both); each pair runs both, alternating which "
        "goes first. The remote commands now import the client (httpx) and the spec "
        "reader (pydantic only to word a refused spec), not the store (SQLAlchemy, "
        "Alembic) nor pydantic-settings; torch, Ray, pandas, matplotlib and MLflow were out "
        "of it already and stay out "
        "(`tests/service/test_cli_scripts.py`).\n\n" + "\n".join(lines) + "\n"
    )
    write_section(args.docs, "CLI: a refusal from dicesweep submit", body)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
