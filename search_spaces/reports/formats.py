"""Renderers of a ``pivot_table`` result, and the label order.

Markdown, CSV, LaTeX (booktabs), JSON and PNG (matplotlib's Agg, imported on first
use). A cell reads ``85.21 ± 0.40 (+1.02)``: mean ± std over seeds (delta of the
mean against the baseline row); the baseline row has no delta.
"""

from __future__ import annotations

import io
import json
import math
import numbers
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from search_spaces.datasets import VARIANTS

STATS = ("mean", "std", "count", "delta")


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


def _cells(table: pd.DataFrame) -> pd.DataFrame:
    """The display cells of a ``pivot_table`` result: rows × columns of strings."""
    columns = list(dict.fromkeys(table.columns.get_level_values(0)))
    return pd.DataFrame(
        [
            [
                format_cell(
                    table.at[row, (col, "mean")],
                    table.at[row, (col, "std")],
                    table.at[row, (col, "delta")],
                )
                for col in columns
            ]
            for row in table.index
        ],
        index=[format_value(row) for row in table.index],
        columns=[format_value(col) for col in columns],
    )


def long_form(table: pd.DataFrame) -> pd.DataFrame:
    """A ``pivot_table`` result as one line per cell: rows_key, cols_key and ``STATS``."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    long = table.stack(level=0, future_stack=True).reset_index()
    long.columns = [rows_key, cols_key, *long.columns[2:]]
    return long[[rows_key, cols_key, *STATS]]


def to_markdown(table: pd.DataFrame) -> str:
    """A Markdown table: the rows key as first column, one column per cols value."""
    cells = _cells(table)
    cells.index.name = table.attrs["rows_key"]
    text = str(cells.reset_index().to_markdown(index=False))
    failed = table.attrs.get("failed") or []
    if failed:
        lines = [f"- {_failed_label(entry)}: {entry['reason']}" for entry in failed]
        text += "\n\nFailed trials (not in the table):\n\n" + "\n".join(lines)
    return text


def _failed_label(entry: Mapping[str, Any]) -> str:
    return f"{entry['loss']} seed={entry['seed']} on {entry['dataset']} {entry['variant']}"


def to_csv(table: pd.DataFrame) -> str:
    """CSV with one line per cell: rows_key, cols_key, mean, std, count, delta."""
    return str(long_form(table).to_csv(index=False))


def to_json(table: pd.DataFrame) -> str:
    """JSON: ``metric``, ``rows_key``, ``cols_key``, ``baseline``, ``rows``, ``columns``
    and ``cells`` (one object per cell: row, column and ``STATS``; NaN as null)."""
    attrs = table.attrs
    frame = long_form(table)
    long = frame.astype(object).where(frame.notna(), None)
    cells = [
        {
            "row": line[attrs["rows_key"]],
            "column": line[attrs["cols_key"]],
            **{stat: line[stat] for stat in STATS},
        }
        for line in long.to_dict(orient="records")
    ]
    payload = {
        **attrs,
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
    """A booktabs ``tabular`` (``\\toprule``/``\\midrule``/``\\bottomrule``); needs
    ``\\usepackage{booktabs}``."""
    cells = _cells(table)
    header = [table.attrs["rows_key"], *cells.columns]
    failed = table.attrs.get("failed") or []
    lines = [
        rf"\begin{{tabular}}{{l{'r' * len(cells.columns)}}}",
        r"\toprule",
        " & ".join(_latex_escape(str(name)) for name in header) + r" \\",
        r"\midrule",
    ]
    for label, values in cells.iterrows():
        shown = [_latex_escape(v).replace("±", r"$\pm$") for v in values]
        lines.append(" & ".join([_latex_escape(str(label)), *shown]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [f"% failed, not in the table: {_failed_label(e)}: {e['reason']}" for e in failed]
    return "\n".join(lines) + "\n"


def to_png(
    table: pd.DataFrame,
    path: str | Path | None = None,
    kind: Literal["heatmap", "line"] = "heatmap",
) -> bytes:
    """Plot a ``pivot_table`` result as PNG; returns the bytes and writes ``path`` if given.

    ``heatmap``: the means, rows × columns, each cell annotated (e.g. losses × variants).
    ``line``: the metric against the row values (a parameter) with std error bars, one
    line per column (e.g. ``param_alpha`` × data sets).

    Raises:
        ValueError: an unknown ``kind``.
    """
    # Agg through the Figure API: no pyplot, so no process-wide backend or state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plots = {"heatmap": _draw_heatmap, "line": _draw_lines}
    if kind not in plots:
        raise ValueError(f"unknown plot kind {kind!r}; valid: {', '.join(plots)}")
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    plots[kind](figure.add_subplot(), table)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    png = buffer.getvalue()
    if path is not None:
        Path(path).write_bytes(png)
    return png


def _stat(table: pd.DataFrame, stat: str) -> pd.DataFrame:
    return table.xs(stat, axis=1, level="stat").astype(float)


def _draw_heatmap(axes: Any, table: pd.DataFrame) -> None:
    means, cells = _stat(table, "mean"), _cells(table)
    image = axes.imshow(means.to_numpy(), cmap="viridis", aspect="auto")
    axes.figure.colorbar(image, ax=axes, label=table.attrs["metric"])
    axes.set_xticks(range(len(cells.columns)), list(cells.columns), rotation=30, ha="right")
    axes.set_yticks(range(len(cells.index)), list(cells.index))
    axes.set_xlabel(table.attrs["cols_key"])
    axes.set_ylabel(table.attrs["rows_key"])
    values = means.to_numpy()
    for i, label in enumerate(cells.index):
        for j, column in enumerate(cells.columns):
            red, green, blue, _ = image.cmap(image.norm(values[i, j]))
            # Dark text on light cells: perceived luminance (ITU-R BT.601 weights).
            dark = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
            text = cells.at[label, column].replace(" (", "\n(")
            axes.text(
                j, i, text, ha="center", va="center", fontsize=7, color="black" if dark else "white"
            )


def _draw_lines(axes: Any, table: pd.DataFrame) -> None:
    means, stds = _stat(table, "mean"), _stat(table, "std")
    numeric = all(sort_key(value)[0] == 0 for value in means.index)
    xs = list(means.index) if numeric else list(range(len(means.index)))
    for column in means.columns:
        axes.errorbar(
            xs,
            means[column],
            yerr=stds[column].fillna(0.0),
            marker="o",
            capsize=3,
            label=format_value(column),
        )
    if not numeric:
        axes.set_xticks(xs, [format_value(value) for value in means.index])
    axes.set_xlabel(table.attrs["rows_key"])
    axes.set_ylabel(table.attrs["metric"])
    axes.legend(title=table.attrs["cols_key"])
    axes.grid(alpha=0.3)
