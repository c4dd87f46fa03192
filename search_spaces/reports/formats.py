"""Renderers of a ``pivot_table`` result, and the label order.

Markdown, CSV, LaTeX (booktabs, in a ``table`` with caption and label), HTML and
JSON; PNG is in ``plots``. A cell reads ``85.21 ± 0.40 (+1.02)†``: mean ± std over
seeds (delta of the mean against the baseline row), and a mark where the paired
test against the baseline says the difference is significant (``MARKS``). The best
mean of each column is bold; the baseline row has no delta.
"""

from __future__ import annotations

import html
import json
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from search_spaces.datasets import VARIANTS

STATS = ("mean", "std", "count", "delta")
# p-value thresholds of the paired test against the baseline, strictest first.
MARKS = ((0.01, "‡"), (0.05, "†"))
_LATEX_MARKS = {"‡": r"$^\ddagger$", "†": r"$^\dagger$"}  # a mark after a cell
LOWER_IS_BETTER = frozenset({"train_loss"})


def format_value(value: Any) -> str:
    """A short display form: ``true``, ``0.1`` (floats via ``:g``), or ``str(value)``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers first (by value), then Table 8 variants (paper's order), then labels."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy's too
        return (0, float(value), "")
    if value in VARIANTS:  # Table 8's column order
        return (1, float(VARIANTS.index(value)), "")
    return (2, 0.0, str(value))


def ordered(values: Iterable[Any], first: Any = None) -> list[Any]:
    """``values`` sorted: numbers numerically, Table 8 variants in the paper's order,
    other labels alphabetically; ``first`` (the baseline) leads if present."""
    rest = sorted((v for v in set(values) if v != first), key=sort_key)
    return [first, *rest] if first in set(values) else rest


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


def _best_rows(table: pd.DataFrame) -> dict[Any, Any]:
    """The row with the best mean in each column: the highest, or the lowest for a
    metric where lower is better (``LOWER_IS_BETTER``)."""
    means = table.xs("mean", axis=1, level="stat").astype(float)
    lower = table.attrs.get("metric") in LOWER_IS_BETTER
    return {
        column: (means[column].idxmin() if lower else means[column].idxmax())
        for column in means.columns
        if means[column].notna().any()
    }


def cell_grid(table: pd.DataFrame) -> tuple[list[str], list[str], list[list[Cell]]]:
    """The display of a ``pivot_table`` result: row labels, column labels and a
    ``Cell`` per row and column (the p-values of ``with_significance`` give marks)."""
    columns = list(dict.fromkeys(table.columns.get_level_values(0)))
    best = _best_rows(table)
    p_values = table.attrs.get("significance") or {}
    collapsed = table.attrs.get("collapsed_cells") or {}
    cells = [
        [
            Cell(
                text=with_collapsed(
                    format_cell(
                        table.at[row, (col, "mean")],
                        table.at[row, (col, "std")],
                        table.at[row, (col, "delta")],
                    ),
                    collapsed.get((row, col), 0),
                ),
                best=best.get(col) == row and len(table.index) > 1,
                mark=mark(p_values.get((row, col))),
            )
            for col in columns
        ]
        for row in table.index
    ]
    return [format_value(r) for r in table.index], [format_value(c) for c in columns], cells


def with_collapsed(text: str, count: int) -> str:
    """A cell's text with the number of its seeds that collapsed (left out of it)."""
    if not count:
        return text
    return f"{text} [{count} collapsed]" if text else f"[{count} collapsed]"


def baseline_line(table: pd.DataFrame) -> str | None:
    """Each data set's trivial baseline F1 in a sentence, or None without them."""
    baselines = table.attrs.get("baselines") or {}
    if not baselines:
        return None
    shown = ", ".join(f"{name} {value:.2f}" for name, value in sorted(baselines.items()))
    return (
        "Trivial baseline F1 (always positive for PI, the majority tag for POS, "
        f"0 for NER and MRC): {shown}."
    )


def tuned_line(table: pd.DataFrame) -> str | None:
    """The settings stage 1 of a two-stage sweep chose for each loss, in a sentence, or
    None for a sweep without ``tune``."""
    tuned = table.attrs.get("tuned") or {}
    if not tuned:
        return None
    shown = "; ".join(
        f"{label}: "
        + ", ".join(f"{name}={format_value(value)}" for name, value in settings.items())
        for label, settings in tuned.items()
    )
    return f"Tuned per loss (stage 1, chosen on the tuning split): {shown}."


