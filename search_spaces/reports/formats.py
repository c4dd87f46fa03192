"""Renderers of a ``pivot_table`` result, and the label order.

Markdown, CSV, LaTeX (booktabs, in a ``table`` with caption and label), HTML and
JSON; PNG is in ``plots``. A cell reads ``85.21 ± 0.40 (+1.02)†``: mean ± std over
seeds (delta of the mean against the baseline row), and a mark where the paired
test against the baseline says the difference is significant (``MARKS``). A cell says
how many of its trials are constant (``search_spaces.flags``; out of its statistics)
and how many below no-skill (in them): ``[1/3 constant]``, ``[1/3 below no-skill]``.
The best mean of each column among the cells without constant trials is bold; the
baseline row has no delta.
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
from search_spaces.reports.budget import budget_html, budget_lines, budget_markdown
from search_spaces.reports.escapes import csv_text, markdown_text, one_line
from search_spaces.reports.notes import mark_lines, marks_html, tuned_text
from search_spaces.reports.resolution import resolvable_line
from search_spaces.reports.seeds import seed_phrase

STATS = ("mean", "std", "count", "seeds", "delta")  # count: runs; seeds: distinct seeds
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


# The no-skill rule of each task kind, as the trainable scores it on the dev set.
NO_SKILL_RULES = (
    "PI: always positive (F1), the majority class (accuracy); NER: every word O; "
    "POS: every word the majority tag; MRC: the first k words of the passage, "
    "k the mean gold answer length (SQuAD v2: or no answer, the better)"
)
_SCORE_NAMES = {"f1": "F1", "accuracy": "accuracy", "exact_match": "EM"}


def baseline_line(table: pd.DataFrame) -> str | None:
    """Each data set's no-skill scores in a sentence, or None without them."""
    baselines = table.attrs.get("baselines") or {}
    if not baselines:
        return None
    shown = "; ".join(
        f"{name} " + ", ".join(f"{_SCORE_NAMES.get(k, k)} {v:.2f}" for k, v in scores.items())
        for name, scores in sorted(baselines.items())
    )
    return f"No-skill baselines ({NO_SKILL_RULES}): {shown}."


def steps_line(table: pd.DataFrame) -> str | None:
    """The optimiser steps per trial of each row in a sentence (one number where every
    trial of the row ran as many; min/median/max otherwise), or None without them."""
    spans = table.attrs.get("steps") or []
    if not spans:
        return None
    shown = "; ".join(
        f"{format_value(span['row'])} {_span(span['min'], span['median'], span['max'])}"
        for span in spans
    )
    return f"Optimiser steps per trial (min/median/max): {shown}."


def _span(low: int, median: int, high: int) -> str:
    return str(low) if low == high else f"{low}/{median}/{high}"


def tuned_line(table: pd.DataFrame) -> str | None:
    """The settings stage 1 of a two-stage sweep chose for each loss, in a sentence, or
    None for a sweep without ``tune``."""
    tuned = table.attrs.get("tuned") or {}
    if not tuned:
        return None
    return tuned_text(tuned, table.attrs.get("tuned_constant") or [], format_value)


def notes(table: pd.DataFrame) -> list[str]:
    """The lines under a table beyond its legend: each loss's tuned settings, the
    optimiser steps, the no-skill baselines, the smallest Δ the tests resolve, the
    marked trials (constant, below no-skill: ``notes.mark_lines``) and the failed ones."""
    found = (tuned_line(table), steps_line(table), baseline_line(table), resolvable_line(table))
    lines = [line for line in found if line]
    lines += mark_lines(table, _failed_label)
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
    text = f"{attrs['metric']}: mean ± std over {seed_phrase(table)}"
    if attrs.get("baseline") is not None:
        text += f" (Δ against {attrs['baseline']})"
    text += "; best per column in bold"
    if attrs.get("degenerate_cells"):
        text += " among the cells without constant trials"
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
        [[_markdown_cell(cell) for cell in line] for line in cells],
        index=[markdown_text(row) for row in rows],
        columns=[markdown_text(column) for column in columns],
    )
    shown.index.name = markdown_text(table.attrs["rows_key"])
    text = str(shown.reset_index().to_markdown(index=False)) + "\n\n" + legend(table)
    for line in notes(table):
        text += ("\n" if line.startswith("- ") else "\n\n") + markdown_text(line)
    return text + budget_markdown(table)


def _markdown_cell(cell: Cell) -> str:
    if not cell.text:
        return ""
    text = markdown_text(cell.text)
    return (f"**{text}**" if cell.best else text) + cell.mark


