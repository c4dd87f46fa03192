"""Had each trial levelled off? A published trial carries its last evaluations of the
tuned metric (``last_evaluations``: ``"step:value"`` pairs in step order, and
``last_evaluations_range``, their max − min; ``scripts/publish_study.py``). A trial is
called flat where that range is within the standard deviation of its cell's seeds (the
same loss in the same column): more training would move it less than another seed
does. Otherwise it is rising or falling, by its last evaluation against its first.
"""

from __future__ import annotations

import math

import pandas as pd

from search_spaces.reports.tables import final_rows, infer_layout

COLUMNS = ("loss", "column", "seed", "last_evaluations", "range", "cell_std", "verdict")


def _direction(evaluations: str) -> str:
    values = [float(pair.split(":")[1]) for pair in evaluations.split()]
    return "rising" if values[-1] > values[0] else "falling"


def plateau_table(rows: pd.DataFrame, metric: str = "eval_f1") -> pd.DataFrame:
    """One line per final-stage trial that carries its last evaluations (``COLUMNS``);
    empty where none does (shards published before the CSV carried them)."""
    if "last_evaluations" not in rows:
        return pd.DataFrame(columns=COLUMNS)
    rows = final_rows(rows).reset_index(drop=True)
    rows = rows[rows["last_evaluations"].astype("string").fillna("") != ""]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows_key, cols_key, _ = infer_layout(rows)
    spread = rows.groupby([rows_key, cols_key])[metric].transform(lambda s: s.std(ddof=1))
    lines = []
    for index, row in rows.iterrows():
        width, std = float(row["last_evaluations_range"]), float(spread[index])
        if math.isnan(std):
            verdict = "one seed: no spread to compare"
        elif width <= std:
            verdict = "flat"
        else:
            verdict = _direction(str(row["last_evaluations"]))
        lines.append(
            {
                "loss": row[rows_key],
                "column": row[cols_key],
                "seed": int(row["seed"]),
                "last_evaluations": row["last_evaluations"],
                "range": width,
                "cell_std": std,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(lines, columns=COLUMNS).sort_values(["loss", "column", "seed"])


def plateau_markdown(table: pd.DataFrame) -> str:
    """The table, and a sentence counting the flat trials."""
    if table.empty:
        return "No trial here carries its last evaluations."
    lines = [
        "| loss | column | seed | last evaluations (step:value) | range | cell's seed std"
        " | verdict |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for line in table.itertuples(index=False):
        std = "–" if math.isnan(line.cell_std) else f"{line.cell_std:.2f}"
        lines.append(
            f"| {line.loss} | {line.column} | {line.seed} | {line.last_evaluations}"
            f" | {line.range:.2f} | {std} | {line.verdict} |"
        )
    flat = int((table["verdict"] == "flat").sum())
    return (
        "\n".join(lines)
        + f"\n\n{flat} of {len(table)} final-stage trials flat: their last evaluations lie"
        " within their cell's seed spread (standard deviation over seeds)."
    )
