"""One sweep's driver process: its peak memory, its wall time to a finished ``smoke``
sweep, and whether it loaded torch. Runs ``python -m trainables.driver`` on the
resolved ``smoke`` preset as a Ray Job runs it (here starting its own local Ray),
sampling the process every 0.2 s.

    python benchmarks/bench_driver.py [--datasets ../shared/data]   # writes docs/reliability.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from docs_table import machine_description, write_section
from search_spaces.resolve import get_preset

HERE = Path(__file__).parent


def measure(datasets: Path) -> tuple[int, float, float, bool]:
    """(exit code, seconds to the end, peak RSS in MB, torch loaded) of one driver."""
    with tempfile.TemporaryDirectory(prefix="dsd-", dir="/tmp") as folder:
        home = Path(folder)
        (home / "spec.json").write_text(json.dumps(get_preset("smoke").model_dump(mode="json")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
        env.update(DICESWEEP_HOME=str(home), DICESWEEP_DATASETS_DIR=str(datasets))
        env.update(OMP_NUM_THREADS="1")
        command = [sys.executable, "-m", "trainables.driver", "--resolved-spec", "spec.json"]
        started = time.monotonic()
        driver = subprocess.Popen(
            [*command, "--sweep-id", "sw-bench-driver"],
            cwd=home,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        process, peak, torch = psutil.Process(driver.pid), 0, False
        while driver.poll() is None:
            try:
                peak = max(peak, process.memory_info().rss)
                torch = torch or "libtorch" in Path(f"/proc/{driver.pid}/maps").read_text()
            except (psutil.NoSuchProcess, OSError):
                pass
            time.sleep(0.2)
        return driver.returncode, time.monotonic() - started, peak / 2**20, torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--docs", type=Path, default=HERE.parent / "docs" / "reliability.md")
    args = parser.parse_args()
    code, seconds, peak, torch = measure(args.datasets)
    assert code == 0, f"the driver exited with {code}"
    table = (
        "| driver | peak RSS (MB) | smoke sweep, start to end (s) | torch loaded |\n"
        "|---|---:|---:|---|\n"
        f"| `python -m trainables.driver` | {peak:.0f} | {seconds:.1f} | "
        f"{'yes' if torch else 'no'} |"
    )
    print(table)
    write_section(
        args.docs,
        "A sweep's driver",
        f"Machine: {machine_description()}. Command: `python benchmarks/bench_driver.py`. "
        "The driver of the `smoke` preset (tiny-bert, 2 trials), run as a Ray Job runs it, "
        "starting its own local Ray (included in the time); its process sampled every "
        "0.2 s.\n\n" + table + "\n",
    )


if __name__ == "__main__":
    main()
