"""The two marks on a table's trials (``search_spaces.flags``) and what they change.

Constant trials are left out of a table's statistics: its means, stds, Δs and paired
tests are over the same trials, the others. A cell keeps them visible (``[1/3
constant]``; a cell of constant trials only shows no mean) and the notes list each
with its evidence. Below-no-skill trials stay in the statistics, marked (``[1/3 below
no-skill]``) and listed; where leaving them out too changes a Δ's sign or whether its
test resolves it (``|Δ| ≥`` the resolvable difference), the notes give both figures
(``with_sensitivity``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from search_spaces.flags import below_no_skill_reason, degenerate_reason
from search_spaces.reports.formats import STATS, ordered, sort_key

ENTRY_KEYS = ("loss", "dataset", "variant")  # with seed, value and reason


def reasons(rows: pd.DataFrame, rule: Callable[..., str | None], metric: str) -> pd.Series:
    """``rule``'s reason for each row it marks (``degenerate_reason`` or
    ``below_no_skill_reason``), indexed like ``rows``; rows it does not mark are absent."""
    if rows.empty:
        return pd.Series(dtype=object)
    return rows.apply(lambda row: rule(row, metric), axis=1).dropna()


def marks(rows: pd.DataFrame, metric: str) -> tuple[pd.Series, pd.Series]:
    """The constant rows' reasons and the below-no-skill rows' reasons (``reasons``)."""
    return reasons(rows, degenerate_reason, metric), reasons(rows, below_no_skill_reason, metric)


def with_marks(
    table: pd.DataFrame, rows: pd.DataFrame, constant: pd.Series, below: pd.Series
) -> pd.DataFrame:
    """``table`` (of ``rows``) carrying both marks: ``attrs["degenerate"]`` and
    ``attrs["below_no_skill"]`` list the marked trials (``ENTRY_KEYS``, seed, value,
    reason, and sweep in a merged table), ``attrs["degenerate_cells"]`` and
    ``attrs["below_no_skill_cells"]`` count them per (row, column)."""
    rows_key, cols_key, metric = (table.attrs[k] for k in ("rows_key", "cols_key", "metric"))
    for name, found in (("degenerate", constant), ("below_no_skill", below)):
        table.attrs[name] = _entries(rows, found, metric)
        marked = rows.loc[found.index]
        table.attrs[f"{name}_cells"] = (
            marked.groupby([rows_key, cols_key]).size().to_dict() if len(marked) else {}
        )
    return table


def _entries(rows: pd.DataFrame, found: pd.Series, metric: str) -> list[dict[str, Any]]:
    entries = [
        {
            **{key: rows.at[i, key] for key in ENTRY_KEYS},
            "seed": int(rows.at[i, "seed"]),
            "value": float(rows.at[i, metric]),
            "reason": reason,
            **({"sweep": str(rows.at[i, "sweep"])} if "sweep" in rows else {}),
        }
        for i, reason in found.items()
    ]
    return sorted(
        entries,
        key=lambda e: (str(e["loss"]), str(e["dataset"]), sort_key(e["variant"]), e["seed"]),
    )


def with_every_cell(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``table`` (a ``pivot_table`` of some of ``rows``) with a row and a column for
    every value of its keys among ``rows``: a cell whose trials were all left out
    (constant) stays, without a mean."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    index = ordered([*table.index, *rows[rows_key]], table.attrs["baseline"])
    columns = ordered([*table.columns.get_level_values(0), *rows[cols_key]])
    stats = list(dict.fromkeys(table.columns.get_level_values(1))) or list(STATS)
    shown = table.reindex(index=index, columns=pd.MultiIndex.from_product([columns, stats]))
    shown.index.name, shown.columns.names = table.index.name, table.columns.names
    shown.attrs = dict(table.attrs)
    return shown


def with_sensitivity(
    table: pd.DataFrame, tests: pd.DataFrame, without: pd.DataFrame, tests_without: pd.DataFrame
) -> pd.DataFrame:
    """``table`` carrying, in ``attrs["sensitivity"]``, each Δ whose sign or resolution
    changes when the below-no-skill trials are left out too: ``row``, ``column``,
    ``delta`` (the table's) and ``resolvable`` (its test's, ``tests``), ``delta_without``
    and ``resolvable_without`` from ``without`` (the ``pivot_table`` of the trials that
    are neither constant nor below no-skill) and ``tests_without`` (their tests)."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    resolvable = _resolvable(tests, rows_key, cols_key)
    resolvable_without = _resolvable(tests_without, rows_key, cols_key)
    changed = []
    for (row, column), figure in resolvable.items():
        if (row, column) not in resolvable_without or row not in without.index:
            continue
        delta = float(table.at[row, (column, "delta")])
        delta_without = float(without.at[row, (column, "delta")])
        figure_without = resolvable_without[(row, column)]
        if _differ(delta, figure, delta_without, figure_without):
            changed.append(
                {
                    "row": row,
                    "column": column,
                    "delta": delta,
                    "resolvable": figure,
                    "delta_without": delta_without,
                    "resolvable_without": figure_without,
                }
            )
    table.attrs["sensitivity"] = changed
    return table


def _resolvable(tests: pd.DataFrame, rows_key: str, cols_key: str) -> dict[Any, float]:
    """Each tested cell's resolvable difference: ``{(row, column): figure}``."""
    return {
        (line[rows_key], line[cols_key]): float(line["resolvable"])
        for line in tests.to_dict("records")
    }


def _differ(delta: float, figure: float, other: float, other_figure: float) -> bool:
    """Whether two Δs of one cell disagree on their sign or on being resolved (``|Δ|``
    at least the resolvable difference; NaN resolves nothing)."""
    if math.isnan(delta) or math.isnan(other):
        return False
    return (delta > 0) != (other > 0) or (abs(delta) >= figure) != (abs(other) >= other_figure)
