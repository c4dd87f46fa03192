"""A ``pivot_table`` result as a LaTeX booktabs ``table``, its notes as comments."""

from __future__ import annotations

import re

import pandas as pd

from search_spaces.reports.budget import budget_lines
from search_spaces.reports.captions import legend, notes, steps_line
from search_spaces.reports.escapes import one_line
from search_spaces.reports.grid import Cell, cell_grid

_LATEX_MARKS = {"‡": r"$^\ddagger$", "†": r"$^\dagger$"}  # a mark after a cell
_SPECIAL = {
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
# And the symbols a table's text uses, in math mode.
_SYMBOLS = {
    **_SPECIAL,
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "‡": r"$\ddagger$",
    "†": r"$\dagger$",
    "<": r"$<$",
}


def _latex_escape(text: str, replaced: dict[str, str] = _SPECIAL) -> str:
    """``text`` on one line, each character of ``replaced`` as LaTeX writes it."""
    return "".join(replaced.get(char, char) for char in one_line(text))


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
        rf"\caption{{{_latex_escape(caption, _SYMBOLS)}}}",
        rf"\label{{tab:{_label(title)}}}",
        r"\end{table}",
    ]
    # One line each: a line break in a note (a failure's reason) would end the comment.
    notes_and_curves = [*notes(table), *budget_lines(table)]
    lines += [f"% {one_line(line)}" for line in notes_and_curves if line != steps]
    return "\n".join(lines) + "\n"


def _latex_cell(cell: Cell) -> str:
    text = _latex_escape(cell.text, _SYMBOLS)
    if cell.best and text:
        text = rf"\textbf{{{text}}}"
    return text + _LATEX_MARKS.get(cell.mark, "")


def _label(title: str) -> str:
    """A LaTeX label from a title: letters, digits and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower() or "dicesweep"
