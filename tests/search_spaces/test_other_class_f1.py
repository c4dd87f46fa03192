"""scripts/other_class_f1.py: the other class's F1 from the scored class's precision
and recall, by hand and on a published study's trials over real MRPC dev."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
other_class_f1 = script("other_class_f1").other_class_f1


def test_the_other_class_f1_by_hand() -> None:
    # 10 scored pairs, 20 others; 6 hits, 4 false alarms, 4 misses: precision = recall
    # = 60. The other class: 16 hits, 4 false alarms (the misses), 4 misses: F1 80.
    assert other_class_f1(60.0, 60.0, 10, 20) == pytest.approx(80.0)
    # Nothing predicted as the scored class: the other class is always predicted.
    assert other_class_f1(0.0, 0.0, 10, 20) == pytest.approx(200 * 20 / 50)


def test_a_published_mrpc_study_set_beside_the_glue_class(datasets_dir: Path) -> None:
    trials = ROOT / "docs" / "results" / "study2-mrpc-original-ce-focal-trials.csv"
    result = subprocess.run(
        [sys.executable, "scripts/other_class_f1.py", str(trials)],
        cwd=ROOT,
        env={**os.environ, "DICESWEEP_DATASETS_DIR": str(datasets_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "dev: 129 pairs of label 0, 279 of label 1" in result.stdout
    # ce seed 0 scored label 0 at F1 62.83 (precision 73.20, recall 55.04): 71 of the
    # 129 found, 26 false alarms, so label 1: 253 hits, 58 false alarms, 26 misses.
    assert "ce original seed=0: 62.83 -> 85.76" in result.stdout
