"""What a table's cell is keyed by: everything that differs among its trials.

A cell averages trials that differ only by seed. Merged sweeps (``merged_rows``) or
keys given by hand (``rows=sweep``) can put trials of different losses, data sets,
variants or tuned settings under one (row, column) pair; averaging them would call
three losses three seeds, or a tagger's F1 with an MRC-NER model's under one label.
``keyed_by_cell`` splits such rows by what differs, a setup field among them. The
``sweep`` column keys cells only where asked (as the rows or the columns): two sweeps
of the same settings are reruns, which the legend counts as runs (``seeds``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from search_spaces.reports.formats import format_value, ordered
from search_spaces.setup import FIELD_LABELS, PREFIX

# What tells trials apart besides their seed (and the tuned settings, ``tuned_<name>``).
CELL_KEYS = ("loss", "dataset", "variant")
KEY_JOINER = " / "  # between the parts of a composite rows key and of its labels


def require_columns(rows: pd.DataFrame, columns: Iterable[str]) -> None:
    """Raises ValueError naming the ``columns`` that ``rows`` lack, and those it has."""
    missing = [column for column in columns if column not in rows.columns]
    if missing:
        raise ValueError(f"rows lack column(s) {missing}; they have {list(rows.columns)}")


def differing_keys(rows: pd.DataFrame, rows_key: str, cols_key: str) -> list[str]:
    """The columns among ``CELL_KEYS``, the tuned settings and the setup fields
    (``setup_<field>``, ``search_spaces.setup``), other than the two keys, whose values
    differ among the trials of one (``rows_key``, ``cols_key``) cell."""
    tuned = sorted(column for column in rows.columns if column.startswith("tuned_"))
    setup = [f"{PREFIX}{field}" for field in FIELD_LABELS if f"{PREFIX}{field}" in rows]
    candidates = [
        key
        for key in (*CELL_KEYS, *tuned, *setup)
        if key in rows and key not in (rows_key, cols_key)
    ]
    if rows.empty or not candidates:
        return []
    # As text, so that a missing tuned setting (NaN) differs from a set one.
    text = rows[[rows_key, cols_key, *candidates]].astype(str)
    distinct = text.groupby([rows_key, cols_key])[candidates].nunique()
    return [key for key in candidates if (distinct[key] > 1).any()]


def label_keys(rows: pd.DataFrame, rows_key: str, cols_key: str) -> list[str]:
    """The ``differing_keys`` a cell's label needs: each in turn, unless the keys
    before it already tell its values apart (a tagger's ``loss_positions`` follows its
    ``formulation``)."""
    chosen: list[str] = []
    for key in differing_keys(rows, rows_key, cols_key):
        text = rows[[rows_key, cols_key, *chosen, key]].astype(str)
        if (text.groupby([rows_key, cols_key, *chosen])[key].nunique() > 1).any():
            chosen.append(key)
    return chosen


def _part(key: str, value: Any) -> str:
    """A label's part: the value, or ``name=value`` for a tuned setting."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    if key.startswith(PREFIX):
        return "n/a" if missing else format_value(value)
    if not key.startswith("tuned_"):
        return format_value(value)
    name = key.removeprefix("tuned_")
    return f"{name} not tuned" if missing else f"{name}={format_value(value)}"


def key_name(key: str) -> str:
    """A key as a table names it: a setup field without its prefix (``formulation``)."""
    return key.removeprefix(PREFIX)


def split_by(rows: pd.DataFrame, rows_key: str, cols_key: str) -> dict[str, list[str]]:
    """The setup fields that split a cell (``differing_keys``), each with its values:
    ``{"formulation": ["mrc", "tagger"]}``, for the table's notes."""
    return {
        key_name(key): ordered(rows[key].fillna("n/a").astype(str).unique())
        for key in differing_keys(rows, rows_key, cols_key)
        if key.startswith(PREFIX)
    }


def keyed_by_cell(rows: pd.DataFrame, rows_key: str, cols_key: str) -> tuple[pd.DataFrame, str]:
    """``rows`` and the rows key to table them by: ``rows_key`` where each cell's trials
    differ by seed alone, else a composite column (``"sweep / loss"``, its labels
    ``"sw-1 / ce"``; ``"loss / formulation"``, ``"ce / mrc"``) joining ``rows_key`` with
    the ``label_keys`` columns."""
    extra = label_keys(rows, rows_key, cols_key)
    if not extra:
        return rows, rows_key
    parts = [rows_key, *extra]
    composite = KEY_JOINER.join(key_name(part) for part in parts)
    labels = [
        KEY_JOINER.join(_part(key, value) for key, value in zip(parts, line, strict=True))
        for line in rows[parts].itertuples(index=False)
    ]
    return rows.assign(**{composite: labels}), composite
