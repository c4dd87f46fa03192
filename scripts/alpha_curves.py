"""Table 10 across set-ups: the Tversky α curves of published studies and the paper's two
columns in one table and one figure (``search_spaces.reports.alpha_curves``), each curve
with the setup block of the trials it was drawn from.

    python scripts/alpha_curves.py NAME --curve LABEL PAGE[,PAGE...] [--curve ...] \\
        [--metric eval_f1] [--no-paper] [--out DIR]

A PAGE is a published shard or a merged page (its listed shards) of docs/results.
Writes the section "The α curves" of NAME.md and the figure NAME-alpha.png into
``--out`` (default: docs/results).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import setup_sections

from docs_table import write_page_section
from search_spaces.paper import paper_figures
from search_spaces.reports.alpha_curves import alpha_curve, curves_markdown, curves_png
from search_spaces.reports.setup_block import setup_block, setup_lines


def curve_rows(pages: str, results: Path) -> pd.DataFrame:
    """The final-stage trials, with their setup columns, of the comma-separated pages."""
    casing = json.loads((results / setup_sections.MODELS).read_text())
    shards = [shard for page in pages.split(",") for shard in setup_sections.page_shards(page)]
    if not shards:
        raise ValueError(f"{pages}: no published shard")
    return pd.concat(
        [setup_sections.shard_rows(shard, casing) for shard in shards], ignore_index=True
    )


def paper_columns() -> dict[str, dict[float, float]]:
    """Table 10's columns as the paper prints them, named by what they ran."""
    return {
        f"the paper: {figure.model} on {figure.dataset} ({figure.split})": {
            float(alpha): float(value) for alpha, value in figure.alpha.items()
        }
        for figure in paper_figures()
        if figure.alpha
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the page's stem in docs/results")
    parser.add_argument(
        "--curve", nargs=2, action="append", required=True, metavar=("LABEL", "PAGES")
    )
    parser.add_argument("--metric", default="eval_f1")
    parser.add_argument("--no-paper", action="store_true", help="leave the paper's columns out")
    parser.add_argument("--out", type=Path, default=setup_sections.RESULTS)
    args = parser.parse_args()
    results = setup_sections.RESULTS
    curves, setups = {}, []
    try:
        for label, pages in args.curve:
            rows = curve_rows(pages, results)
            tversky = rows[rows["loss_name"] == "tversky"]
            curves[label] = alpha_curve(tversky, args.metric)
            lines = setup_lines(setup_block(tversky, "loss", "dataset"))
            setups.append(f"**{label}** ({pages}):\n\n" + "\n".join(lines[1:]))
    except ValueError as error:
        raise SystemExit(f"alpha_curves: {error}") from None
    paper = {} if args.no_paper else paper_columns()
    figure = f"{args.name}-alpha.png"
    (args.out / figure).write_bytes(curves_png(curves, paper, args.metric))
    body = "\n\n".join(
        [
            f"{args.metric}, mean ± standard deviation over seeds (the seeds in brackets);"
            " the paper's columns as printed.",
            curves_markdown(curves, paper),
            f"![the α curves]({figure})",
            "Each curve's setup, from the specs that ran:",
            *setups,
        ]
    )
    write_page_section(args.out, args.name, "The α curves", body)
    print(body)


if __name__ == "__main__":
    main()
