"""One loss parameter's cells in two set-ups, side by side (study A: Tversky's α with
every tag in the average, study 3, against the entity tags only, study 5).

Each set-up's final-stage trials are grouped by the parameter's value as the loss label
gives it (``tversky(alpha=0.4,...)`` → ``0.4``). A cell is the mean ± std over all its
seeds, constant trials counted at their score, since "what a seed gets" is what the two
set-ups are compared on; beside it, how many of its seeds were constant (one prediction
for ≥ 99% of dev, ``degenerate_reason``) and the learning rate they trained at where
the trials carry it.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from search_spaces.reports.tables import final_rows

COLUMNS = ("value", "mean", "std", "seeds", "constant", "learning_rate")


def parameter_of(label: str, name: str) -> str | None:
    """``name``'s value in a loss label such as ``tversky(alpha=0.4,beta=0.6)``."""
    found = re.search(rf"[(,]{re.escape(name)}=([^,)]+)", label)
    return found.group(1) if found else None


def cells_by(rows: pd.DataFrame, name: str, loss: str, metric: str = "eval_f1") -> pd.DataFrame:
    """One line per value of the parameter ``name`` of the loss ``loss`` (its
    ``loss_name``; ``COLUMNS``), in value order.

    Raises:
        ValueError: no final-stage trial of ``loss`` carries ``name``.
    """
    rows = final_rows(rows).dropna(subset=[metric])
    rows = rows[rows["loss_name"] == loss].copy()
    rows["value"] = rows["loss"].map(lambda label: parameter_of(str(label), name))
    rows = rows.dropna(subset=["value"])
    if rows.empty:
        raise ValueError(f"no final-stage trial of {loss!r} has the parameter {name!r}")
    reasons = rows.get("degenerate_reason", pd.Series("", index=rows.index))
    rows["constant"] = reasons.astype("string").fillna("") != ""
    rows["learning_rate"] = rows.get("tuned_learning_rate", math.nan)
    lines = [
        {
            "value": value,
            "mean": float(group[metric].mean()),
            "std": float(group[metric].std(ddof=1)),
            "seeds": int(group["seed"].nunique()),
            "constant": int(group["constant"].sum()),
            "learning_rate": sorted(group["learning_rate"].dropna().unique()),
        }
        for value, group in rows.groupby("value")
    ]
    table = pd.DataFrame(lines, columns=COLUMNS)
    return table.sort_values("value", key=lambda v: v.astype(float)).reset_index(drop=True)


def _cell(line: pd.Series | None) -> list[str]:
    if line is None:
        return ["not run", "", ""]
    std = "" if math.isnan(line["std"]) else f" ± {line['std']:.2f}"
    rate = ", ".join(f"{r:.0e}".replace("e-0", "e-") for r in line["learning_rate"]) or "–"
    return [f"{line['mean']:.2f}{std}", f"{line['constant']} of {line['seeds']}", rate]


def beside_markdown(
    first: pd.DataFrame, second: pd.DataFrame, name: str, names: tuple[str, str]
) -> str:
    """The two set-ups' cells as one Markdown table, a line per value of ``name``."""
    values = sorted(set(first["value"]) | set(second["value"]), key=float)
    header = [name]
    for label in names:
        header += [f"{label}: F1 (all seeds)", "constant", "rate"]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:|---:|---" * 2 + "|"]
    for value in values:
        cells = [value]
        for table in (first, second):
            match = table[table["value"] == value]
            cells += _cell(None if match.empty else match.iloc[0])
        lines.append("| " + " | ".join(cells) + " |")
    return (
        "\n".join(lines)
        + "\n\nF1: mean ± std over every seed, constant trials (one prediction for ≥ 99% of"
        " dev) counted at their score; constant: how many of the seeds were; rate: the"
        " learning rate the seeds trained at, where the trials record it."
    )
