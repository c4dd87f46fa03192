"""A ``pivot_table`` result as a PNG plot (matplotlib's Agg, imported on first use):
a heatmap of the cells (losses x variants) or lines over a loss parameter with ±std
bands (Table 10: alpha x data sets). Titled with the metric, the data sets and the
sweep's name. The budget curves a table carries are drawn below it, in one figure."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from search_spaces.reports.budget import BUDGET_INCHES, budget_frame, draw_budget_curves
from search_spaces.reports.formats import format_value, sort_key
from search_spaces.reports.grid import cell_texts
from search_spaces.reports.heat_scale import heat_scale
from search_spaces.reports.setup_block import setup_caption


def plot_title(table: pd.DataFrame) -> str:
    """``"eval_f1 on conll2003, squad_v1 — table10"``: the metric, the data sets the
    trials ran on (``attrs["datasets"]``) and the sweep's name (``attrs["title"]``)."""
    attrs = table.attrs
    datasets = ", ".join(attrs.get("datasets") or [])
    title = f"{attrs['metric']} on {datasets}" if datasets else str(attrs["metric"])
    return f"{title} — {attrs['title']}" if attrs.get("title") else title


def plot_kind(table: pd.DataFrame) -> Literal["heatmap", "line"]:
    """Lines when the rows are a loss parameter (``param_alpha``), else a heatmap."""
    return "line" if str(table.attrs.get("rows_key", "")).startswith("param_") else "heatmap"


def to_png(
    table: pd.DataFrame,
    path: str | Path | None = None,
    kind: Literal["heatmap", "line"] | None = None,
) -> bytes:
    """Plot a ``pivot_table`` result as PNG; returns the bytes and writes ``path`` if given.

    ``heatmap``: the means, rows × columns, each cell annotated (e.g. losses × variants).
    ``line``: the metric against the row values (a parameter), one line per column
    (e.g. ``param_alpha`` × data sets), the mean ± std shaded. None: ``plot_kind``.
    A table carrying budget curves (``with_budget_curves``) has them drawn below.

    Raises:
        ValueError: an unknown ``kind``.
    """
    import matplotlib

    plots = {"heatmap": _draw_heatmap, "line": _draw_lines}
    kind = kind or plot_kind(table)
    if kind not in plots:
        raise ValueError(f"unknown plot kind {kind!r}; valid: {', '.join(plots)}")
    # Names are text: a data set named "$\\undefinedmacro{x}$" is drawn as written,
    # never parsed as mathtext (which refuses it and failed the whole report). Ticks
    # are made as the figure is saved, so the whole drawing runs under the setting.
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        png = _draw(table, plots[kind], kind)
    if path is not None:
        Path(path).write_bytes(png)
    return png


def _draw(table: pd.DataFrame, plot: Any, kind: Literal["heatmap", "line"]) -> bytes:
    """``table`` drawn by ``plot`` on Agg, its budget curves below; the PNG's bytes."""
    # Agg through the Figure API: no pyplot, so no process-wide backend or state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = _figure_size(table, kind)
    if budget_frame(table).empty:
        figure = Figure(figsize=(width, height), layout="constrained")
        axes = figure.add_subplot()
    else:  # the table's plot above its budget curves, in one figure
        figure = Figure(figsize=(width, height + BUDGET_INCHES), layout="constrained")
        axes, below = figure.subplots(2, 1, height_ratios=[height, BUDGET_INCHES])
        draw_budget_curves(below, table)
    FigureCanvasAgg(figure)
    plot(axes, table)
    axes.set_title(plot_title(table), fontsize=10)
    caption = setup_caption(table.attrs.get("setup") or [])
    if caption:
        figure.supxlabel(textwrap.fill(caption, CAPTION_CHARS), fontsize=7, color="0.35")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


LABEL_CHARS = 30  # a heatmap's row label is wrapped after its parameters at this width
CAPTION_CHARS = 110  # the setup caption under the figure is wrapped at this width


