"""Write docs/results/SCOREBOARD.md: one line per claim of the paper that a published
study here tested, from the published per-trial CSVs and specs alone (the tables'
own code: ``grid_of`` with the paper's Δ beside ours, ``search_spaces.paper``).

    python scripts/scoreboard.py           # rewrite the scoreboard
    python scripts/scoreboard.py --check   # exit 1 where it is stale

A Δ line gives the paper's Δ against CE (its table, model and data), ours with its 95%
confidence interval over its seeds, how the setups differ, and a verdict: **same sign,
inside the CI** (our interval excludes 0 on the paper's side and holds its Δ), **same
sign** (it excludes 0 on the paper's side, not at the paper's size), **opposite** (it
excludes 0 on the other side) or **undecided** (it holds 0). A Table 10 line compares
the shape of the Tversky α curve: where it peaks and whether any α collapses.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import setup_sections

from search_spaces.paper import paper_figures
from search_spaces.reports.alpha_curves import alpha_curve, shape
from sweep_service.tables import grid_of

RESULTS = setup_sections.RESULTS
PAGE = RESULTS / "SCOREBOARD.md"


@dataclass(frozen=True)
class Claim:
    """A study page whose cells the paper's table reports."""

    page: str  # the merged page in docs/results
    note: str  # what it ran, in a few words


DELTA_CLAIMS = (
    Claim("studyB-conll-mrc-12ep", "MRC-NER (the paper's formulation), 12 epochs"),
    Claim("studyB-conll-tagger", "softmax tagger, 20 epochs"),
    Claim("study1-conll", "softmax tagger, whole training file"),
    Claim("study4-gsd", "softmax tagger"),
    Claim("study2-mrpc", "pair classifier, the Table 8 variants"),
)
# Table 10's α curve in the softmax tagger: study 5 (entity tags) and study 3 (every
# tag; its α 0.3 from study C's whole-file rerun, as study 5's page sets it beside).
CURVE_CLAIMS = {
    "study5-conll-fg": ("entity tags only", None),
    "study3-conll": ("every tag", "studyC-conll-tversky-seeds0-3"),
}


def claim_rows(page: str) -> pd.DataFrame:
    """The final-stage trials of a page's shards, with their setup columns."""
    casing = json.loads((RESULTS / setup_sections.MODELS).read_text())
    shards = setup_sections.page_shards(page)
    rows = pd.concat([setup_sections.shard_rows(s, casing) for s in shards], ignore_index=True)
    return rows.assign(status=rows.get("status", "FINISHED"))


def verdict(paper: float, low: float, high: float) -> str:
    """The verdict of a Δ line (the module's docstring)."""
    if math.isnan(low) or low <= 0 <= high:
        return "undecided"
    if (low > 0) != (paper > 0):
        return "opposite"
    return "same sign, inside the CI" if low <= paper <= high else "same sign"


def delta_lines(claim: Claim) -> list[tuple[str, str]]:
    """One line per cell of the claim's page that the paper reports, with its verdict."""
    rows = claim_rows(claim.page)
    table = grid_of(rows, claim.page, claim.page, paper=True)
    seeds = table.xs("seeds", axis=1, level="stat")
    lines = []
    for entry in table.attrs["paper"]:
        low, high = entry["ci"]
        count = int(seeds.at[entry["row"], entry["column"]])
        found = verdict(entry["paper"], low, high)
        line = (
            f"| {entry['source']} | {entry['row']} ({entry['column']}) | {entry['paper']:+.2f}"
            f" | {entry['ours']:+.2f} [{low:+.2f}, {high:+.2f}], {count} seeds"
            f" | [{claim.page}]({claim.page}.md): {claim.note}; {', '.join(entry['differs'])}"
            f" | {found} |"
        )
        lines.append((line, found))
    return lines


def curve_line(page: str, note: str, extra: str | None) -> list[str]:
    """Table 10's two columns against the tagger's α curve on one page."""
    rows = claim_rows(page)
    if extra:
        casing = json.loads((RESULTS / setup_sections.MODELS).read_text())
        more = setup_sections.shard_rows(extra, casing)
        rows = pd.concat([rows, more[more["loss_name"] == "tversky"]], ignore_index=True)
    means = alpha_curve(rows)["mean"]
    found = shape(means)
    collapsed = found.collapsed
    ours = f"peak at α {found.peak:g} ({found.peak_value:.2f}); " + (
        f"collapses (F1 0) at α {', '.join(f'{a:g}' for a in collapsed)}"
        if collapsed
        else "no α collapses"
    )
    lines = []
    for figure in paper_figures():
        if not figure.alpha:
            continue
        paper = shape(pd.Series(figure.alpha)).words()
        agreement = "opposite: ours collapses" if collapsed else "same shape"
        lines.append(
            f"| {figure.cite()} | Tversky α 0.1 … 0.9 | {paper} | {ours}, {len(means)} α"
            f" | [{page}]({page}.md): softmax tagger on CoNLL-2003, {note}; formulation"
            f" tagger for {figure.maps_to['formulation']}, model minilm-l6 for {figure.model}"
            f" | {agreement} |"
        )
    return lines