def _failed_label(entry: Mapping[str, Any]) -> str:
    """``dsc(alpha=0.1) seed=1 on mrpc original``, then ``in sweep sw-1`` in a merged
    table, whose trials carry their sweep."""
    label = f"{entry['loss']} seed={entry['seed']} on {entry['dataset']} {entry['variant']}"
    return f"{label} in sweep {entry['sweep']}" if entry.get("sweep") else label


def to_csv(table: pd.DataFrame) -> str:
    """CSV with one line per cell: rows_key, cols_key, mean, std, count, delta and
    ``degenerate`` and ``below_no_skill`` (how many of the cell's trials are constant,
    out of its mean, and below no-skill, in it). A text cell a spreadsheet would run as
    a formula starts with ``'`` (OWASP's guard)."""
    frame = long_form(table)
    keys = list(zip(frame.iloc[:, 0], frame.iloc[:, 1], strict=True))
    for name in ("degenerate", "below_no_skill"):
        counts = table.attrs.get(f"{name}_cells") or {}
        frame[name] = [int(counts.get(key, 0)) for key in keys]
    for key in (table.attrs["rows_key"], table.attrs["cols_key"]):
        frame[key] = frame[key].map(csv_text)
    return str(frame.to_csv(index=False))


def to_json(table: pd.DataFrame) -> str:
    """JSON: ``metric``, ``rows_key``, ``cols_key``, ``baseline``, ``title``,
    ``datasets``, ``rows``, ``columns`` and ``cells`` (one object per cell: row,
    column, ``STATS``, the paired test's ``p_value`` and the smallest difference it
    resolves, ``resolvable``, with its 95% range, ``resolvable_range``, where there is
    one; NaN as null; how many of its trials are constant, ``degenerate``, and below
    no-skill, ``below_no_skill``); ``failed`` lists the failed trials."""
    attrs = table.attrs
    p_values = attrs.get("significance") or {}
    resolvable = attrs.get("resolvable") or {}
    ranges = attrs.get("resolvable_range") or {}
    degenerate = attrs.get("degenerate_cells") or {}
    below = attrs.get("below_no_skill_cells") or {}
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
                "p_value": _number(p_value),
                "resolvable": _number(resolvable.get((row, column))),
                "resolvable_range": [_number(v) for v in ranges.get((row, column), ())] or None,
                "degenerate": int(degenerate.get((row, column), 0)),
                "below_no_skill": int(below.get((row, column), 0)),
            }
        )
    payload = {
        **{key: value for key, value in attrs.items() if key not in IN_THE_CELLS},
        "rows": list(table.index),
        "columns": list(dict.fromkeys(table.columns.get_level_values(0))),
        "cells": cells,
    }
    return json.dumps(payload, default=_plain)


# Table attributes keyed by (row, column): the JSON gives them in its cells.
IN_THE_CELLS = (
    "significance",
    "resolvable",
    "resolvable_range",
    "degenerate_cells",
    "below_no_skill_cells",
)


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


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
    return "".join(special.get(char, char) for char in one_line(text))


def to_latex(table: pd.DataFrame) -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``): the caption says the
    metric, seeds, baseline and marks; the label is ``tab:<title>``; the best of each
    column is bold; failed trials follow as comments."""
    rows, columns, cells = cell_grid(table)
    title = str(table.attrs.get("title") or "dicesweep")
    caption = (f"{title}: " if table.attrs.get("title") else "") + legend(table)
    steps = steps_line(table)
    caption += f" {steps}" if steps else ""
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
    # One line each: a line break in a note (a failure's reason) would end the comment.
    notes_and_curves = [*notes(table), *budget_lines(table)]
    lines += [f"% {one_line(line)}" for line in notes_and_curves if line != steps]
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
    for css, line in (
        ("steps", steps_line(table)),
        ("baselines", baseline_line(table)),
        ("resolvable", resolvable_line(table)),
    ):
        text += f'<p class="{css}">{escape(line)}</p>' if line else ""
    text += marks_html(table, _failed_label)
    failed = table.attrs.get("failed") or []
    if failed:
        items = "".join(
            f"<li>{escape(_failed_label(e))}: {escape(str(e['reason']))}</li>" for e in failed
        )
        text += f'<p>Failed trials (not in the table):</p><ul class="failed">{items}</ul>'
    return text + budget_html(table)


def _html_cell(cell: Cell) -> str:
    text = html.escape(cell.text)
    if cell.best and text:
        text = f"<strong>{text}</strong>"
    return text + (f"<sup>{cell.mark}</sup>" if cell.mark else "")
