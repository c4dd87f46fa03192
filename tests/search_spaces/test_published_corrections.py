"""The dated corrections on the published study pages (docs/results), each recomputed
from the per-trial CSVs they correct and found, as written, on its page.

The pages were written by hand beside generated tables; these figures are the ones a
reader checks them by: the CSVs are the record, the report code's marks and
resolvable ranges (search_spaces.flags, search_spaces.reports.resolution) the rules.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from search_spaces.reports import paper_table

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
LOSSES_DOC = RESULTS.parent / "losses.md"
DSC = "dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true)"
SHORT = {"focal(gamma=2)": "focal", "dice(smooth=1)": "dice", DSC: "dsc"}
VARIANTS = ["original", "+positive", "+negative", "-negative", "+positive&negative"]
STUDY4 = ("ce-focal", "dice-dsc", "wce", "tversky")
ALPHA_SHARDS = ("a0.1-a0.2", "a0.4", "a0.5-a0.7", "a0.6", "a0.8-a0.9")


def trials(*names: str) -> pd.DataFrame:
    """The rows of the named shards' trials CSVs (``NAME-trials.csv``), one frame."""
    return pd.concat(
        [pd.read_csv(RESULTS / f"{name}-trials.csv") for name in names], ignore_index=True
    )


def final(rows: pd.DataFrame) -> pd.DataFrame:
    """The stage-2 (reported) trials; shards without stages are all reported."""
    return rows[rows["stage"] == "final"].reset_index(drop=True)


def page(name: str) -> str:
    """A page's text with its lines joined, so a phrase may wrap anywhere."""
    return " ".join((RESULTS / name).read_text().split())


def resolves(table: pd.DataFrame, row: str, column: str) -> str:
    """``"R, plausibly L–H"``: the cell's resolvable Δ and its 95% range."""
    low, high = table.attrs["resolvable_range"][(row, column)]
    return f"{table.attrs['resolvable'][(row, column)]:.2f}, plausibly {low:.2f}–{high:.2f}"


def table_cell(table: pd.DataFrame, row: str, column: str) -> str:
    """``"R (L–H)"`` as the study 2 corrections table prints it."""
    low, high = table.attrs["resolvable_range"][(row, column)]
    return f"{table.attrs['resolvable'][(row, column)]:.2f} ({low:.2f}–{high:.2f})"


def study1() -> pd.DataFrame:
    return trials(*(f"study1-conll-{s}" for s in ("ce", "dice", "dsc-tversky", "wce-focal")))


def variants() -> pd.DataFrame:
    names = ("ce", "focal-a", "focal-b", "dice-a", "dice-b", "dice-c", "dsc-a", "dsc-b")
    return trials(*(f"study2-mrpc-variants-{name}" for name in names))


def test_study1_dice_tuning_figure_is_the_csvs_86_1() -> None:
    rows = trials("study1-conll-dice")
    tuned = rows[(rows["stage"] == "tune") & (rows["tuned_learning_rate"] == 3e-4)]
    (value,) = tuned["eval_f1"]
    assert round(value, 3) == 86.149 and f"{value:.1f}" == "86.1"
    text = page("study1-conll.md")
    assert "is 86.149 in" in text and "83.5, 88.0, ~~86.2~~ 86.1 along the grid" in text
    assert "86.149 in its CSV, 86.1 rounded, not 86.2" in page("README.md")


CHECK_6EP = "study1-conll-dice-dsc-6ep"


def test_no_published_trial_stopped_on_a_plateau() -> None:
    # Studies 1-4 as first published; the 6-epoch check added since has its own page.
    shards = [p.name[: -len("-trials.csv")] for p in RESULTS.glob("study[1-4]-*-trials.csv")]
    every = trials(*(s for s in shards if s != CHECK_6EP))
    assert set(every["stop_reason"]) == {"epochs"}
    assert f"All {len(every)} trials of studies 1–4 stopped at their epoch limit" in page(
        "README.md"
    )
    counts = {
        "study1-conll.md": len(study1()),
        "study2-mrpc.md": len(variants()),
        "study3-conll.md": len(trials(*(f"study3-conll-tversky-{a}" for a in ALPHA_SHARDS))),
        "study4-gsd.md": len(trials(*(f"study4-gsd-{s}" for s in (*STUDY4, "ce-6ep", "dice-6ep")))),
    }
    assert counts == {
        "study1-conll.md": 36,
        "study2-mrpc.md": 60,
        "study3-conll.md": 24,
        "study4-gsd.md": 24,
    }
    for name, count in counts.items():
        assert f"All {count} trials" in page(name), name
    assert f"has since been done, for seed 0 of both ([{CHECK_6EP}]" in page("study1-conll.md")
    # The check itself: both trials on a fixed epoch budget, 6 epochs' worth of steps.
    check = trials(CHECK_6EP)
    assert set(check["stop_reason"]) == {"epochs"} and set(check["optimizer_steps"]) == {5268}


