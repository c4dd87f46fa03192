"""A table's setup block: what its trials ran, from their rows' ``setup_<field>`` columns
(``search_spaces.setup``), never typed by hand.

``setup_block`` gives one entry per setup field in ``FIELD_LABELS`` order: its one value
where every trial shares it, else each value with the table rows (or columns, or
cells) that ran it. ``setup_lines`` and ``setup_caption`` word it for the notes and the
PNG.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from search_spaces.reports.formats import format_value, ordered
from search_spaces.setup import FIELD_LABELS, PREFIX

SETUP_HEADING = "Setup (from the trials' resolved specs):"
CAPTION_FIELDS = ("kind", "formulation", "model", "tokenizer", "train_data", "precision")


def setup_block(rows: pd.DataFrame, rows_key: str, cols_key: str) -> list[dict[str, Any]]:
    """Each setup field of ``rows`` (the table's trials, keyed as the table is) as
    ``{"field", "label", "value"}`` where all share one value, or ``{"field", "label",
    "values": [{"value", "where"}]}``, ``where`` naming the table rows (``"ce, dsc"``),
    columns or ``row @ column`` cells that ran it (rows the field does not apply to,
    ``n/a``, are not listed); fields no trial has are left out."""
    block = []
    for field, label in FIELD_LABELS.items():
        column = f"{PREFIX}{field}"
        if column not in rows or rows[column].isna().all():
            continue
        values = rows[column].fillna("n/a").astype(str)
        if values.nunique() == 1:
            block.append({"field": field, "label": label, "value": values.iloc[0]})
            continue
        where = _where(rows.assign(**{column: values}), column, rows_key, cols_key)
        block.append({"field": field, "label": label, "values": where})
    return block


def _where(rows: pd.DataFrame, column: str, rows_key: str, cols_key: str) -> list[dict[str, str]]:
    """Each value of ``column`` with where it ran: by table row where each row has one
    value, else by column, else by cell."""
    for keys in ([rows_key], [cols_key], [rows_key, cols_key]):
        if (rows.groupby(keys)[column].nunique() == 1).all():
            break
    entries = []
    for value in ordered(set(rows[column].unique()) - {"n/a"}):
        chosen = rows[rows[column] == value]
        places = chosen[keys].drop_duplicates().itertuples(index=False)
        shown = [" @ ".join(format_value(part) for part in place) for place in places]
        entries.append({"value": value, "where": ", ".join(ordered(shown))})
    return entries


def setup_lines(block: list[dict[str, Any]]) -> list[str]:
    """The block under a table: a heading, then ``- label: value`` per field (a field
    that differs: each value with where it ran, ``value (ce, dsc)``)."""
    if not block:
        return []
    lines = [SETUP_HEADING]
    for entry in block:
        if "value" in entry:
            lines.append(f"- {entry['label']}: {entry['value']}")
        else:
            shown = "; ".join(f"{e['value']} ({e['where']})" for e in entry["values"])
            lines.append(f"- {entry['label']}: {shown}")
    return lines


def setup_caption(block: list[dict[str, Any]]) -> str:
    """The few fields a plot's caption names (task, formulation, model, data,
    precision), joined by `` · ``; a field that differs reads ``several``."""
    by_field = {entry["field"]: entry for entry in block}
    parts = [
        str(by_field[field].get("value", f"{by_field[field]['label']}: several"))
        for field in CAPTION_FIELDS
        if field in by_field
    ]
    return " · ".join(parts)


def split_line(split: dict[str, list[str]]) -> str | None:
    """The settings that split cells of one (row, column) pair, whose trials' setups
    differ (``cells.keyed_by_cell``): ``Cells split by formulation (mrc, tagger): ...``."""
    if not split:
        return None
    shown = "; ".join(f"{name} ({', '.join(values)})" for name, values in split.items())
    return (
        f"Cells split by {shown}: their trials' setups differ, and a cell never averages"
        " trials of different setups."
    )