def notes(table: pd.DataFrame) -> list[str]:
    """The lines under a table beyond its legend: each loss's tuned settings, the
    trivial baselines, the collapsed trials and the failed ones, none of which are in
    the cells' means."""
    lines = [line for line in (tuned_line(table), baseline_line(table)) if line]
    collapsed = table.attrs.get("collapsed") or []
    if collapsed:
        lines.append("Collapsed trials (left out of the means and the tests):")
        lines += [f"- {_failed_label(e)}: {e['value']:.2f}, {e['reason']}" for e in collapsed]
    failed = table.attrs.get("failed") or []
    if failed:
        lines.append("Failed trials (not in the table):")
        lines += [f"- {_failed_label(entry)}: {entry['reason']}" for entry in failed]
    return lines


def _cells(table: pd.DataFrame) -> pd.DataFrame:
    """The display cells of a ``pivot_table`` result as plain strings (the plots')."""
    rows, columns, cells = cell_grid(table)
    return pd.DataFrame([[c.text for c in line] for line in cells], index=rows, columns=columns)


def legend(table: pd.DataFrame) -> str:
    """What a table's cells mean, in one sentence: its metric, the seeds, the
    baseline of the deltas and the marks."""
    attrs = table.attrs
    seeds = table.xs("count", axis=1, level="stat").max().max()
    text = f"{attrs['metric']}: mean ± std over {_count(seeds)} seed(s)"
    if attrs.get("baseline") is not None:
        text += f" (Δ against {attrs['baseline']})"
    text += "; best per column in bold"
    if any(not math.isnan(p) for p in (attrs.get("significance") or {}).values()):
        text += f"; ‡ p < 0.01, † p < 0.05 (paired t-test against {attrs['baseline']} over seeds)"
    return text + "."


def _count(value: Any) -> str:
    return (
        "0"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else str(int(value))
    )


def long_form(table: pd.DataFrame) -> pd.DataFrame:
    """A ``pivot_table`` result as one line per cell: rows_key, cols_key and ``STATS``."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    long = table.stack(level=0, future_stack=True).reset_index()
    long.columns = [rows_key, cols_key, *long.columns[2:]]
    return long[[rows_key, cols_key, *STATS]]


def to_markdown(table: pd.DataFrame) -> str:
    """A Markdown table: the rows key as first column, one column per cols value; the
    legend and the failed trials under it."""
    rows, columns, cells = cell_grid(table)
    shown = pd.DataFrame(
        [[_markdown_cell(cell) for cell in line] for line in cells], index=rows, columns=columns
    )
    shown.index.name = table.attrs["rows_key"]
    text = str(shown.reset_index().to_markdown(index=False)) + "\n\n" + legend(table)
    for line in notes(table):
        text += ("\n" if line.startswith("- ") else "\n\n") + line
    return text


def _markdown_cell(cell: Cell) -> str:
    if not cell.text:
        return ""
    return (f"**{cell.text}**" if cell.best else cell.text) + cell.mark


def _failed_label(entry: Mapping[str, Any]) -> str:
    return f"{entry['loss']} seed={entry['seed']} on {entry['dataset']} {entry['variant']}"


def to_csv(table: pd.DataFrame) -> str:
    """CSV with one line per cell: rows_key, cols_key, mean, std, count, delta."""
    return str(long_form(table).to_csv(index=False))


def to_json(table: pd.DataFrame) -> str:
    """JSON: ``metric``, ``rows_key``, ``cols_key``, ``baseline``, ``title``,
    ``datasets``, ``rows``, ``columns`` and ``cells`` (one object per cell: row,
    column, ``STATS`` and the paired test's ``p_value`` where there is one; NaN as
    null); ``failed`` lists the failed trials."""
    attrs = table.attrs
    p_values = attrs.get("significance") or {}
    collapsed = attrs.get("collapsed_cells") or {}
    frame = long_form(table)
    long = frame.astype(object).where(frame.notna(), None)
    cells = []
    for line in long.to_dict(orient="records"):
        row, column = line[attrs["rows_key"]], line[attrs["cols_key"]]
        p_value = p_values.get((row, column))
        cells.append(
            {
                "row": row,
                "column": column,
                **{stat: line[stat] for stat in STATS},
                "p_value": None if p_value is None or math.isnan(p_value) else p_value,
                "collapsed": int(collapsed.get((row, column), 0)),
            }
        )
    payload = {
        **{
            key: value
            for key, value in attrs.items()
            if key not in ("significance", "collapsed_cells")  # in the cells instead
        },
        "rows": list(table.index),
        "columns": list(dict.fromkeys(table.columns.get_level_values(0))),
        "cells": cells,
    }
    return json.dumps(payload, default=_plain)


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers, for ``json.dumps``."""
    return value.item() if hasattr(value, "item") else str(value)