def test_studies_1_and_2_tuning_shards_trained_on_90_percent() -> None:
    held_out = set(final(study1())["optimizer_steps"])
    whole = set(trials(*(f"study3-conll-tversky-{a}" for a in ALPHA_SHARDS))["optimizer_steps"])
    assert (held_out, whole) == ({1580}, {1756})
    assert f"{1580 / 1756:.1%}" == "90.0%"
    tuning = final(trials(*(f"study2-mrpc-original-{s}" for s in ("ce-focal", "dice-dsc"))))
    ce = trials("study2-mrpc-variants-ce")
    original = set(ce[ce["variant"] == "original"]["optimizer_steps"])
    assert (set(tuning["optimizer_steps"]), original) == ({621}, {690})
    assert f"{621 / 690:.1%}" == "90.0%"
    readme = page("README.md")
    assert "1,580 optimiser steps a CoNLL-2003 trial against 1,756 on the whole file" in readme
    assert "621 a MRPC trial against 690 on the whole original file" in readme
    assert "90.0% both" in readme
    assert "1,580 optimiser steps a trial, against 1,756" in page("study1-conll.md")


def test_study1_resolvable_differences_with_their_ranges() -> None:
    table = paper_table(final(study1()))
    text = page("study1-conll.md")
    for row, name in [
        *SHORT.items(),
        ("wce(k=1)", "wce"),
        ("tversky(alpha=0.3,beta=0.7,scope=set)", "tversky"),
    ]:
        assert f"{name} {resolves(table, row, 'conll2003')}" in text, name
    p_values = [table.attrs["p_raw"][(row, "conll2003")] for row in (DSC, "dice(smooth=1)")]
    assert f"(p {p_values[0]:.3f} and {p_values[1]:.3f})" in text
    readme = page("README.md")
    figure, plausibly = resolves(table, DSC, "conll2003").split(", ")
    assert f"dsc's {figure} is {plausibly}" in readme


def test_study2_every_variant_cell_with_the_flagged_ce_seeds_kept() -> None:
    table = paper_table(final(variants()))
    text = page("study2-mrpc.md")
    for row, name in SHORT.items():
        cells = " | ".join(table_cell(table, row, column) for column in VARIANTS)
        assert f"| {name} | {cells} |" in text, name
    assert table.at["ce", ("-negative", "count")] == 3
    sig = table.attrs["p_raw"]
    for row, column, delta in [
        ("focal(gamma=2)", "-negative", "+9.63"),
        ("dice(smooth=1)", "-negative", "+10.96"),
    ]:
        assert f"{table.at[row, (column, 'delta')]:+.2f}" == delta
        figure = table.attrs["resolvable"][(row, column)]
        assert f"{delta}: paired p {sig[(row, column)]:.2f}, resolves {figure:.2f}" in text
    for row, name in (("dice(smooth=1)", "dice"), (DSC, "dsc")):
        figure = table.attrs["resolvable"][(row, "+negative")]
        delta = table.at[row, ("+negative", "delta")]
        line = f"{name} {delta:+.2f}: paired p {sig[(row, '+negative')]:.3f}, resolves {figure:.2f}"
        assert line.replace("-", "−", 1) in text, line


def test_study2_signs_that_leaving_the_below_no_skill_trials_out_flips() -> None:
    table = paper_table(final(variants()))
    changed = {(c["row"], c["column"]): c for c in table.attrs["sensitivity"]}
    assert set(changed) == {(DSC, "-negative"), ("dice(smooth=1)", "original")}
    text = page("study2-mrpc.md")
    dsc = changed[(DSC, "-negative")]
    assert (
        f"With it, Δ {dsc['delta']:+.2f} (resolves {dsc['resolvable']:.2f}). Without the"
        f" below-no-skill trials, Δ {dsc['delta_without']:+.2f}".replace("Δ -", "Δ −")
        in text
    )
    dice = changed[("dice(smooth=1)", "original")]
    assert (
        f"Δ {dice['delta']:+.2f} (resolves {dice['resolvable']:.2f}). Without it,"
        f" Δ {dice['delta_without']:+.2f} (resolves {dice['resolvable_without']:.2f})"
    ).replace("Δ -", "Δ −") in text
    assert "0 of the 60 are constant and 10 are below no-skill" in text