VERDICTS = ("same sign, inside the CI", "same sign", "opposite", "undecided")


def verdict_counts(verdicts: list[str]) -> str:
    """``same sign, inside the CI: 0, same sign: 1, opposite: 8, undecided: 14``."""
    return ", ".join(f"{name}: {verdicts.count(name)}" for name in VERDICTS)


def curve_summary(lines: list[str]) -> str:
    """How many of Table 10's comparisons find our α curve collapsing, in a sentence."""
    collapsing = sum("opposite: ours collapses" in line for line in lines)
    return (
        f"Table 10: in {collapsing} of {len(lines)} comparisons our α curve collapses"
        " (F1 0 at some α) where the paper's does not."
    )


def readme_section(text: str) -> str:
    """The results README's opening section: the verdicts and the link."""
    summary = text.split("Verdicts: ", 1)[1].split(".\n", 1)[0]
    curves = text.split("Curves: ", 1)[1].split("\n", 1)[0]
    return (
        "[SCOREBOARD.md](SCOREBOARD.md) sets each of the paper's Δs that a study here ran"
        " beside ours, with our 95% interval, how the setups differ and a verdict, and"
        " Table 10's α curve beside ours; generated from the published CSVs. Δ verdicts:"
        f" {summary}. {curves}"
    )


def scoreboard() -> str:
    """The page's text."""
    header = [
        "| the paper | cell | paper's Δ | ours (95% CI, seeds) | our study and how it differs"
        " | verdict |",
        "|---|---|---:|---|---|---|",
    ]
    found = [line for claim in DELTA_CLAIMS for line in delta_lines(claim)]
    lines = [line for line, _ in found]
    curves = [
        line
        for page, (note, extra) in CURVE_CLAIMS.items()
        for line in curve_line(page, note, extra)
    ]
    summary = verdict_counts([verdict for _, verdict in found])
    intro = (
        "# Scoreboard: the paper's claims against the studies here\n\n"
        "Generated by `scripts/scoreboard.py` from the published per-trial CSVs and specs"
        " (the tables' own code; the paper's figures from `search_spaces/paper/figures.yaml`):"
        " one line per cell of the paper's tables that a study here ran. Every study here is"
        " MiniLM-L6 on CPUs, on samples of the paper's data or stand-ins for it, scored on"
        " dev; the paper's are BERT-sized models on the whole data, mostly scored on test."
        " A verdict says what our interval says about the paper's Δ in our setup, not"
        " whether the paper is right in its own.\n"
    )
    return (
        f"{intro}\n## Δ against CE\n\nVerdicts: {summary}.\n\n"
        + "\n".join([*header, *lines])
        + "\n\n## Table 10: the shape of the Tversky α curve\n\n"
        + f"Curves: {curve_summary(curves)}\n\n"
        + "\n".join(
            [
                "| the paper | cell | the paper's curve | ours | our study and how it differs"
                " | verdict |",
                "|---|---|---|---|---|---|",
                *curves,
            ]
        )
        + "\n"
    )


OPENING = "The scoreboard"


def place_opening(text: str, body: str) -> str:
    """``text`` with its ``## The scoreboard`` section replaced, or put right after its
    title, so the page opens with it."""
    section = f"## {OPENING}\n\n{body.rstrip()}\n\n"
    pattern = re.compile(rf"^## {OPENING}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text)
    title, _, rest = text.partition("\n")
    return f"{title}\n\n{section}{rest.lstrip()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report a stale page, change none")
    args = parser.parse_args()
    text = scoreboard()
    current = PAGE.read_text() if PAGE.exists() else ""
    readme = (RESULTS / "README.md").read_text()
    if args.check:
        fresh = text == current and place_opening(readme, readme_section(text)) == readme
        print("SCOREBOARD.md and the README's opening are " + ("current" if fresh else "stale"))
        raise SystemExit(0 if fresh else 1)
    PAGE.write_text(text)
    readme = RESULTS / "README.md"
    readme.write_text(place_opening(readme.read_text(), readme_section(text)))
    print(f"wrote {PAGE} and the results README's opening")


if __name__ == "__main__":
    main()
