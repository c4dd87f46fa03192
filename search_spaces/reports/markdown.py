"""A ``pivot_table`` result as a Markdown table, its legend and notes under it."""

from __future__ import annotations

import pandas as pd

from search_spaces.reports.budget import budget_markdown
from search_spaces.reports.captions import legend, notes
from search_spaces.reports.escapes import markdown_text
from search_spaces.reports.grid import Cell, cell_grid


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