def test_study3_collapse_figures_are_those_of_docs_losses() -> None:
    rows = trials(*(f"study3-conll-tversky-{a}" for a in ALPHA_SHARDS))
    constant = rows[rows["eval_top_prediction_share"] >= 99.0]
    assert (len(constant), len(rows)) == (18, 24)
    alphas = constant["loss"].str.extract(r"alpha=([0-9.]+)")[0].astype(float)
    assert alphas.min() == 0.4
    text, losses_doc = page("study3-conll.md"), " ".join(LOSSES_DOC.read_text().split())
    for figure in ("0.87–0.88", "0.90–0.93", "0.92–0.95", "0.08–0.44", "2.5", "8.8"):
        assert figure in text and figure in losses_doc, figure
    assert "~~with `O` in the average a model that predicts `O` everywhere pays little" in text
    dice = final(trials("study1-conll-dice"))["eval_f1"].mean()
    linear = trials("study3-conll-dice-linear")
    assert (linear["eval_top_prediction_share"] >= 99.0).all()
    assert f"the squared denominator ({dice:.2f}) and collapsed with the linear one" in text


def test_study4_resolvable_ranges_and_the_6_epoch_spread() -> None:
    table = paper_table(trials(*(f"study4-gsd-{s}" for s in STUDY4)))
    text = page("study4-gsd.md")
    for row, name in [
        *SHORT.items(),
        ("wce(k=1)", "wce"),
        ("tversky(alpha=0.3,beta=0.7,scope=set)", "tversky"),
    ]:
        assert f"{name} {resolves(table, row, 'ud_zh_gsd')}" in text, name
    longer = paper_table(trials("study4-gsd-ce-6ep", "study4-gsd-dice-6ep"))
    assert f"dice resolves {resolves(longer, 'dice(smooth=1)', 'ud_zh_gsd')}" in text
    spread = {name: trials(f"study4-gsd-{name}-6ep")["eval_f1"].std() for name in ("ce", "dice")}
    assert f"std {spread['ce']:.2f} for ce and {spread['dice']:.2f} for dice" in text
    assert f"(std {spread['ce']:.2f} and {spread['dice']:.2f})" in page("README.md")
    assert not math.isnan(spread["ce"]) and spread["dice"] < 0.43 and spread["ce"] < 0.31


@pytest.mark.parametrize(
    "name", ["study1-conll.md", "study2-mrpc.md", "study3-conll.md", "study4-gsd.md"]
)
def test_each_corrected_page_opens_with_its_dated_corrections(name: str) -> None:
    lines = (RESULTS / name).read_text().splitlines()
    assert lines[0].startswith("# ") and lines[2] == "## Corrections (2026-11-27)"


def test_the_results_readme_opens_with_the_scoreboard_then_its_corrections() -> None:
    lines = (RESULTS / "README.md").read_text().splitlines()
    assert lines[0].startswith("# ") and lines[2] == "## The scoreboard"
    assert lines[6] == "## Corrections (2026-11-27)"


def test_study2_tuning_shards_resolvable_ranges_and_their_90_percent() -> None:
    rows = trials(*(f"study2-mrpc-original-{s}" for s in ("ce-focal", "dice-dsc", "dsc-official")))
    assert set(rows["stop_reason"]) == {"epochs"} and len(rows) == 30
    table = paper_table(final(rows))
    text = page("study2-mrpc-original.md")
    listed = text.replace("dice resolves", "dice")  # the list's first figure names itself
    for row, name in SHORT.items():
        assert f"{name} {resolves(table, row, 'mrpc')}" in listed, name
    p_values = ", ".join(
        f"{table.attrs['p_raw'][(row, 'mrpc')]:.2f}" for row in ("dice(smooth=1)", "focal(gamma=2)")
    )
    assert f"(paired p {p_values} and" in text
    assert f"All {len(rows)} trials stopped at the 3-epoch limit" in text
    assert set(rows["optimizer_steps"]) == {621} and "(621 optimiser steps a trial)" in text


@pytest.mark.parametrize("shard", ["ce", "dice", "dsc-tversky", "wce-focal"])
def test_study1_shard_pages_say_how_their_trials_stopped(shard: str) -> None:
    rows = trials(f"study1-conll-{shard}")
    assert set(rows["stop_reason"]) == {"epochs"} and set(rows["optimizer_steps"]) == {1580}
    text = page(f"study1-conll-{shard}.md")
    assert f"All {len(rows)} trials of this shard stopped at the 2-epoch limit" in text
