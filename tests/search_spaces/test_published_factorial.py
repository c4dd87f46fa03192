"""docs/results/studyD-conll-factorial.md against the CSVs it quotes: its generated section
is what scripts/factorial.py gives over the published shards, and each figure its prose
quotes is recomputed here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from search_spaces.reports.factorial import factorial
from search_spaces.reports.paired import paired_test
from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
PAGE = RESULTS / "studyD-conll-factorial.md"
TAGGER = "studyB-conll-tagger-s0-4"
SET_LEVEL = "studyD-conll-tagger-dsc-set"
MRC = ",".join(f"studyB-conll-mrc-12ep-s{seed}" for seed in range(5))
# The fourth cell, MRC-NER × per position, in two shards: seeds 0-1 (tuned), 2-4.
PER_POSITION = "studyD-conll-mrc-dsc-example-s0-1"
LAST_SEEDS = "studyD-conll-mrc-dsc-example-s2-4"
CELLS = [
    ("tagger", "per position", TAGGER, TAGGER),
    ("tagger", "set-level", SET_LEVEL, TAGGER),
    ("MRC-NER", "set-level", MRC, MRC),
    ("MRC-NER", "per position", f"{PER_POSITION},{LAST_SEEDS}", MRC),
]
LEVELS = (("tagger", "MRC-NER"), ("per position", "set-level"))


def _signed(value: float) -> str:
    """A figure as the prose writes it: two decimals, a sign, the minus as −."""
    return f"{value:+.2f}".replace("-", "−")


def _section(text: str, title: str) -> str:
    found = re.search(rf"^## {title}\n\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert found, title
    return found.group(1).strip()


def test_the_generated_section_is_the_scripts_output() -> None:
    command = [sys.executable, "scripts/factorial.py", "--factors", "formulation", "dsc recipe"]
    command += ["--levels", *LEVELS[0], "--levels", *LEVELS[1], "--loss", "dsc"]
    for cell in CELLS:
        command += ["--cell", *cell]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    assert _section(PAGE.read_text(), "The factorial") == run.stdout.strip()


def _cells() -> dict[tuple[int, int], pd.Series]:
    """Each cell's per-seed Δ (dsc − ce), keyed by its levels' indices."""
    cell_deltas = script("factorial").cell_deltas
    return {
        (LEVELS[0].index(a), LEVELS[1].index(b)): cell_deltas(RESULTS, loss, base, "dsc", "ce")
        for a, b, loss, base in CELLS
    }


def _ce() -> pd.Series:
    """Study B's MRC-NER ce trials' eval F1 by seed, the fourth cell's baseline."""
    ce = pd.concat(pd.read_csv(RESULTS / f"{shard}-trials.csv") for shard in MRC.split(","))
    return ce[(ce["loss_name"] == "ce") & (ce["stage"] != "tune")].set_index("seed")["eval_f1"]


