"""What seeds-until-decided would have run: studies B and 2's published per-seed results
replayed, in seed order, through the group-sequential rule (``search_spaces.sequential``).

Each cell other than ce's is paired with ce at the same seeds (the loss's F1 − ce's);
the rule looks after 3, 5, 7 and 10 seeds and says, at the first look that ends the
cell, decided (either sign), futile or max, with the repeated (adjusted) confidence
interval and the repeated p-value there. A cell whose published seeds end before the
rule ends it says ``continue``: the rule would have run more. Constant trials are left
out, as the tables leave them; below-no-skill trials stay. Seed-trials saved: the
cell's seeds run less the seeds at its stop, and ce's less the most any cell of its
column needed. Unless ``--no-docs``, it writes the section "Seeds until decided:
studies B and 2 replayed" of docs/benchmarks.md.

    python scripts/replay_sequential.py [--delta-min 0.5] [--no-docs]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from docs_table import write_section
from search_spaces.flags import degenerate_reason
from search_spaces.reports.tables import final_rows
from search_spaces.sequential import Look, SeedsUntilDecided, Verdict, design, run_rule

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
TITLE = "Seeds until decided: studies B and 2 replayed"
BASELINE = "ce"
METRIC = "eval_f1"
STUDY_2 = [
    f"study2-mrpc-variants-{part}"
    for part in ("ce", "focal-a", "focal-b", "dice-a", "dice-b", "dice-c", "dsc-a", "dsc-b")
]
# Study C's seeds added to study 2's cells (docs/results/README.md): the same specs.
STUDY_2_EXTENDED = [
    "studyC-mrpc-negative-ce-seed3",
    "studyC-mrpc-negative-dsc-seed3",
    "studyC-mrpc-posneg-ce-seeds3-5",
    "studyC-mrpc-posneg-dsc-seeds3-5",
]
# (study, set-up, its shards)
GROUPS = [
    ("B", "MRC-NER, 12 epochs", [f"studyB-conll-mrc-12ep-s{seed}" for seed in range(5)]),
    ("B", "tagger", ["studyB-conll-tagger-s0-4"]),
    ("2", "pair classifier", STUDY_2 + STUDY_2_EXTENDED),
]


@dataclass(frozen=True)
class Replay:
    """One cell replayed: where it is, the seeds it ran, the looks the rule took, and
    the seed-trials of the cell the rule would not have run."""

    study: str
    setup: str
    loss: str
    column: str
    differences: tuple[float, ...]
    looks: list[Look]

    @property
    def seeds_run(self) -> int:
        return len(self.differences)

    @property
    def stopped(self) -> Look | None:
        """The look that ended the cell, or None where the rule wanted more seeds."""
        return self.looks[-1] if self.looks and self.looks[-1].verdict.is_final() else None

    def seeds_needed(self, rule: SeedsUntilDecided) -> int:
        """The seeds of the look that ended it; where it has not ended, those of the next
        look (the fewest the rule would run: it may stop there)."""
        if self.stopped:
            return self.stopped.seeds
        return next(n for n in rule.looks if n > (self.looks[-1].seeds if self.looks else 0))

    def saved(self, rule: SeedsUntilDecided) -> int:
        """Seed-trials of the cell the rule would not have run (negative: at least this
        many more it would have)."""
        return self.seeds_run - self.seeds_needed(rule)


def trials(shards: list[str], results: Path = RESULTS) -> pd.DataFrame:
    """The shards' final-stage trials, constant ones left out."""
    rows = final_rows(pd.concat([pd.read_csv(results / f"{s}-trials.csv") for s in shards]))
    constant = rows.apply(lambda row: degenerate_reason(row.to_dict()) is not None, axis=1)
    return rows[~constant.astype(bool)]


def differences(rows: pd.DataFrame) -> dict[tuple[str, str], pd.Series]:
    """Per (column, loss) other than the baseline: loss − baseline at each seed both
    ran, in seed order; the column is the variant where there are several, else the
    data set."""
    column = "variant" if rows["variant"].nunique() > 1 else "dataset"
    wide = rows.groupby([column, "seed", "loss"])[METRIC].mean().unstack("loss")
    found = {}
    for name in wide.index.get_level_values(0).unique():
        block = wide.loc[name]
        for loss in sorted(c for c in block.columns if c != BASELINE):
            paired = block[[loss, BASELINE]].dropna().sort_index()
            found[(str(name), str(loss))] = paired[loss] - paired[BASELINE]
    return found


def replay(rule: SeedsUntilDecided, results: Path = RESULTS) -> list[Replay]:
    """Every cell of ``GROUPS`` through ``rule``."""
    replays = []
    for study, setup, shards in GROUPS:
        for (column, loss), diffs in differences(trials(shards, results)).items():
            looks = run_rule(diffs.to_numpy(), rule)
            replays.append(Replay(study, setup, loss, column, tuple(diffs), looks))
    return replays


