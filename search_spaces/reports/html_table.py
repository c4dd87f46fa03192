"""A ``pivot_table`` result as an HTML fragment: the table, its notes and failed trials."""

from __future__ import annotations

import html

import pandas as pd

from search_spaces.reports.budget import budget_html
from search_spaces.reports.captions import (
    baseline_line,
    ci_line,
    failed_label,
    legend,
    steps_line,
    tuned_line,
)
from search_spaces.reports.grid import Cell, cell_grid
from search_spaces.reports.notes import marks_html, precision_line
from search_spaces.reports.paper_beside import paper_lines
from search_spaces.reports.resolution import resolvable_line
from search_spaces.reports.setup_block import setup_lines, split_line


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
        ("ci", ci_line(table)),
        ("steps", steps_line(table)),
        ("baselines", baseline_line(table)),
        ("resolvable", resolvable_line(table)),
        ("precision", precision_line(table)),
    ):
        text += f'<p class="{css}">{escape(line)}</p>' if line else ""
    split = split_line(table.attrs.get("split_by") or {})
    text += f'<p class="split">{escape(split)}</p>' if split else ""
    text += _list_html(paper_lines(table), "paper")
    text += _list_html(setup_lines(table.attrs.get("setup") or []), "setup")
    text += marks_html(table, failed_label)
    failed = table.attrs.get("failed") or []
    if failed:
        items = "".join(
            f"<li>{escape(failed_label(e))}: {escape(str(e['reason']))}</li>" for e in failed
        )
        text += f'<p>Failed trials (not in the table):</p><ul class="failed">{items}</ul>'
    return text + budget_html(table)


def _list_html(lines: list[str], css: str) -> str:
    """A heading and its ``- item`` lines (``setup_lines``, ``paper_lines``) as a
    paragraph and a list of class ``css``, escaped."""
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line.removeprefix('- '))}</li>" for line in lines[1:])
    return f'<p>{html.escape(lines[0])}</p><ul class="{css}">{items}</ul>'


def _html_cell(cell: Cell) -> str:
    text = html.escape(cell.text)
    if cell.best and text:
        text = f"<strong>{text}</strong>"
    return text + (f"<sup>{cell.mark}</sup>" if cell.mark else "")