def _and(parts: list[str]) -> str:
    """``"a, b and c"``."""
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def test_the_figures_the_prose_quotes() -> None:
    cells = _cells()
    found = factorial(cells, ("formulation", "dsc recipe"), LEVELS)
    prose = " ".join(_section(PAGE.read_text(), "What it says").split())
    recipe, formulation = found.contrasts["second@0"], found.contrasts["first@1"]
    for contrast in (recipe, formulation):
        p_value = f"{contrast.p_value:.3f}"
        interval = f"{_signed(contrast.ci_low)} to {_signed(contrast.ci_high)}"
        assert _signed(contrast.estimate) in prose
        assert f"{interval}, p {p_value}" in prose
    row = next(
        line
        for line in (RESULTS / "README.md").read_text().splitlines()
        if line.startswith("| **D, the factorial")
    )
    assert f"by {_signed(recipe.estimate)}** (95% Welch interval" in row
    assert f"({_signed(formulation.estimate)}, " in row
    assert (
        f"{_signed(cells[(0, 0)].mean())} per token, {_signed(cells[(0, 1)].mean())} set-level"
        in row
    )
    follow_up = " ".join((RESULTS / "studyB-conll-12ep.md").read_text().split())
    interval = f"{_signed(recipe.ci_low)} to {_signed(recipe.ci_high)}"
    assert f"by {_signed(recipe.estimate)} (95% Welch interval {interval})" in follow_up
    assert f"dsc is {_signed(cells[(0, 1)].mean())}" in prose
    assert f"it is {_signed(cells[(0, 0)].mean())}" in prose
    # The last evaluations: the set-level cell's ranges against its seed spread.
    rows = pd.read_csv(RESULTS / f"{SET_LEVEL}-trials.csv")
    final = rows[rows["stage"] != "tune"]
    ranges = final["last_evaluations_range"]
    assert f"moved {ranges.min():.2f}–{ranges.max():.2f}" in prose
    assert f"({final['eval_f1'].std():.2f};" in prose
    assert (ranges < final["eval_f1"].std()).all()
    shard = next(
        line
        for line in (RESULTS / "README.md").read_text().splitlines()
        if line.startswith("| D: formulation × dsc recipe")
    )
    mean, std = final["eval_f1"].mean(), final["eval_f1"].std()
    assert f"**{mean:.2f} ± {std:.2f}**, each trial within {ranges.max():.2f}" in shard
    tagger = pd.read_csv(RESULTS / f"{TAGGER}-trials.csv")
    tagger = tagger[tagger["stage"] != "tune"]
    spread = tagger.groupby("loss_name")["eval_f1"].transform("std")
    over = tagger["last_evaluations_range"] - spread
    assert f"up to {tagger['last_evaluations_range'].max():.2f}" in prose
    assert f"{int((over <= 0).sum())} of its {len(tagger)} within" in prose
    assert f"by at most {over.max():.2f} more" in prose


def test_the_fourth_cells_first_seeds_as_its_pages_quote_them() -> None:
    """MRC-NER × per position, seeds 0–1: its tuning, its trials and their Δ against study
    B's ce at the same seeds, as its page, the factorial page and the README quote them."""
    rows = pd.read_csv(RESULTS / f"{PER_POSITION}-trials.csv")
    tune = rows[rows["stage"] == "tune"].set_index("tuned_learning_rate")["eval_f1"]
    final = rows[rows["stage"] != "tune"].set_index("seed")
    ce = _ce()
    deltas = final["eval_f1"] - ce[final.index]
    ranges = final["last_evaluations_range"]
    assert sorted(final.index) == [0, 1] and set(final["tuned_learning_rate"]) == {1e-4}

    page = " ".join((RESULTS / f"{PER_POSITION}.md").read_text().split())
    tuning = f"{tune[1e-4]:.2f} at 1e-4 against {tune[3e-4]:.2f} at 3e-4"
    assert tuning in page
    trials = " and ".join(f"{final['eval_f1'][seed]:.2f}" for seed in (0, 1))
    assert f"seeds 0 and 1 reach {trials}" in page
    assert "Δ against ce " + " and ".join(_signed(deltas[seed]) for seed in (0, 1)) in page
    both = pd.concat([final.reset_index(), ce.reset_index().assign(loss_name="ce")])
    paired = paired_test(
        both[["loss_name", "dataset", "seed", "eval_f1"]].fillna({"dataset": "conll2003"}),
        "loss_name",
        "dataset",
    ).iloc[0]
    interval = f"{_signed(paired['ci_low'])} to {_signed(paired['ci_high'])}"
    assert f"mean {_signed(paired['mean_diff'])}, paired 95% interval {interval}" in page
    assert f"moved {ranges.min():.2f}–{ranges.max():.2f}" in page
    assert f"a spread of {final['eval_f1'].std():.2f} between them" in page
    assert (ranges > final["eval_f1"].std()).all()
    rate = rows[rows["tuned_learning_rate"] == 3e-4]
    assert rate["last_evaluations"].str.fullmatch(r"(\d+:0 ?){3}").all()
    assert (rate["eval_top_prediction_share"] == 100).all()

    row = next(
        line
        for line in (RESULTS / "README.md").read_text().splitlines()
        if line.startswith("| D: formulation × dsc recipe") and PER_POSITION in line
    )
    assert tuning in row
    assert f"**{final['eval_f1'].mean():.2f} ± {final['eval_f1'].std():.2f}**" in row
    assert f"about {-deltas.mean():.0f} below ce at the same seeds" in row
    factorial_page = " ".join(PAGE.read_text().split())
    assert f"[{PER_POSITION}]({PER_POSITION}.md)" in factorial_page


