"""Does a loss's Δ against ce depend on the set-up? The interaction between two set-ups'
published shards (study B: the softmax tagger against MRC-NER), each holding the loss
and ce at the same seeds: per-seed Δs in each, their means' difference, Welch's test
and the difference those seeds resolve (``search_spaces.reports.interaction``).

    python scripts/interaction.py --first SHARD [SHARD ...] --second SHARD [SHARD ...] \\
        --loss dsc [--names tagger MRC-NER] [--page NAME]

prints the interaction as Markdown; with ``--page`` it also writes it as the section
"The interaction" of docs/results/NAME.md.
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
from search_spaces.reports.interaction import interaction, interaction_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", nargs="+", required=True, help="the first set-up's shards")
    parser.add_argument("--second", nargs="+", required=True, help="the second set-up's shards")
    parser.add_argument("--loss", required=True, help="the loss's name (loss_name), e.g. dsc")
    parser.add_argument("--baseline", default="ce")
    parser.add_argument("--names", nargs=2, default=("first", "second"), metavar="NAME")
    parser.add_argument("--page", help="also write the section into docs/results/PAGE.md")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    def rows(shards: list[str]) -> pd.DataFrame:
        return pd.concat([shard_rows(args.results, s) for s in shards], ignore_index=True)

    try:
        found = interaction(rows(args.first), rows(args.second), args.loss, args.baseline)
    except ValueError as error:
        raise SystemExit(f"interaction: {error}") from None
    text = interaction_markdown(found, *args.names)
    print(text)
    if args.page:
        write_page_section(args.results, args.page, "The interaction", text)


if __name__ == "__main__":
    main()
