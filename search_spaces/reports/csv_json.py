"""A ``pivot_table`` result as data: CSV and JSON with one line or object per cell."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from search_spaces.reports.escapes import csv_text
from search_spaces.reports.formats import STATS

# Table attributes keyed by (row, column): the JSON gives them in its cells.
IN_THE_CELLS = (
    "significance",
    "p_raw",
    "ci",
    "resolvable",
    "resolvable_range",
    "degenerate_cells",
    "below_no_skill_cells",
    "sequential",
)


def long_form(table: pd.DataFrame) -> pd.DataFrame:
    """A ``pivot_table`` result as one line per cell: rows_key, cols_key and ``STATS``."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    long = table.stack(level=0, future_stack=True).reset_index()
    long.columns = [rows_key, cols_key, *long.columns[2:]]
    return long[[rows_key, cols_key, *STATS]]


def to_csv(table: pd.DataFrame) -> str:
    """CSV with one line per cell: rows_key, cols_key, mean, std, count, delta,
    ``degenerate`` and ``below_no_skill`` (how many of the cell's trials are constant,
    out of its mean, and below no-skill, in it), the Δ's 95% interval (``ci_low``,
    ``ci_high``) and its test's raw and Holm-adjusted p (``p_value``, ``p_holm``),
    empty where none was tested; seeds until decided, where each cell stopped
    (``stop_look``, ``stop_seeds``, ``stop_verdict``, ``stop_reason``), its interval and
    p the rule's repeated ones. A text cell a spreadsheet would run as
    a formula starts with ``'`` (OWASP's guard)."""
    frame = long_form(table)
    keys = list(zip(frame.iloc[:, 0], frame.iloc[:, 1], strict=True))
    for name in ("degenerate", "below_no_skill"):
        counts = table.attrs.get(f"{name}_cells") or {}
        frame[name] = [int(counts.get(key, 0)) for key in keys]
    intervals = table.attrs.get("ci") or {}
    nan = (math.nan, math.nan)
    frame["ci_low"] = [intervals.get(key, nan)[0] for key in keys]
    frame["ci_high"] = [intervals.get(key, nan)[1] for key in keys]
    frame["p_value"] = [(table.attrs.get("p_raw") or {}).get(key, math.nan) for key in keys]
    frame["p_holm"] = [(table.attrs.get("significance") or {}).get(key, math.nan) for key in keys]
    ends = table.attrs.get("sequential") or {}
    if ends:  # seeds until decided: where each cell stopped (its CI and p are the repeated ones)
        for name in ("look", "seeds", "verdict", "reason"):
            frame[f"stop_{name}"] = [ends.get(key, {}).get(name) for key in keys]
    for key in (table.attrs["rows_key"], table.attrs["cols_key"]):
        frame[key] = frame[key].map(csv_text)
    return str(frame.to_csv(index=False))


def to_json(table: pd.DataFrame) -> str:
    """JSON: ``metric``, ``rows_key``, ``cols_key``, ``baseline``, ``title``,
    ``datasets``, ``rows``, ``columns`` and ``cells`` (one object per cell: row,
    column, ``STATS``, the paired test's raw ``p_value``, its Holm-adjusted ``p_holm``,
    the Δ's 95% interval ``ci`` and the smallest difference it detects at 80% power,
    ``resolvable``, with its 95% range, ``resolvable_range``; each interval ``[low,
    high]``, null where there is none; NaN as null; how many of its trials are
    constant, ``degenerate``, and below no-skill, ``below_no_skill``; seeds until
    decided, ``stopped``: the look, seeds, verdict, reason, repeated ``ci`` and ``p``
    where the cell stopped, its ``ci`` and ``p_value`` the repeated ones);
    ``seeds_until`` names the rule; ``failed`` lists the failed trials."""
    attrs = table.attrs
    p_values = attrs.get("p_raw") or {}
    adjusted = attrs.get("significance") or {}
    intervals = attrs.get("ci") or {}
    resolvable = attrs.get("resolvable") or {}
    ranges = attrs.get("resolvable_range") or {}
    degenerate = attrs.get("degenerate_cells") or {}
    below = attrs.get("below_no_skill_cells") or {}
    ends = attrs.get("sequential") or {}
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
                "p_holm": _number(adjusted.get((row, column))),
                "ci": _bounds(intervals.get((row, column))),
                "resolvable": _number(resolvable.get((row, column))),
                "resolvable_range": _bounds(ranges.get((row, column))),
                "degenerate": int(degenerate.get((row, column), 0)),
                "below_no_skill": int(below.get((row, column), 0)),
                **({"stopped": _stopped(ends.get((row, column)))} if ends else {}),
            }
        )
    payload = {
        **{key: value for key, value in attrs.items() if key not in IN_THE_CELLS},
        "rows": list(table.index),
        "columns": list(dict.fromkeys(table.columns.get_level_values(0))),
        "cells": cells,
    }
    return json.dumps(payload, default=_plain)


def _stopped(end: dict[str, Any] | None) -> dict[str, Any] | None:
    """Where a cell stopped (``sequential.stopped``) as JSON: the interval a list."""
    if end is None:
        return None
    return {**end, **({"ci": [_number(v) for v in end["ci"]]} if "ci" in end else {})}


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _bounds(bounds: tuple[float, float] | None) -> list[float] | None:
    """An interval as ``[low, high]``, or None where it is unknown (no test, or a bound
    NaN): never a list holding nulls."""
    if bounds is None or any(math.isnan(bound) for bound in bounds):
        return None
    return [float(bound) for bound in bounds]


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers, for ``json.dumps``."""
    return value.item() if hasattr(value, "item") else str(value)