def test_the_fourth_cells_last_seeds_as_their_page_quotes_them() -> None:
    """MRC-NER × per position, seeds 2–4, in one stage at the rate seeds 0–1's tuning
    chose: its trials and their Δ against study B's ce at the same seeds."""
    spec = yaml.safe_load((RESULTS / f"{LAST_SEEDS}-spec.yaml").read_text())
    assert spec["tune"] is None and spec["training"]["learning_rate"] == 1e-4
    rows = pd.read_csv(RESULTS / f"{LAST_SEEDS}-trials.csv").set_index("seed")
    assert sorted(rows.index) == [2, 3, 4] and set(rows["stage"]) == {"final"}
    deltas = rows["eval_f1"] - _ce()[rows.index]
    ranges = rows["last_evaluations_range"]
    page = " ".join((RESULTS / f"{LAST_SEEDS}.md").read_text().split())
    assert "seeds 2, 3 and 4 reach " + _and([f"{f:.2f}" for f in rows["eval_f1"]]) in page
    assert "Δ against ce " + _and([_signed(d) for d in deltas]) in page
    ce = _ce()[rows.index].reset_index().assign(loss_name="ce", dataset="conll2003")
    trials = rows.reset_index().assign(dataset="conll2003")
    columns = ["loss_name", "dataset", "seed", "eval_f1"]
    paired = paired_test(pd.concat([trials[columns], ce[columns]]), "loss_name", "dataset")
    interval = f"{_signed(paired['ci_low'].iloc[0])} to {_signed(paired['ci_high'].iloc[0])}"
    mean = _signed(paired["mean_diff"].iloc[0])
    assert f"mean {mean}, paired 95% interval {interval} over these three seeds" in page
    assert f"moved {ranges.min():.2f}–{ranges.max():.2f}" in page
    assert f"a spread of {rows['eval_f1'].std():.2f} between them" in page
    row = next(
        line
        for line in (RESULTS / "README.md").read_text().splitlines()
        if line.startswith("| D: formulation × dsc recipe") and LAST_SEEDS in line
    )
    assert f"**{rows['eval_f1'].mean():.2f} ± {rows['eval_f1'].std():.2f}**" in row
    assert f"about {-deltas.mean():.0f} below ce at the same seeds" in row


def test_the_whole_factorial_as_its_page_and_the_readme_quote_it() -> None:
    """With all four cells: the interaction, the recipe's effect in MRC-NER, the
    formulation's at per position, and the main effects, as the prose quotes them."""
    cells = _cells()
    assert all(len(deltas) == 5 for deltas in cells.values())
    found = factorial(cells, ("formulation", "dsc recipe"), LEVELS)
    prose = " ".join(_section(PAGE.read_text(), "What it says").split())
    for key in ("interaction", "second@1", "first@0"):
        c = found.contrasts[key]
        quoted = f"{_signed(c.estimate)} (95% Welch interval {_signed(c.ci_low)} to "
        assert quoted + f"{_signed(c.ci_high)}, p {c.p_value:.3f})" in prose, key
    for key in ("first", "second"):
        assert f"main effect {_signed(found.contrasts[key].estimate)}" in prose, key
    per_position = cells[(1, 0)]
    # "still rising at 12 epochs": each of the cell's trials' last three evaluations
    # above the one before.
    trials = pd.concat(
        pd.read_csv(RESULTS / f"{shard}-trials.csv") for shard in (PER_POSITION, LAST_SEEDS)
    )
    for evaluations in trials[trials["stage"] != "tune"]["last_evaluations"]:
        scores = [float(pair.split(":")[1]) for pair in evaluations.split()]
        assert scores == sorted(scores) and len(set(scores)) == 3, evaluations
    assert f"dsc's Δ is {_signed(per_position.mean())} ± {per_position.std():.2f}" in prose
    row = next(
        line
        for line in (RESULTS / "README.md").read_text().splitlines()
        if line.startswith("| **D, the factorial")
    )
    interaction = found.contrasts["interaction"]
    assert f"interaction {_signed(interaction.estimate)}" in row
    assert f"{_signed(found.contrasts['second@1'].estimate)} in MRC-NER" in row