def _latex_escape(text: str) -> str:
    special = {
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "\\": r"\textbackslash{}",
    }
    return "".join(special.get(char, char) for char in text)


def to_latex(table: pd.DataFrame) -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``): the caption says the
    metric, seeds, baseline and marks; the label is ``tab:<title>``; the best of each
    column is bold; failed trials follow as comments."""
    rows, columns, cells = cell_grid(table)
    title = str(table.attrs.get("title") or "dicesweep")
    caption = (f"{title}: " if table.attrs.get("title") else "") + legend(table)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\begin{{tabular}}{{l{'r' * len(columns)}}}",
        r"\toprule",
        " & ".join(_latex_escape(str(name)) for name in [table.attrs["rows_key"], *columns])
        + r" \\",
        r"\midrule",
    ]
    for label, line in zip(rows, cells, strict=True):
        shown = [_latex_cell(cell) for cell in line]
        lines.append(" & ".join([_latex_escape(label), *shown]) + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_latex_text(caption)}}}",
        rf"\label{{tab:{_label(title)}}}",
        r"\end{table}",
    ]
    lines += [f"% {line}" for line in notes(table)]
    return "\n".join(lines) + "\n"


def _latex_text(text: str) -> str:
    """Escaped, with the symbols a table uses in math mode."""
    symbols = {
        "±": r"$\pm$",
        "Δ": r"$\Delta$",
        "‡": r"$\ddagger$",
        "†": r"$\dagger$",
        "<": r"$<$",
    }
    escaped = _latex_escape(text)
    for symbol, command in symbols.items():
        escaped = escaped.replace(symbol, command)
    return escaped


def _latex_cell(cell: Cell) -> str:
    text = _latex_text(cell.text)
    if cell.best and text:
        text = rf"\textbf{{{text}}}"
    return text + _LATEX_MARKS.get(cell.mark, "")


def _label(title: str) -> str:
    """A LaTeX label from a title: letters, digits and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower() or "dicesweep"


def to_html(table: pd.DataFrame) -> str:
    """An HTML fragment: ``<table class="grid">`` with the legend as its caption, the
    best of each column in ``<strong>``, marks in ``<sup>``, and the failed trials in
    a list under it. Every label is escaped."""
    rows, columns, cells = cell_grid(table)
    escape = html.escape
    head = "".join(f"<th>{escape(name)}</th>" for name in [table.attrs["rows_key"], *columns])
    body = "".join(
        f"<tr><th>{escape(label)}</th>"
        + "".join(f"<td>{_html_cell(cell)}</td>" for cell in line)
        + "</tr>"
        for label, line in zip(rows, cells, strict=True)
    )
    text = (
        f'<table class="grid"><caption>{escape(legend(table))}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
    tuned = tuned_line(table)
    if tuned:
        text += f'<p class="tuned">{escape(tuned)}</p>'
    baselines = baseline_line(table)
    if baselines:
        text += f'<p class="baselines">{escape(baselines)}</p>'
    collapsed = table.attrs.get("collapsed") or []
    if collapsed:
        items = "".join(
            f"<li>{escape(_failed_label(e))}: {e['value']:.2f}, {escape(e['reason'])}</li>"
            for e in collapsed
        )
        text += (
            "<p>Collapsed trials (left out of the means and the tests):</p>"
            f'<ul class="collapsed">{items}</ul>'
        )
    failed = table.attrs.get("failed") or []
    if failed:
        items = "".join(
            f"<li>{escape(_failed_label(e))}: {escape(str(e['reason']))}</li>" for e in failed
        )
        text += f'<p>Failed trials (not in the table):</p><ul class="failed">{items}</ul>'
    return text


def _html_cell(cell: Cell) -> str:
    text = html.escape(cell.text)
    if cell.best and text:
        text = f"<strong>{text}</strong>"
    return text + (f"<sup>{cell.mark}</sup>" if cell.mark else "")
