"""Does bf16 score what fp32 scores? The F1 of mixed precision against full precision,
from published sweeps that differ in ``training.precision`` only.

Each pair is one data set's two sides (docs/results/NAME-trials.csv, written by
scripts/publish_study.py; a side may be several shards): the same losses, seeds, data
and steps, one in fp32 and one in bf16. Per loss it prints each precision's mean ±
standard deviation over the seeds, the paired difference bf16 − fp32 (same seed) with
its 95% interval and p value, the smallest difference those seeds resolve
(``search_spaces.reports.resolution``), and whether the trials had converged: the range
of each trial's last three dev evaluations against the seeds' spread. Unless
``--no-docs``, it writes the section "Training: the same F1 in bf16" of
docs/benchmarks.md.

    python benchmarks/bf16_parity.py                       # the published parity study
    python benchmarks/bf16_parity.py --pair mrpc NAME_FP32 NAME_BF16 --no-docs
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_table import write_section
from search_spaces.reports.paired import paired_test
from search_spaces.reports.tables import final_rows

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
TITLE = "Training: the same F1 in bf16"
# The published parity study (docs/results/README.md, study 6): data set, fp32, bf16.
PAIRS = [
    ("conll2003", "study6-parity-conll-12ep-fp32", "study6-parity-conll-12ep-bf16"),
    ("mrpc", "study6-parity-mrpc-fp32", "study6-parity-mrpc-bf16"),
    (  # MRC-NER: study B's 12-epoch fp32 shards at seeds 0-2 against their bf16 reruns
        "conll2003 (MRC-NER)",
        "studyB-conll-mrc-12ep-s0,studyB-conll-mrc-12ep-s1,studyB-conll-mrc-12ep-s2",
        "study6-parity-conll-mrc-bf16-s0-1,study6-parity-conll-mrc-bf16-s2",
    ),
]
PRECISIONS = ("fp32", "bf16")
METRIC = "eval_f1"
# A trial that learned nothing, or scores at or under the no-skill rule (search_spaces.flags).
FLAG_COLUMNS = ("degenerate_reason", "below_no_skill_reason")


def load_trials(names: str, precision: str, results: Path = RESULTS) -> pd.DataFrame:
    """The final-stage trials of the published sweeps ``names`` (one, or several
    comma-separated: the shards of one side), each checked to have trained in
    ``precision`` (the ``precision`` column MLflow's tag gave it).

    Raises:
        ValueError: a trial trained in another precision, or says none.
    """
    frames = [pd.read_csv(results / f"{name}-trials.csv") for name in names.split(",")]
    rows = final_rows(pd.concat(frames, ignore_index=True))
    if "precision" not in rows:
        raise ValueError(f"{names}: the trials do not say which precision they trained in")
    other = rows[rows["precision"] != precision]
    if not other.empty:
        found = sorted(other["precision"].astype(str).unique())
        raise ValueError(f"{names}: {len(other)} trial(s) trained in {found}, not {precision}")
    return rows


def parity(fp32: pd.DataFrame, bf16: pd.DataFrame) -> pd.DataFrame:
    """One line per loss: ``n`` seeds, each precision's mean and standard deviation,
    the paired difference ``delta`` (bf16 − fp32, by seed) with its 95% interval
    (``low``, ``high``) and ``p_value``, the difference the seeds ``resolve`` (and its
    range), ``within`` (|delta| below it), the largest range of a trial's last three
    evaluations (``last_range``) against the larger seed spread (``spread``), and
    ``steps`` (each trial's optimiser steps; the same for both precisions) and the
    ``flagged`` trials ("bf16 seed 1": constant, or at or under no-skill)."""
    from scipy import stats

    rows = pd.concat([fp32, bf16], ignore_index=True)
    tests = paired_test(rows, "precision", "loss", METRIC, baseline="fp32")
    lines = []
    for test in tests.itertuples(index=False):
        block = rows[rows["loss"] == test.loss]
        by = block.groupby("precision")[METRIC]
        k = int(test.n_pairs)
        wide = block.pivot_table(index="seed", columns="precision", values=METRIC).dropna()
        differences = wide["bf16"] - wide["fp32"]
        half = (
            stats.t.ppf(0.975, k - 1) * differences.std(ddof=1) / math.sqrt(k)
            if k >= 2
            else math.nan
        )
        spread = float(by.std(ddof=1).max())
        last = pd.to_numeric(block.get("last_evaluations_range"), errors="coerce")
        flags = pd.Series(False, index=block.index)
        for column in FLAG_COLUMNS:
            if column in block:
                flags |= block[column].astype("string").fillna("") != ""
        flagged = [f"{r.precision} seed {r.seed}" for r in block[flags].itertuples()]
        lines.append(
            {
                "loss": test.loss,
                "n": k,
                **{f"{p}_mean": float(by.mean()[p]) for p in PRECISIONS},
                **{f"{p}_sd": float(by.std(ddof=1)[p]) for p in PRECISIONS},
                "delta": float(test.mean_diff),
                "low": float(test.mean_diff - half),
                "high": float(test.mean_diff + half),
                "p_value": float(test.p_value),
                "resolves": float(test.resolvable),
                "resolves_low": float(test.resolvable_low),
                "resolves_high": float(test.resolvable_high),
                "within": abs(float(test.mean_diff)) < float(test.resolvable),
                "last_range": float(last.max()) if last.notna().any() else math.nan,
                "spread": spread,
                "steps": sorted(pd.to_numeric(block["optimizer_steps"]).astype(int).unique()),
                "flagged": flagged,
            }
        )
    return pd.DataFrame(lines)


def render(tables: dict[str, pd.DataFrame], pairs: list[tuple[str, str, str]]) -> str:
    """The table, one line per data set and loss, with the sweeps it reads."""
    head = (
        "| data set | loss | seeds | fp32 | bf16 | Δ bf16 − fp32 (95% interval) | paired p "
        "| the seeds resolve | Δ within it | last 3 evaluations move ≤ | seed spread |"
    )
    lines = [head, "|" + "---|" * 11]
    for dataset, table in tables.items():
        for line in table.itertuples(index=False):
            cells = [
                dataset,
                line.loss,
                str(line.n),
                f"{line.fp32_mean:.2f} ± {line.fp32_sd:.2f}",
                f"{line.bf16_mean:.2f} ± {line.bf16_sd:.2f}",
                f"{line.delta:+.2f} ({line.low:+.2f} to {line.high:+.2f})",
                f"{line.p_value:.2f}",
                f"{line.resolves:.2f} (plausibly {line.resolves_low:.2f}–{line.resolves_high:.2f})",
                "yes" if line.within else "**no**",
                f"{line.last_range:.2f}",
                f"{line.spread:.2f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")

    def links(names: str) -> str:
        return ", ".join(f"[{name}](results/{name}.md)" for name in names.split(","))

    sources = "; ".join(
        f"{dataset}: {links(fp32)} and {links(bf16)}" for dataset, fp32, bf16 in pairs
    )
    return "\n".join(lines) + f"\n\n{verdict(tables)}\n\nSweeps: {sources}."


def verdict(tables: dict[str, pd.DataFrame]) -> str:
    """What the table says, in sentences: how many differences the seeds resolve, how
    far the intervals reach, and which trials had not levelled off."""
    every = pd.concat(
        [table.assign(dataset=dataset) for dataset, table in tables.items()], ignore_index=True
    )
    unresolved = int(every["within"].sum())
    reach = float(every[["low", "high"]].abs().to_numpy().max())
    rising = every[every["last_range"] > every["spread"]]
    level = (
        "every cell's trials moved less than its seeds spread over their last three evaluations"
        if rising.empty
        else "over their last three evaluations the trials of "
        + ", ".join(f"{r.loss} on {r.dataset}" for r in rising.itertuples())
        + " moved more than their seeds spread ("
        + ", ".join(f"{r.last_range:.2f} against {r.spread:.2f}" for r in rising.itertuples())
        + ")"
    )
    flagged = [
        f"{r.loss} on {r.dataset}: {', '.join(r.flagged)}" for r in every.itertuples() if r.flagged
    ]
    flags = (
        " Flagged (constant, or at or under no-skill) and kept in the means: "
        + "; ".join(flagged)
        + "."
        if flagged
        else ""
    )
    return (
        f"{unresolved} of {len(every)} differences bf16 − fp32 are within what their seeds "
        f"resolve: these seeds show no difference there. The differences' 95% intervals "
        f"reach {reach:.2f} F1: a difference up to that size, either way, is not excluded. "
        f"Convergence: {level}.{flags}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pair",
        nargs=3,
        action="append",
        metavar=("DATASET", "FP32", "BF16"),
        help="a data set and its two published sweeps (default: the parity study's)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args()
    pairs = [tuple(pair) for pair in args.pair] if args.pair else PAIRS
    tables = {
        dataset: parity(
            load_trials(fp32, "fp32", args.results), load_trials(bf16, "bf16", args.results)
        )
        for dataset, fp32, bf16 in pairs
    }
    table = render(tables, pairs)
    print(table)
    if not args.no_docs:
        body = (
            "Command: `python benchmarks/bf16_parity.py` (reads the published sweeps, "
            'trains nothing). Δ is paired by seed; "the seeds resolve" is the smallest '
            "mean difference a paired t-test at 5% detects with 80% power at these "
            "seeds' spread of differences (docs/sweeps.md). A trial has converged where "
            "its last three dev evaluations move less than the seeds spread.\n\n" + table
        )
        write_section(ROOT / "docs" / "benchmarks.md", TITLE, body)


if __name__ == "__main__":
    main()
