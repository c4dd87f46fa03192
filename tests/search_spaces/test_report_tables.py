"""Tables over trial rows, checked against values worked out by hand."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from search_spaces.reports import (
    loss_label,
    paired_test,
    paper_table,
    pivot_table,
    plot_kind,
    plot_title,
    row_from_trial,
    to_csv,
    to_html,
    to_json,
    to_latex,
    to_markdown,
    to_png,
    with_failures,
)
from search_spaces.reports.captions import notes
from search_spaces.reports.grid import mark

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FAILED = {
    "loss": "focal(gamma=2)",
    "dataset": "mrpc",
    "variant": "original",
    "seed": 4,
    "reason": "diverged <at step 3>",
}

# eval_f1 per (loss, variant) over seeds 0, 1, 2, with mean and std (n - 1):
#   ce, original:                [80, 82, 84]  82, 2
#   ce, +positive&negative:      [70, 71, 72]  71, 1
#   dsc, original:               [81, 84, 84]  83, √3   delta +1
#   dsc, +positive&negative:     [75, 75, 78]  76, √3   delta +5
#   focal, original:             [79]          79, NaN  delta -3  (no +positive&negative)
F1 = {
    ("ce", "original"): [80, 82, 84],
    ("ce", "+positive&negative"): [70, 71, 72],
    ("dsc(alpha=0.1)", "original"): [81, 84, 84],
    ("dsc(alpha=0.1)", "+positive&negative"): [75, 75, 78],
    ("focal(gamma=2)", "original"): [79],
}


@pytest.fixture
def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"loss": loss, "variant": variant, "seed": seed, "eval_f1": float(value)}
            for (loss, variant), values in F1.items()
            for seed, value in enumerate(values)
        ]
    )


@pytest.fixture
def table(rows: pd.DataFrame) -> pd.DataFrame:
    return pivot_table(rows, "loss", "variant")


def test_pivot_means_stds_counts_and_deltas(table: pd.DataFrame) -> None:
    assert list(table.index) == ["ce", "dsc(alpha=0.1)", "focal(gamma=2)"]
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == [
        "original",
        "+positive&negative",
    ]
    original = table["original"]
    assert original.loc["ce"].tolist()[:3] == [82.0, 2.0, 3]
    assert math.isnan(original.at["ce", "delta"])
    assert original.at["dsc(alpha=0.1)", "mean"] == 83.0
    assert original.at["dsc(alpha=0.1)", "std"] == pytest.approx(math.sqrt(3))
    assert original.at["dsc(alpha=0.1)", "delta"] == 1.0
    assert original.at["focal(gamma=2)", "delta"] == -3.0
    assert math.isnan(original.at["focal(gamma=2)", "std"])
    both = table["+positive&negative"]
    assert (both.at["dsc(alpha=0.1)", "mean"], both.at["dsc(alpha=0.1)", "delta"]) == (76.0, 5.0)
    assert math.isnan(both.at["focal(gamma=2)", "mean"])
    assert table.attrs == {
        "metric": "eval_f1",
        "rows_key": "loss",
        "cols_key": "variant",
        "baseline": "ce",
        "datasets": [],
        "seeds": [0, 1, 2],
    }


def test_failed_trials_are_left_out(rows: pd.DataFrame) -> None:
    failed = pd.DataFrame([{"loss": "ce", "variant": "original", "seed": 3, "eval_f1": None}])
    table = pivot_table(pd.concat([rows, failed]), "loss", "variant")
    assert table.at["ce", ("original", "count")] == 3


def test_pivot_without_a_baseline_and_with_a_missing_one(rows: pd.DataFrame) -> None:
    table = pivot_table(rows, "loss", "variant", baseline=None)
    assert table.xs("delta", axis=1, level="stat").isna().all().all()
    with pytest.raises(ValueError, match="baseline 'wce' is not a loss"):
        pivot_table(rows, "loss", "variant", baseline="wce")
    with pytest.raises(ValueError, match=r"rows lack column\(s\) \['dataset'\]"):
        pivot_table(rows, "loss", "dataset")


def test_table10_layout_sorts_the_parameter_numerically() -> None:
    rows = pd.DataFrame(
        [
            {"param_alpha": alpha, "dataset": dataset, "seed": 0, "eval_f1": 80 + 10 * alpha}
            for alpha in (0.9, 0.1, 0.5)
            for dataset in ("squad_v1", "conll2003")
        ]
    )
    table = pivot_table(rows, "param_alpha", "dataset", baseline=None)
    assert list(table.index) == [0.1, 0.5, 0.9]
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == ["conll2003", "squad_v1"]
    assert table.at[0.5, ("squad_v1", "mean")] == 85.0


def test_markdown(table: pd.DataFrame) -> None:
    text = to_markdown(table)
    lines = text.splitlines()
    assert [cell.strip() for cell in lines[0].split("|")[1:4]] == [
        "loss",
        "original",
        "+positive&negative",
    ]
    assert "| ce             | 82.00 ± 2.00 " in text
    # The best mean of each column in bold: dsc in both.
    assert "**83.00 ± 1.73 (+1.00)**" in text
    assert "**76.00 ± 1.73 (+5.00)**" in text
    assert "| focal(gamma=2) | 79.00 (-3.00)" in text
    assert "eval_f1: mean ± std over 3 seeds (Δ against ce); best per column in bold." in text


def test_significance_marks_follow_the_paired_test(rows: pd.DataFrame) -> None:
    # dsc - ce by seed: original 1, 2, 0 (t = √3, p = 0.23: no mark); +positive&negative
    # 5, 4, 6 (t = 5√3, p = 0.013: †, not ‡).
    table = paper_table(rows.assign(dataset="mrpc"), title="table8-mrpc")
    raw = 2 * stats.t.sf(5 * math.sqrt(3), df=2)
    assert table.attrs["p_raw"][("dsc(alpha=0.1)", "+positive&negative")] == pytest.approx(raw)
    # Two Δs tested (focal has one seed a cell): Holm doubles the smaller p, still < 0.05.
    assert table.attrs["significance"][("dsc(alpha=0.1)", "+positive&negative")] == (
        pytest.approx(2 * raw)
    )
    text = to_markdown(table)
    assert "**76.00 ± 1.73 (+5.00)**† |" in text
    assert "**83.00 ± 1.73 (+1.00)** |" in text
    assert (
        "‡ p < 0.01, † p < 0.05 (paired t-test against ce over seeds, Holm-adjusted over the"
        " table's 2 tested Δs)" in text
    )
    assert "dsc(alpha=0.1) & \\textbf{83.00 $\\pm$ 1.73 (+1.00)} & " in to_latex(table)
    assert "\\textbf{76.00 $\\pm$ 1.73 (+5.00)}$^\\dagger$ \\\\" in to_latex(table)
    assert mark(0.009) == "‡" and mark(0.049) == "†" and mark(0.05) == "" and mark(None) == ""


def test_html_escapes_and_marks(rows: pd.DataFrame) -> None:
    table = paper_table(rows.assign(dataset="mrpc"))
    html = to_html(with_failures(table, [FAILED]))
    assert html.startswith('<table class="grid"><caption>eval_f1: mean ± std over 3 seeds')
    assert "<th>+positive&amp;negative</th>" in html
    assert "<td><strong>76.00 ± 1.73 (+5.00)</strong><sup>†</sup></td>" in html
    assert "<td>82.00 ± 2.00</td>" in html
    assert "<li>focal(gamma=2) seed=4 on mrpc original: diverged &lt;at step 3&gt;</li>" in html


def test_csv_parses_back(table: pd.DataFrame) -> None:
    parsed = pd.read_csv(io.StringIO(to_csv(table)))
    columns = [
        *("loss", "variant", "mean", "std", "count", "seeds", "delta"),
        *("degenerate", "below_no_skill", "ci_low", "ci_high", "p_value", "p_holm"),
    ]
    assert list(parsed.columns) == columns
    dsc = parsed[(parsed["loss"] == "dsc(alpha=0.1)") & (parsed["variant"] == "original")]
    assert dsc[["mean", "count", "delta"]].iloc[0].tolist() == [83.0, 3.0, 1.0]
    assert len(parsed) == 6


def test_latex_is_a_booktabs_table_with_caption_and_label(table: pd.DataFrame) -> None:
    table.attrs["title"] = "table8 mrpc"
    text = to_latex(table)
    assert text.startswith("\\begin{table}[t]\n\\centering\n\\begin{tabular}{lrr}\n\\toprule\n")
    assert "loss & original & +positive\\&negative \\\\" in text
    assert "\\midrule" in text
    assert "ce & 82.00 $\\pm$ 2.00 & 71.00 $\\pm$ 1.00 \\\\" in text
    assert (
        "\\caption{table8 mrpc: eval\\_f1: mean $\\pm$ std over 3 seeds ($\\Delta$ against" in text
    )
    assert text.endswith("\\bottomrule\n\\end{tabular}\n\\caption{" + text.split("\\caption{")[1])
    assert "\\label{tab:table8-mrpc}\n\\end{table}\n" in text


def test_json_round_trips(table: pd.DataFrame) -> None:
    payload = json.loads(to_json(table))
    assert json.loads(json.dumps(payload)) == payload
    assert payload["rows"] == ["ce", "dsc(alpha=0.1)", "focal(gamma=2)"]
    assert payload["columns"] == ["original", "+positive&negative"]
    assert payload["baseline"] == "ce"
    cells = {(cell["row"], cell["column"]): cell for cell in payload["cells"]}
    assert cells[("ce", "original")] == {
        "row": "ce",
        "column": "original",
        "mean": 82.0,
        "std": 2.0,
        "count": 3,
        "seeds": 3,
        "delta": None,
        "p_value": None,
        "p_holm": None,
        "ci": None,
        "resolvable": None,
        "resolvable_range": None,
        "degenerate": 0,
        "below_no_skill": 0,
    }
    assert cells[("focal(gamma=2)", "+positive&negative")]["mean"] is None


@pytest.mark.parametrize("kind", ["heatmap", "line"])
def test_png(table: pd.DataFrame, kind: str, tmp_path: Path) -> None:
    target = tmp_path / f"{kind}.png"
    png = to_png(table, target, kind=kind)  # type: ignore[arg-type]
    assert png.startswith(PNG_SIGNATURE)
    assert target.read_bytes() == png


def test_plots_are_titled_and_parameter_lines_have_std_bands() -> None:
    from matplotlib.figure import Figure

    from search_spaces.reports.plots import _draw_lines

    rows = pd.DataFrame(
        [
            {
                "loss": f"tversky(alpha={alpha})",
                "loss_name": "tversky",
                "param_alpha": alpha,
                "dataset": name,
                "variant": "original",
                "seed": seed,
                "eval_f1": 80 + alpha + seed,
            }
            for alpha in (0.1, 0.5, 0.9)
            for seed in (0, 1)
            for name in ("conll2003", "squad_v1")
        ]
    )
    table = paper_table(rows, title="table10")
    assert plot_kind(table) == "line"
    assert plot_title(table) == "eval_f1 on conll2003, squad_v1 — table10"
    axes = Figure().add_subplot()
    _draw_lines(axes, table)
    assert len(axes.lines) == 2  # a line per data set, over alpha
    assert len(axes.collections) == 2  # and its ±std band
    assert list(axes.lines[0].get_xdata()) == [0.1, 0.5, 0.9]
    assert axes.get_xlabel() == "alpha"


def test_png_of_a_parameter_sweep() -> None:
    rows = pd.DataFrame(
        [
            {
                "param_alpha": alpha,
                "dataset": "conll2003",
                "seed": seed,
                "eval_f1": 80 + alpha + seed,
            }
            for alpha in (0.1, 0.5)
            for seed in (0, 1)
        ]
    )
    png = to_png(pivot_table(rows, "param_alpha", "dataset", baseline=None), kind="line")
    assert png.startswith(PNG_SIGNATURE)


def test_png_refuses_an_unknown_kind(table: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="unknown plot kind 'pie'; valid: heatmap, line"):
        to_png(table, kind="pie")  # type: ignore[arg-type]


def test_paired_test_against_hand_computed_t(rows: pd.DataFrame) -> None:
    result = paired_test(rows, "loss", "variant").set_index(["loss", "variant"])
    # dsc - ce on original, by seed: 1, 2, 0: mean 1, sd 1, t = 1 / (1 / √3) = √3.
    line = result.loc[("dsc(alpha=0.1)", "original")]
    assert line["n_pairs"] == 3
    assert line["mean_diff"] == 1.0
    assert line["t_statistic"] == pytest.approx(math.sqrt(3))
    assert line["p_value"] == pytest.approx(2 * stats.t.sf(math.sqrt(3), df=2))
    # +positive&negative: 5, 4, 6: mean 5, sd 1, t = 5√3.
    # The smallest difference 3 pairs with sd 1 resolve (5%, 80% power): about 3.1.
    expected = (stats.t.ppf(0.975, 2) + stats.t.ppf(0.80, 2)) / math.sqrt(3)
    assert line["resolvable"] == pytest.approx(expected) == pytest.approx(3.097, abs=1e-3)
    line = result.loc[("dsc(alpha=0.1)", "+positive&negative")]
    assert line["t_statistic"] == pytest.approx(5 * math.sqrt(3))
    # focal has one seed on original and none on the other column: no test.
    assert result.loc[("focal(gamma=2)", "original"), "n_pairs"] == 1
    assert math.isnan(result.loc[("focal(gamma=2)", "original"), "p_value"])
    assert result.loc[("focal(gamma=2)", "+positive&negative"), "n_pairs"] == 0
    assert ("ce", "original") not in result.index


def test_the_notes_and_json_state_the_smallest_delta_the_seeds_resolve(
    rows: pd.DataFrame,
) -> None:
    table = paper_table(rows)
    (line,) = [n for n in notes(table) if n.startswith("The smallest Δ these seeds detect")]
    # Per cell with several columns; focal (one seed) has no test and is not named.
    assert "dsc(alpha=0.1) (original) 3.10, plausibly 1.61–19.46" in line
    assert "focal" not in line
    cells = {(c["row"], c["column"]): c for c in json.loads(to_json(table))["cells"]}
    assert cells[("dsc(alpha=0.1)", "original")]["resolvable"] == pytest.approx(3.097, abs=1e-3)
    assert cells[("dsc(alpha=0.1)", "original")]["resolvable_range"] == pytest.approx(
        [1.612, 19.46], abs=1e-2
    )
    assert cells[("ce", "original")]["resolvable"] is None


def test_paired_test_pairs_by_seed(rows: pd.DataFrame) -> None:
    shuffled = rows.sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(
        paired_test(shuffled, "loss", "variant"), paired_test(rows, "loss", "variant")
    )


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        ({"name": "ce"}, "ce"),
        ({"name": "focal", "gamma": 2.0}, "focal(gamma=2)"),
        ({"name": "tversky", "beta": 0.7, "alpha": 0.3}, "tversky(alpha=0.3,beta=0.7)"),
        (
            {"name": "dsc", "alpha": 0.01, "square": True, "scope": "set"},
            "dsc(alpha=0.01,scope=set,square=true)",
        ),
        ({"name": "wce", "k": 1.0, "class_counts": [9, 1]}, "wce(k=1)"),
    ],
)
def test_loss_label(spec: dict[str, object], label: str) -> None:
    assert loss_label(spec) == label


def test_row_from_trial() -> None:
    config = {
        "sweep_id": "s",
        "dataset": "mrpc",
        "variant": "+positive",
        "model": "tiny-bert",
        "loss": {"name": "dsc", "alpha": 0.1},
        "seed": 2,
        "training": {},
    }
    metrics = {"eval_f1": 81.5, "eval_accuracy": 77.0, "time_total_s": 3.0}
    row = row_from_trial(config, metrics)
    setup = {key: row.pop(key) for key in list(row) if key.startswith("setup_")}
    assert setup["setup_formulation"] == "pair classifier"
    assert setup["setup_train_data"] == "mrpc train.tsv, whole file"
    assert row == {
        "loss": "dsc(alpha=0.1)",
        "loss_name": "dsc",
        "param_alpha": 0.1,
        "dataset": "mrpc",
        "variant": "+positive",
        "seed": 2,
        "stage": "final",  # every trial of a sweep without tune
        "eval_f1": 81.5,
        "eval_accuracy": 77.0,
    }


def test_a_heatmap_of_long_loss_labels_wraps_them_and_grows_to_fit() -> None:
    from PIL import Image

    from search_spaces.reports.plots import wrap_label

    official = "dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true)"
    wrapped = "dsc(alpha=0.01,classes=sum,\nscope=example,smooth=1,\nsquare=true)"
    assert wrap_label(official) == wrapped
    assert wrap_label("focal(gamma=2)") == "focal(gamma=2)"
    losses = ["ce", "wce(k=1)", "focal(gamma=2)", "dice(smooth=1)", official]
    losses += ["tversky(alpha=0.3,beta=0.7,scope=set)", "dsc(alpha=0.1,scope=set,smooth=1)"]
    rows = pd.DataFrame(
        [
            {"loss": loss, "dataset": dataset, "seed": seed, "eval_f1": 50.0 + seed + i}
            for i, loss in enumerate(losses)
            for dataset in ("conll2003", "ud_zh_gsd")
            for seed in (0, 1)
        ]
    )
    few = to_png(pivot_table(rows[rows["loss"].isin(losses[:3])], "loss", "dataset"))
    many = to_png(pivot_table(rows, "loss", "dataset"))
    (few_width, few_height), (width, height) = (Image.open(io.BytesIO(p)).size for p in (few, many))
    assert width >= few_width and height > few_height  # each row keeps its room


def test_rows_carry_the_optimiser_steps_and_tables_show_them_per_row() -> None:
    config = {
        "sweep_id": "sw-1",
        "model": "tiny-bert",
        "training": {},
        "dataset": "mrpc",
        "variant": "original",
        "loss": {"name": "ce"},
        "seed": 0,
    }
    assert (
        row_from_trial(config, {"eval_f1": 80.0, "optimizer_steps": 460})["optimizer_steps"] == 460
    )
    # ce ran 460 steps on every seed; dsc stopped early on two (120, 300) of three.
    steps = {"ce": [460, 460, 460], "dsc(alpha=0.1)": [120, 460, 300]}
    rows = pd.DataFrame(
        [
            {
                "loss": loss,
                "loss_name": loss.split("(")[0],
                "dataset": "mrpc",
                "variant": "original",
                "seed": seed,
                "eval_f1": 80.0 + seed,
                "optimizer_steps": float(value),  # MLflow keeps every metric as a float
            }
            for loss, values in steps.items()
            for seed, value in enumerate(values)
        ]
    )
    table = paper_table(rows)
    assert table.attrs["steps"] == [
        {"row": "ce", "min": 460, "median": 460, "max": 460},
        {"row": "dsc(alpha=0.1)", "min": 120, "median": 300, "max": 460},
    ]
    line = "Optimiser steps per trial (min/median/max): ce 460; dsc(alpha=0.1) 120/300/460."
    assert line in to_markdown(table)
    assert line in to_html(table)
    assert r"ce 460; dsc(alpha=0.1) 120/300/460.}" in to_latex(table)  # in the caption
    assert json.loads(to_json(table))["steps"][1] == table.attrs["steps"][1]
    # Trials from before the steps were recorded: no line.
    assert "Optimiser steps" not in to_markdown(paper_table(rows.drop(columns="optimizer_steps")))
