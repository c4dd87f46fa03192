"""Table 10's question in pictures: the Tversky α curve (β = 1 − α) of several set-ups
(the softmax tagger, MRC-NER, span MRC) and the paper's columns, in one table and one
figure, from published per-seed rows.

A curve is each α's mean of the metric over its seeds (α read from the loss's label,
``tversky(alpha=0.3,...)``) with the seeds' spread; its shape is where it peaks, the
range of its means and the α whose mean is under ``COLLAPSED`` (a cell that learned
nothing, as every word ``O`` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from search_spaces.reports.tables import final_rows

COLLAPSED = 1.0  # a cell whose mean F1 is under this learned nothing
ALPHA_LABEL = r"alpha=([\d.]+)"


@dataclass(frozen=True)
class Shape:
    """Where a curve peaks, the range of its means and the α where it collapses."""

    peak: float
    peak_value: float
    low: float
    collapsed: tuple[float, ...]

    def words(self) -> str:
        """``peak at α 0.6 (84.67), range 80.13–84.67; no α collapses``."""
        fallen = (
            f"collapses (F1 under {COLLAPSED:g}) at α {', '.join(f'{a:g}' for a in self.collapsed)}"
            if self.collapsed
            else "no α collapses"
        )
        return (
            f"peak at α {self.peak:g} ({self.peak_value:.2f}), range"
            f" {self.low:.2f}–{self.peak_value:.2f}; {fallen}"
        )


def shape(means: pd.Series) -> Shape:
    """The shape of a curve given as its mean by α (index: α)."""
    collapsed = tuple(sorted(float(a) for a, mean in means.items() if mean < COLLAPSED))
    peak = float(means.idxmax())
    return Shape(peak, float(means.max()), float(means.min()), collapsed)


def alpha_curve(rows: pd.DataFrame, metric: str = "eval_f1") -> pd.DataFrame:
    """One set-up's curve from its final-stage rows: per α (the index, ascending) the
    seeds, mean, standard deviation, lowest and highest of ``metric`` over its Tversky
    rows (``loss_name`` ``tversky``).

    Raises:
        ValueError: no Tversky row with a value of ``metric``.
    """
    rows = final_rows(rows)
    tversky = rows[rows["loss_name"] == "tversky"].dropna(subset=[metric])
    if tversky.empty:
        raise ValueError(f"no tversky row with {metric}")
    alpha = tversky["loss"].str.extract(ALPHA_LABEL, expand=False).astype(float).rename("alpha")
    grouped = tversky.groupby(alpha)[metric]
    curve = grouped.agg(seeds="count", mean="mean", std="std", low="min", high="max")
    return curve.sort_index()


def curves_markdown(curves: dict[str, pd.DataFrame], paper: dict[str, dict[float, float]]) -> str:
    """α down the side, a column per set-up (mean ± std over n seeds) and per paper
    column; under the table each curve's shape in words."""
    alphas = sorted(
        {float(a) for c in curves.values() for a in c.index}
        | {float(a) for column in paper.values() for a in column}
    )
    names = [*curves, *paper]
    lines = ["| α | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for alpha in alphas:
        cells = []
        for curve in curves.values():
            if alpha in curve.index:
                row = curve.loc[alpha]
                spread = f" ± {row['std']:.2f}" if row["seeds"] > 1 else ""
                cells.append(f"{row['mean']:.2f}{spread} ({int(row['seeds'])})")
            else:
                cells.append("–")
        cells += [f"{column[alpha]:.2f}" if alpha in column else "–" for column in paper.values()]
        lines.append(f"| {alpha:g} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, curve in curves.items():
        lines.append(f"- {name}: {shape(curve['mean']).words()}.")
    for name, column in paper.items():
        lines.append(f"- {name}: {shape(pd.Series(column)).words()}.")
    return "\n".join(lines)


def curves_png(
    curves: dict[str, pd.DataFrame], paper: dict[str, dict[float, float]], metric: str
) -> bytes:
    """The curves in one figure: each set-up's means with its seeds' range as error bars,
    the paper's columns dashed."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 5.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, curve in curves.items():
        errors = [curve["mean"] - curve["low"], curve["high"] - curve["mean"]]
        axes.errorbar(curve.index, curve["mean"], yerr=errors, marker="o", capsize=3, label=name)
    for name, column in paper.items():
        axes.plot(list(column), list(column.values()), linestyle="--", marker="x", label=name)
    axes.set_xlabel("Tversky α (β = 1 − α)")
    axes.set_ylabel(f"{metric}: mean over seeds (bars: lowest to highest)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()
