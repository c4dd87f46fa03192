"""Which of two changes moves a loss's Δ against the baseline? The 2 × 2 factorial over
published shards (study B's: the formulation crossed with the dsc recipe): per cell the
loss's per-seed Δ against the baseline, then both main effects and the interaction with
their Welch-type intervals (``search_spaces.reports.factorial``).

    python scripts/factorial.py --factors formulation "dsc recipe" \\
        --levels tagger MRC-NER --levels "per position" set-level \\
        --cell tagger "per position" LOSS_SHARD[,SHARD...] BASELINE_SHARD[,SHARD...] \\
        ... (four cells) --loss dsc [--page NAME]

A cell's loss comes from its loss shards (their ``loss_name`` rows), its baseline from
its baseline shards, paired by seed; prints the tables as Markdown and with ``--page``
writes them as the section "The factorial" of docs/results/NAME.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from merge_study import RESULTS, shard_rows

from docs_table import write_page_section
from search_spaces.reports.factorial import factorial, factorial_markdown
from search_spaces.reports.interaction import per_seed_deltas


def cell_deltas(
    results: Path, loss_shards: str, baseline_shards: str, loss: str, baseline: str
) -> pd.Series:
    """One cell's per-seed Δs: ``loss`` from the comma-separated ``loss_shards``,
    ``baseline`` from ``baseline_shards`` (a shard may hold another recipe of ``loss``,
    which this cell does not take)."""

    def rows(shards: str, name: str) -> pd.DataFrame:
        found = pd.concat([shard_rows(results, s) for s in shards.split(",")], ignore_index=True)
        return found[found["loss_name"] == name]

    both = pd.concat([rows(loss_shards, loss), rows(baseline_shards, baseline)])
    return per_seed_deltas(both, loss, baseline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factors", nargs=2, required=True, metavar="NAME")
    parser.add_argument("--levels", nargs=2, action="append", required=True, metavar="LEVEL")
    parser.add_argument(
        "--cell",
        nargs=4,
        action="append",
        required=True,
        metavar=("LEVEL", "LEVEL", "LOSS_SHARDS", "BASELINE_SHARDS"),
    )
    parser.add_argument("--loss", required=True, help="the loss's name (loss_name), e.g. dsc")
    parser.add_argument("--baseline", default="ce")
    parser.add_argument("--page", help="also write the section into docs/results/PAGE.md")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    if len(args.levels) != 2:
        parser.error("--levels is given twice, once per factor")
    levels = (tuple(args.levels[0]), tuple(args.levels[1]))
    for cell in args.cell:
        for factor, level, known in zip(args.factors, cell[:2], levels, strict=True):
            if level not in known:
                parser.error(f"--cell: {factor} {level!r} is not one of its levels {known}")
    try:
        cells = {
            (levels[0].index(first), levels[1].index(second)): cell_deltas(
                args.results, losses, baselines, args.loss, args.baseline
            )
            for first, second, losses, baselines in args.cell
        }
        found = factorial(cells, tuple(args.factors), levels)  # type: ignore[arg-type]
    except ValueError as error:
        raise SystemExit(f"factorial: {error}") from None
    text = factorial_markdown(found)
    print(text)
    if args.page:
        write_page_section(args.results, args.page, "The factorial", text)


if __name__ == "__main__":
    main()
