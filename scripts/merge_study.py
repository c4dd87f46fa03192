"""Merge published shards of one study into its table: the per-seed rows each shard's
``scripts/publish_study.py`` read back through the API (``docs/results/SHARD-trials.csv``)
go through the same table code as ``GET /v1/grid?ids=`` (means over seeds, Δ against
ce, the paired tests, tuned settings, optimiser steps, degenerate trials), so shards
run by different services merge as one sweep's trials would; no cell is written by hand.

    python scripts/merge_study.py NAME SHARD [SHARD ...] [--title TITLE] [--results DIR]

writes docs/results/NAME.csv and NAME.png and the "The table" and "The shards" sections
of NAME.md, and "The last evaluations" where the shards' trials carry them
(``search_spaces.reports.plateau``: which trials had levelled off); a section headed
"Against the paper", or any other, is kept as it is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from docs_table import write_section
from search_spaces.reports.csv_json import to_csv
from search_spaces.reports.markdown import to_markdown
from search_spaces.reports.plateau import plateau_markdown, plateau_table
from search_spaces.reports.plots import to_png
from sweep_service.tables import grid_of

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def shard_rows(results: Path, name: str) -> pd.DataFrame:
    """One shard's per-seed rows as its trials CSV holds them, typed as the API's."""
    rows = pd.read_csv(results / f"{name}-trials.csv")
    if "loss_name" not in rows:  # shards published before the CSV carried it
        rows["loss_name"] = rows["loss"].str.split("(").str[0]
    for column in ("degenerate_reason", "below_no_skill_reason", "stop_reason"):
        if column in rows:
            rows[column] = rows[column].astype("string").fillna("")
    rows["shard"] = name
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the merged table's stem in docs/results")
    parser.add_argument("shards", nargs="+", help="published shards' stems")
    parser.add_argument("--title", help="the table's title (default: NAME)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="default: docs/results")
    args = parser.parse_args()
    shards = [shard_rows(args.results, shard) for shard in args.shards]
    rows = pd.concat(shards, ignore_index=True)
    title = args.title or args.name
    table = grid_of(rows, f"the shards of {args.name}", title)
    stem = args.results / args.name
    Path(f"{stem}.csv").write_text(to_csv(table))
    Path(f"{stem}.png").write_bytes(to_png(table))
    path = Path(f"{stem}.md")
    if not path.exists():
        path.write_text(f"# {args.name}\n")
    listed = "\n".join(
        f"- [{shard}]({shard}.md): {', '.join(sorted(group['loss'].unique()))}"
        f" ({len(group)} trials)"
        for shard, group in rows.groupby("shard", sort=False)
    )
    write_section(path, "The shards", listed)
    write_section(path, "The table", f"{to_markdown(table)}\n\n![{args.name}]({args.name}.png)")
    plateau = plateau_table(rows)
    if not plateau.empty:
        write_section(path, "The last evaluations", plateau_markdown(plateau))
    print(f"wrote {path} from {len(rows)} trials of {len(args.shards)} shard(s)")


if __name__ == "__main__":
    main()
