"""The paper's Δ beside ours (``grid --paper``): for each tested cell of a table whose
data set, loss and variant the paper reports (``search_spaces.paper``), the paper's Δ
against CE, where it came from, how the setups differ, and whether it lies inside our
Δ's 95% confidence interval."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from search_spaces.paper import paper_delta
from search_spaces.reports.formats import format_value

METRIC_NAMES = {"eval_f1": "f1", "eval_exact_match": "exact_match"}
PAPER_HEADING = "The paper's Δ beside ours (its table, model and data; ours on this setup):"


def with_paper(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``table`` carrying ``attrs["paper"]``: one entry per tested cell the paper
    reports (``row``, ``column``, ``ours``, ``ci``, ``paper``, ``source``,
    ``differs``, ``inside``), which the notes list under the table."""
    attrs = table.attrs
    metric = METRIC_NAMES.get(attrs["metric"])
    if metric is None or attrs.get("baseline") != "ce":
        table.attrs["paper"] = []
        return table
    names = rows.groupby("loss")["loss_name"].first() if "loss_name" in rows else {}
    entries = []
    for (row, column), bounds in (attrs.get("ci") or {}).items():
        dataset, variant = _cell_data(rows, attrs["cols_key"], row, column)
        found = paper_delta(dataset, str(names.get(row, row)), variant, metric)
        if found is None:
            continue
        figure, delta = found
        low, high = bounds
        ours = float(table.at[row, (column, "delta")])
        entries.append(
            {
                "row": row,
                "column": column,
                "ours": ours,
                "ci": [low, high],
                "paper": delta,
                "source": figure.cite(),
                "differs": _differences(rows, row, figure),
                "inside": bool(low <= delta <= high) if not math.isnan(low) else None,
            }
        )
    table.attrs["paper"] = entries
    return table


def _cell_data(rows: pd.DataFrame, cols_key: str, row: Any, column: Any) -> tuple[str, str]:
    """The data set and variant of a cell: its column where the table is keyed by
    them, else its trials' one value."""
    dataset = column if cols_key == "dataset" else str(rows["dataset"].iloc[0])
    variant = column if cols_key == "variant" else "original"
    return str(dataset), str(variant)


def _differences(rows: pd.DataFrame, row: Any, figure: Any) -> list[str]:
    """How our cell's setup differs from the paper's: the model, the formulation, a
    stand-in data set, a capped training set, the split scored."""
    trials = rows[rows["loss"] == row]
    first = trials.iloc[0] if len(trials) else pd.Series(dtype=object)
    differs = [f"model {first.get('setup_model', 'unrecorded')} for {figure.model}"]
    formulation = first.get("setup_formulation")
    if isinstance(formulation, str) and formulation != figure.maps_to["formulation"]:
        differs.append(f"formulation {formulation} for {figure.maps_to['formulation']}")
    if figure.stand_in:
        differs.append(figure.stand_in)
    data = first.get("setup_train_data")
    if isinstance(data, str) and "drawn" in data:
        differs.append("a sample of the training data")
    differs.append(f"scored on {_split(first)} for {figure.split}")
    return differs


def _split(trial: pd.Series) -> str:
    evaluated = trial.get("setup_eval_data")
    return (
        "dev"
        if not isinstance(evaluated, str) or "tuning split" not in evaluated
        else "a tuning split"
    )


def paper_lines(table: pd.DataFrame) -> list[str]:
    """``attrs["paper"]`` as the notes' lines: a heading, then one line per cell."""
    entries = table.attrs.get("paper") or []
    if not entries:
        return []
    lines = [PAPER_HEADING]
    for entry in entries:
        low, high = entry["ci"]
        where = {True: "inside our CI", False: "outside our CI", None: "no CI"}[entry["inside"]]
        lines.append(
            f"- {format_value(entry['row'])} ({format_value(entry['column'])}): paper"
            f" {entry['paper']:+.2f} ({entry['source']}); ours {entry['ours']:+.2f}"
            f" [{low:+.2f}, {high:+.2f}]: {where}; setup differs: {', '.join(entry['differs'])}"
        )
    return lines
