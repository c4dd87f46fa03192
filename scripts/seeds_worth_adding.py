"""Which cells of a published study more seeds could decide: per cell, Δ against ce (paired
by seed), the difference its seeds resolve, their ratio, and the seeds a paired test
needs to resolve that Δ at the spread seen so far.

A cell whose seeds resolve less than |Δ| is resolved already; one whose resolvable
difference is within ``--factor`` (default 2) of |Δ| is worth more seeds; beyond that,
no affordable number of seeds decides it at this spread. The seeds-needed figure
carries the spread's own uncertainty (with 3 seeds, ×0.52 to ×6.3 on the resolvable
difference: docs/sweeps.md).

    python scripts/seeds_worth_adding.py SHARD [SHARD ...] [--factor 2] [--without-flagged]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from merge_study import RESULTS, shard_rows

from search_spaces.reports.paired import paired_test
from search_spaces.reports.resolution import seeds_to_resolve
from search_spaces.reports.tables import final_rows, infer_layout

FLAGS = ("degenerate_reason", "below_no_skill_reason")


def verdict(delta: float, resolves: float, factor: float) -> str:
    """ "resolved", "worth more seeds" or "not at this spread" (or "one seed" without a test)."""
    if math.isnan(resolves):
        return "no test"
    if resolves <= abs(delta):
        return "resolved"
    return "worth more seeds" if resolves <= factor * abs(delta) else "not at this spread"


def cells(rows: pd.DataFrame, factor: float = 2.0, metric: str = "eval_f1") -> pd.DataFrame:
    """One line per cell other than ce's: its Δ, p value, resolvable difference, their
    ratio, the verdict, and the seeds needed (``seeds_to_resolve``)."""
    rows = final_rows(rows)
    rows_key, cols_key, _ = infer_layout(rows)
    tests = paired_test(rows, rows_key, cols_key, metric)
    lines = []
    for test in tests.itertuples(index=False):
        label, column = getattr(test, rows_key), getattr(test, cols_key)
        wide = (
            rows[rows[cols_key] == column]
            .groupby(["seed", rows_key])[metric]
            .mean()
            .unstack(rows_key)
            .reindex(columns=[label, "ce"])
            .dropna()
        )
        spread = float((wide[label] - wide["ce"]).std(ddof=1)) if len(wide) >= 2 else math.nan
        delta, resolves = float(test.mean_diff), float(test.resolvable)
        lines.append(
            {
                "loss": label,
                "column": column,
                "seeds": int(test.n_pairs),
                "delta": delta,
                "p_value": float(test.p_value),
                "resolves": resolves,
                "ratio": resolves / abs(delta) if delta else math.inf,
                "verdict": verdict(delta, resolves, factor),
                "seeds_needed": seeds_to_resolve(spread, delta),
            }
        )
    table = pd.DataFrame(lines)
    table["seeds_needed"] = table["seeds_needed"].astype("Int64")  # None: over 100
    return table


def render(table: pd.DataFrame) -> str:
    head = (
        "| loss | column | seeds | Δ vs ce | paired p | resolves | resolves / abs(Δ) | verdict "
        "| seeds to resolve Δ |"
    )
    lines = [head, "|" + "---|" * 9]
    for line in table.itertuples(index=False):
        if line.verdict == "no test":  # fewer than 2 pairs
            lines.append(f"| {line.loss} | {line.column} | {line.seeds} | | | | | no test | |")
            continue
        needed = "over 100" if pd.isna(line.seeds_needed) else str(line.seeds_needed)
        cells = [
            line.loss,
            line.column,
            str(line.seeds),
            f"{line.delta:+.2f}",
            f"{line.p_value:.3f}",
            f"{line.resolves:.2f}",
            f"{line.ratio:.1f}",
            line.verdict,
            needed,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shards", nargs="+", help="published shards' stems in docs/results")
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("--without-flagged", action="store_true", help="leave flagged trials out")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = pd.concat([shard_rows(args.results, s) for s in args.shards], ignore_index=True)
    if args.without_flagged:
        flagged = pd.Series(False, index=rows.index)
        for column in FLAGS:
            if column in rows:
                flagged |= rows[column].astype("string").fillna("") != ""
        rows = rows[~flagged]
    print(render(cells(rows, args.factor)))


if __name__ == "__main__":
    main()
