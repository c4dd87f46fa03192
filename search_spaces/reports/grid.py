"""A ``pivot_table`` result's cells as every renderer shows them.

A cell reads ``85.21 ± 0.40 (+1.02)†``: mean ± std over seeds (delta of the mean
against the baseline row), and a mark where the paired test against the baseline says
the difference is significant (``MARKS``). A cell says how many of its trials are
constant (``search_spaces.flags``; out of its statistics) and how many below no-skill
(in them): ``[1/3 constant]``, ``[1/3 below no-skill]``. The best mean of each column
among the cells without constant trials is bold; the baseline row has no delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from search_spaces.reports.formats import format_value

# p-value thresholds of the paired test against the baseline, strictest first.
MARKS = ((0.01, "‡"), (0.05, "†"))
LOWER_IS_BETTER = frozenset({"train_loss"})


def format_cell(mean: float, std: float, delta: float) -> str:
    """``"85.21 ± 0.40 (+1.02)"``; std and delta are left out where NaN, all where mean is."""
    if math.isnan(mean):
        return ""
    text = f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} ± {std:.2f}"
    return text if math.isnan(delta) else f"{text} ({delta:+.2f})"


@dataclass(frozen=True)
class Cell:
    """One cell as shown: its text, whether it is its column's best, its mark."""

    text: str
    best: bool = False
    mark: str = ""


def mark(p_value: float | None) -> str:
    """``‡`` for p < 0.01, ``†`` for p < 0.05, else nothing (``MARKS``)."""
    if p_value is None or math.isnan(p_value):
        return ""
    return next((symbol for limit, symbol in MARKS if p_value < limit), "")


def _best_rows(table: pd.DataFrame) -> dict[Any, set[Any]]:
    """The rows with the best mean in each column, as shown (2 decimals; ties all): the
    highest, or the lowest where lower is better (``LOWER_IS_BETTER``); none where every
    row ties; a cell holding a constant trial is never the best."""
    means = table.xs("mean", axis=1, level="stat").astype(float)
    filled = means.count()  # cells with a mean, per column: a tie of them all is no best
    for row, column in table.attrs.get("degenerate_cells") or {}:
        if row in means.index and column in means.columns:
            means.at[row, column] = math.nan
    shown = means.round(2)
    best = shown.min() if table.attrs.get("metric") in LOWER_IS_BETTER else shown.max()
    tied = {column: set(shown.index[shown[column] == best[column]]) for column in shown.columns}
    return {column: rows for column, rows in tied.items() if 0 < len(rows) < filled[column]}


def cell_grid(table: pd.DataFrame) -> tuple[list[str], list[str], list[list[Cell]]]:
    """The display of a ``pivot_table`` result: row labels, column labels and a
    ``Cell`` per row and column (the p-values of ``with_significance`` give marks)."""
    columns = list(dict.fromkeys(table.columns.get_level_values(0)))
    best = _best_rows(table)
    p_values = table.attrs.get("significance") or {}
    degenerate = table.attrs.get("degenerate_cells") or {}
    below = table.attrs.get("below_no_skill_cells") or {}
    cells = [
        [
            Cell(
                text=with_degenerate(
                    format_cell(
                        table.at[row, (col, "mean")],
                        table.at[row, (col, "std")],
                        table.at[row, (col, "delta")],
                    ),
                    degenerate.get((row, col), 0),
                    table.at[row, (col, "count")],
                    below.get((row, col), 0),
                ),
                best=row in best.get(col, set()),
                mark=mark(p_values.get((row, col))),
            )
            for col in columns
        ]
        for row in table.index
    ]
    return [format_value(r) for r in table.index], [format_value(c) for c in columns], cells


def with_degenerate(text: str, count: int, seeds: Any, below: int = 0) -> str:
    """A cell's text with how many of its trials are constant (``count``, out of its
    ``seeds`` statistics) and how many below no-skill (``below``, in them)."""
    total = int(_count(seeds)) + count
    marks = ((count, "constant"), (below, "below no-skill"))
    shown = "; ".join(f"{n}/{total} {name}" for n, name in marks if n)
    return f"{text} [{shown}]".strip() if shown else text


def _count(value: Any) -> str:
    return (
        "0"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else str(int(value))
    )


def cell_texts(table: pd.DataFrame) -> pd.DataFrame:
    """The display cells of a ``pivot_table`` result as plain strings (the plots')."""
    rows, columns, cells = cell_grid(table)
    return pd.DataFrame([[c.text for c in line] for line in cells], index=rows, columns=columns)