def baseline_saved(replays: list[Replay], rule: SeedsUntilDecided) -> int:
    """ce's seed-trials the rule would not have run: per column, its seeds less the
    most any of the column's cells needed (negative: more it would have run)."""
    most: dict[tuple[str, str, str], tuple[int, int]] = {}
    for cell in replays:
        key = (cell.study, cell.setup, cell.column)
        ran, needed = most.get(key, (0, 0))
        most[key] = (max(ran, cell.seeds_run), max(needed, cell.seeds_needed(rule)))
    return sum(ran - needed for ran, needed in most.values())


def verdict_text(cell: Replay) -> str:
    if not cell.looks:
        return "too few seeds for a look"
    last = cell.looks[-1]
    if last.verdict is Verdict.CONTINUE:
        return "continue: its seeds end before the next look"
    return f"**{last.verdict}** ({last.reason})"


def render(replays: list[Replay], rule: SeedsUntilDecided) -> str:
    """The per-cell table and the seed-trials saved."""
    lines = [
        "| study | set-up | loss | column | seeds run | Δ per seed (in seed order) | look "
        "(seeds) | verdict | Δ there | repeated 95% CI | repeated p | seeds the rule runs "
        "| seed-trials saved |",
        "|---|---|---|---|---:|---|---|---|---:|---|---:|---:|---:|",
    ]
    for cell in replays:
        last = cell.looks[-1] if cell.looks else None
        shown = (
            [
                f"{last.look} ({last.seeds})",
                verdict_text(cell),
                f"{last.mean:+.2f}",
                f"{last.ci_low:+.2f} to {last.ci_high:+.2f}",
                f"{last.p_value:.3f}",
            ]
            if last
            else ["", verdict_text(cell), "", "", ""]
        )
        lines.append(
            f"| {cell.study} | {cell.setup} | {cell.loss} | {cell.column} | {cell.seeds_run} "
            f"| {' '.join(f'{d:+.2f}' for d in cell.differences)} | "
            + " | ".join(shown)
            + f" | {needs(cell, rule)} | {cell.saved(rule)} |"
        )
    sources = "; ".join(
        f"study {study}, {setup}: " + ", ".join(f"[{s}](results/{s}.md)" for s in shards)
        for study, setup, shards in GROUPS
    )
    return "\n".join(lines) + "\n\n" + summary(replays, rule) + f"\n\nShards: {sources}."


def needs(cell: Replay, rule: SeedsUntilDecided) -> str:
    """The seeds the rule runs at this cell: exactly, where it ended, else at least."""
    return str(cell.seeds_needed(rule)) if cell.stopped else f"≥ {cell.seeds_needed(rule)}"


def summary(replays: list[Replay], rule: SeedsUntilDecided) -> str:
    """The verdicts counted and the seed-trials saved, in sentences."""
    ended = [cell for cell in replays if cell.stopped]
    counts = pd.Series([str(cell.stopped.verdict) for cell in ended if cell.stopped]).value_counts()
    said = ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) or "none"
    ran = sum(cell.seeds_run for cell in replays)
    saved = sum(cell.saved(rule) for cell in ended)
    more = -sum(min(0, cell.saved(rule)) for cell in replays if not cell.stopped)
    against_max = sum(rule.max - cell.seeds_needed(rule) for cell in ended)
    first = design(rule).t[0]
    return (
        f"At the first look ({rule.looks[0]} seeds) a cell is decided only where |t| ≥ "
        f"{first:.0f}, and its repeated CI is d̄ ± {first:.0f}·s/√{rule.looks[0]}: there the "
        "rule stops, in practice, only for futility. "
        f"Of {len(replays)} cells the rule ends {len(ended)} within their published seeds "
        f"({said}); the others it would continue. Seed-trials of the cells: {saved} of "
        f"{ran} saved by the cells it ends, at least {more} more for those it continues; "
        f"ce's: {baseline_saved(replays, rule)} saved (negative: more). Against a fixed "
        f"{rule.max}-seed design, the cells it ends save {against_max} seed-trials. "
        f"δ_min {rule.delta_min:g} F1; α {rule.alpha:g} two-sided over looks at "
        f"{', '.join(map(str, rule.looks))} seeds."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delta-min", type=float, default=0.5, help="F1 points (default 0.5)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args()
    rule = SeedsUntilDecided(delta_min=args.delta_min)
    table = render(replay(rule, args.results), rule)
    print(table)
    if not args.no_docs:
        command = shlex.join(["python", "scripts/replay_sequential.py", *sys.argv[1:]])
        write_section(ROOT / "docs" / "benchmarks.md", TITLE, f"Command: `{command}`.\n\n{table}")


if __name__ == "__main__":
    main()
