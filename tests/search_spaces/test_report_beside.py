"""One loss parameter's cells in two set-ups side by side (search_spaces.reports.beside,
scripts/beside.py): study 5's entity-tag Tversky beside study 3's all-tag one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from search_spaces.reports.beside import beside_markdown, cells_by, parameter_of

ROOT = Path(__file__).resolve().parents[2]
CONSTANT = "gives one prediction to 100.0% of words"


def _row(label: str, seed: int, f1: float, stage: str = "final", **extra: object) -> dict:
    name = label.split("(")[0]
    return {"loss": label, "loss_name": name, "seed": seed, "stage": stage, "eval_f1": f1} | extra


def test_a_parameter_is_read_from_the_label_by_its_whole_name() -> None:
    label = "tversky(alpha=0.4,beta=0.6,classes=foreground,scope=set)"
    assert parameter_of(label, "alpha") == "0.4"
    assert parameter_of(label, "beta") == "0.6"
    assert parameter_of("dsc(alpha=0.01,smooth=1)", "smooth") == "1"
    assert parameter_of("ce", "alpha") is None
    assert parameter_of("focal(gamma=2)", "mma") is None  # not a suffix of "gamma"


def test_cells_count_every_seed_and_the_constant_ones() -> None:
    a1, a6 = "tversky(alpha=0.1,beta=0.9)", "tversky(alpha=0.6,beta=0.4)"
    rows = pd.DataFrame(
        [
            _row(a1, 0, 70.0, tuned_learning_rate=3e-5),
            _row(a1, 1, 80.0, tuned_learning_rate=3e-5),
            _row(a1, 0, 99.0, stage="tune", tuned_learning_rate=1e-4),  # left out
            _row(a6, 0, 0.0, degenerate_reason=CONSTANT, tuned_learning_rate=3e-5),
            _row(a6, 1, 30.0, tuned_learning_rate=3e-5),
            _row("dsc(alpha=0.01)", 0, 88.0, tuned_learning_rate=1e-4),  # another loss
        ]
    )
    cells = cells_by(rows, "alpha", "tversky")
    assert cells["value"].tolist() == ["0.1", "0.6"]
    first, second = cells.iloc[0], cells.iloc[1]
    assert (first["mean"], first["seeds"], first["constant"]) == (75.0, 2, 0)
    assert first["std"] == pytest.approx(7.0711, abs=1e-4)
    assert first["learning_rate"] == [3e-5]
    assert (second["mean"], second["seeds"], second["constant"]) == (15.0, 2, 1)
    with pytest.raises(ValueError, match="no final-stage trial of 'focal' has the parameter"):
        cells_by(rows, "alpha", "focal")


def test_the_table_lines_up_the_values_and_marks_what_did_not_run() -> None:
    first = cells_by(
        pd.DataFrame(
            [_row("tversky(alpha=0.1)", s, 60.0 + s, tuned_learning_rate=1e-4) for s in range(3)]
            + [_row("tversky(alpha=0.9)", s, 0.0, degenerate_reason=CONSTANT) for s in range(3)]
        ),
        "alpha",
        "tversky",
    )
    second = cells_by(pd.DataFrame([_row("tversky(alpha=0.1)", 0, 50.0)]), "alpha", "tversky")
    text = beside_markdown(first, second, "alpha", ("all tags", "entity tags"))
    assert "| 0.1 | 61.00 ± 1.00 | 0 of 3 | 1e-4 | 50.00 | 0 of 1 | – |" in text
    assert "| 0.9 | 0.00 ± 0.00 | 3 of 3 | – | not run |  |  |" in text


def test_the_script_reads_study_3_and_study_5_as_published(tmp_path: Path) -> None:
    results = ROOT / "docs" / "results"
    first = ["study3-conll-tversky-a0.1-a0.2", "study3-conll-tversky-a0.4"]
    second = ["study5-conll-fg-tversky-a0.1-a0.3"]
    for shard in first + second:
        for suffix in ("-trials.csv", "-spec.yaml"):
            shutil.copy(results / f"{shard}{suffix}", tmp_path)
    script = ROOT / "scripts" / "beside.py"
    command = [sys.executable, str(script), "--first", *first, "--second", *second]
    command += ["--loss", "tversky", "--parameter", "alpha", "--page", "page"]
    command += ["--results", str(tmp_path), "--names", "every tag", "entity tags"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    # Study 3 ran 1e-4 from its spec (no tuning stage): its rate comes from there.
    assert "| 0.1 | 79.84 ± 1.81 | 0 of 3 | 1e-4 | 53.89 ± 33.49 | 0 of 3 | 3e-5 |" in done.stdout
    assert "| 0.4 | 0.00 ± 0.00 | 3 of 3 | 1e-4 | not run |  |  |" in done.stdout
    page = (tmp_path / "page.md").read_text()
    assert page.startswith("# page\n\n## Beside the other set-up\n\n| alpha |")