def wrap_label(label: str, width: int = LABEL_CHARS) -> str:
    """A long loss label on several lines, broken after its commas:
    ``dsc(alpha=0.01,classes=sum,`` / ``scope=example,smooth=1,`` / ``square=true)``."""
    lines = [""]
    for part in label.split(","):
        piece = part if not lines[-1] else "," + part
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines[-1] += ","
            lines.append(part)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def _figure_size(table: pd.DataFrame, kind: str) -> tuple[float, float]:
    """Inches: a heatmap grows with its cells and its row labels, so no text overlaps."""
    if kind != "heatmap":
        return 7.0, 4.5
    rows = [wrap_label(str(label)) for label in cell_texts(table).index]
    columns = len(cell_texts(table).columns)
    label_inches = 0.07 * max(len(line) for row in rows for line in row.split("\n"))
    lines = sum(row.count("\n") + 1 for row in rows)
    width = max(7.0, 2.5 + label_inches + 1.3 * columns)
    height = max(4.5, 1.8 + 0.32 * max(lines, 2 * len(rows)))
    return width, height


def _stat(table: pd.DataFrame, stat: str) -> pd.DataFrame:
    return table.xs(stat, axis=1, level="stat").astype(float)


def _draw_heatmap(axes: Any, table: pd.DataFrame) -> None:
    from matplotlib.colors import ListedColormap

    means, cells = _stat(table, "mean"), cell_texts(table)
    scale = heat_scale(means.to_numpy(), table)
    cmap = "viridis" if scale.coloured else ListedColormap(["#e8e8e8"])
    image = axes.imshow(means.to_numpy(), cmap=cmap, vmin=scale.low, vmax=scale.high, aspect="auto")
    if scale.coloured:
        axes.figure.colorbar(image, ax=axes, label=table.attrs["metric"])
    axes.set_xticks(range(len(cells.columns)), list(cells.columns), rotation=30, ha="right")
    axes.set_yticks(range(len(cells.index)), [wrap_label(str(label)) for label in cells.index])
    note = "" if scale.coloured else f"\n{scale.note}"
    axes.set_xlabel(f"{table.attrs['cols_key']}{note}")
    axes.set_ylabel(table.attrs["rows_key"])
    values = means.to_numpy()
    for i, label in enumerate(cells.index):
        for j, column in enumerate(cells.columns):
            red, green, blue, _ = image.cmap(image.norm(values[i, j]))
            # Dark text on light cells: perceived luminance (ITU-R BT.601 weights); a
            # cell without a mean is left white.
            luminance = 0.299 * red + 0.587 * green + 0.114 * blue
            dark = values[i, j] != values[i, j] or luminance > 0.5
            text = cells.at[label, column].replace(" (", "\n(").replace(" [", "\n[")
            axes.text(
                j, i, text, ha="center", va="center", fontsize=7, color="black" if dark else "white"
            )


def _draw_lines(axes: Any, table: pd.DataFrame) -> None:
    means, stds = _stat(table, "mean"), _stat(table, "std").fillna(0.0)
    degenerate = table.attrs.get("degenerate_cells") or {}
    numeric = all(sort_key(value)[0] == 0 for value in means.index)
    xs = [float(v) for v in means.index] if numeric else list(range(len(means.index)))
    for column in means.columns:
        line = axes.plot(xs, means[column], marker="o", label=format_value(column))[0]
        axes.fill_between(
            xs,
            means[column] - stds[column],
            means[column] + stds[column],
            color=line.get_color(),
            alpha=0.2,
            linewidth=0,
        )
        # A point whose cell holds degenerate trials: a red ring around it.
        flagged = [
            (x, means.at[row, column])
            for x, row in zip(xs, means.index, strict=True)
            if (row, column) in degenerate
        ]
        if flagged:
            axes.scatter(*zip(*flagged, strict=True), s=140, facecolors="none", edgecolors="red")
    if not numeric:
        axes.set_xticks(xs, [format_value(value) for value in means.index])
    axes.set_xlabel(str(table.attrs["rows_key"]).removeprefix("param_"))
    axes.set_ylabel(f"{table.attrs['metric']} (mean ± std over seeds)")
    axes.legend(title=table.attrs["cols_key"])
    axes.grid(alpha=0.3)
