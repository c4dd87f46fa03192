"""Two set-ups' cells of one loss parameter, side by side: study 5's Tversky α with the
entity tags only, say, beside study 3's with every tag (``search_spaces.reports.beside``).

    python scripts/beside.py --first SHARD [SHARD ...] --second SHARD [SHARD ...] \\
        --loss tversky --parameter alpha [--names "all tags" "entity tags"] \\
        [--page NAME] [--title TITLE]

prints the table as Markdown; with ``--page`` it also writes it as the section TITLE
(default "Beside the other set-up") of docs/results/NAME.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from merge_study import RESULTS, shard_rows

from docs_table import write_page_section
from search_spaces.reports.beside import beside_markdown, cells_by


def with_rate(results: Path, shard: str) -> pd.DataFrame:
    """A shard's rows; where they do not record the rate they trained at (shards without
    a tuning stage), it is their spec's ``training.learning_rate``."""
    rows = shard_rows(results, shard)
    if "tuned_learning_rate" not in rows:
        spec = yaml.safe_load((results / f"{shard}-spec.yaml").read_text())
        rows["tuned_learning_rate"] = float(spec["training"]["learning_rate"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", nargs="+", required=True, help="the first set-up's shards")
    parser.add_argument("--second", nargs="+", required=True, help="the second set-up's shards")
    parser.add_argument("--loss", required=True, help="the loss's name (loss_name), e.g. tversky")
    parser.add_argument("--parameter", required=True, help="the loss parameter, e.g. alpha")
    parser.add_argument("--names", nargs=2, default=("first", "second"), metavar="NAME")
    parser.add_argument("--page", help="also write the section into docs/results/PAGE.md")
    parser.add_argument("--title", default="Beside the other set-up")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    def cells(shards: list[str]) -> pd.DataFrame:
        rows = pd.concat([with_rate(args.results, s) for s in shards], ignore_index=True)
        return cells_by(rows, args.parameter, args.loss)

    try:
        first, second = cells(args.first), cells(args.second)
    except ValueError as error:
        raise SystemExit(f"beside: {error}") from None
    text = beside_markdown(first, second, args.parameter, tuple(args.names))
    print(text)
    if args.page:
        write_page_section(args.results, args.page, args.title, text)


if __name__ == "__main__":
    main()
