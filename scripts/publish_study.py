"""Publish a finished study from a running service into docs/results/: everything in
the generated sections is read back through the REST API (the table, its plot, the
per-seed trials, the spec) or from the MLflow store the service tracks to (trial
times); no cell is written by hand. The discussion beside it (a section headed
"Against the paper") is kept as it is.

    python scripts/publish_study.py SWEEP_ID NAME [--api http://127.0.0.1:8000]
        [--tracking-uri sqlite:///...]    # the service's DICESWEEP_MLFLOW_TRACKING_URI

writes docs/results/NAME.md, NAME.csv (cells), NAME-trials.csv (one line per trial and
seed, with its last 3 evaluations of the tuned metric from MLflow, to show whether it
had levelled off), NAME.png and NAME-spec.yaml.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from eval_history import curve

from docs_table import machine_description, write_section
from sweep_service.frames import trials_frame

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
TRIAL_COLUMNS = [
    "loss",
    "loss_name",
    "dataset",
    "variant",
    "seed",
    "status",
    "stage",
    "tuned_learning_rate",
    "tuned_warmup_ratio",
    "tuned_epochs",
    "optimizer_steps",
    "stop_reason",
    "degenerate_reason",  # constant (search_spaces.flags)
    "below_no_skill_reason",
    "eval_f1",
    "eval_precision",
    "eval_recall",
    "eval_exact_match",
    "eval_baseline_f1",
    "eval_baseline_accuracy",
    "eval_baseline_exact_match",
    "eval_top_prediction_share",
    "eval_positive_prediction_share",
    # the reported checkpoint on the test split, where the trial scored it (score_test)
    "test_f1",
    "test_precision",
    "test_recall",
    "test_exact_match",
    "run_id",
]


def trials(api: httpx.Client, sweep_id: str) -> pd.DataFrame:
    """Every trial of the sweep, one line each, through the paged trials endpoint."""
    lines: list[dict[str, Any]] = []
    token = None
    while True:
        params = {"page_token": token} if token else {}
        page = api.get(f"/v1/sweeps/{sweep_id}/trials", params=params).raise_for_status().json()
        lines += page["data"]
        token = page["next_page_token"]
        if not token:
            break
    frame = trials_frame(lines)  # the client's rows: setup_<field> among them
    frame["below_no_skill_reason"] = [line.get("below_no_skill_reason") for line in lines]
    for column in ("degenerate_reason", "below_no_skill_reason"):  # empty: not marked
        frame[column] = frame[column].fillna("")
    setup = [c for c in frame.columns if c.startswith("setup_")]
    return frame[[c for c in TRIAL_COLUMNS if c in frame.columns] + setup]


def trial_hours(tracking_uri: str, run_ids: list[str]) -> float:
    """The trials' training clocks summed, in hours (``training_seconds``). Shards
    published before 2026-11-28 summed their MLflow runs' spans instead, which also
    count the time a stage-1 trial waits paused at a halving rung."""
    from mlflow.tracking import MlflowClient

    from sweep_service.results import training_seconds

    client = MlflowClient(tracking_uri)
    return sum(training_seconds(client, run_id) for run_id in run_ids) / 3600


def last_evaluations(
    tracking_uri: str, run_ids: list[str], metric: str, count: int = 3
) -> pd.DataFrame:
    """Each run's last ``count`` evaluations of ``metric`` from its MLflow history, so
    a reader can see whether a trial had levelled off: ``last_evaluations`` as
    ``"step:value"`` pairs in step order (``"1756:79.84 …"``) and ``last_evaluations_range``,
    their max − min in the metric's units (NaN with fewer than 2). One row per run id,
    in order; an empty history gives ``""`` and NaN. Each value is the one evaluated at
    its step, also at the last step of a trial that reports its best evaluation
    (``eval_history.curve``)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    rows = []
    for run_id in run_ids:
        last = curve(client, run_id, metric)[-count:]
        values = [m.value for m in last]
        rows.append(
            {
                "last_evaluations": " ".join(f"{m.step}:{m.value:.6g}" for m in last),
                "last_evaluations_range": max(values) - min(values)
                if len(values) > 1
                else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["last_evaluations", "last_evaluations_range"])


def trained_in(tracking_uri: str, run_ids: list[str]) -> list[str]:
    """The precision each run trained in (fp32, bf16, fp16), from the tag the driver
    sets on it; "" for a run from before trials said."""
    from mlflow.tracking import MlflowClient

    from search_spaces.contract import PRECISION_TAG

    client = MlflowClient(tracking_uri)
    return [client.get_run(run_id).data.tags.get(PRECISION_TAG, "") for run_id in run_ids]


def spec_that_ran(tracking_uri: str, sweep_id: str) -> dict[str, Any]:
    """The resolved spec a sweep without a preset ran: its parent run's ``spec.yaml``."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from search_spaces.contract import ROLE_TAG, SWEEP_TAG, dicesweep_experiments

    client = MlflowClient(tracking_uri)
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'sweep'"
    (parent,) = client.search_runs(dicesweep_experiments(client), query, max_results=1)
    mlflow.set_tracking_uri(tracking_uri)
    text = mlflow.artifacts.load_text(f"{parent.info.artifact_uri}/spec.yaml")
    return dict(yaml.safe_load(text))


def experiment_of(tracking_uri: str, run_id: str) -> str:
    """The name of the MLflow experiment holding ``run_id`` (the owner's)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    return str(client.get_experiment(client.get_run(run_id).info.experiment_id).name)


def class_ratios(preset: dict[str, Any], datasets_dir: Path) -> str:
    """The training sets a Table 8 study's trials saw (each variant built, then capped as
    its spec says), their size and positive share beside the paper's QQP ones."""
    from search_spaces.dataset_refs import dataset_info
    from trainables.data.variants import PAPER_VARIANTS
    from trainables.trial_data import DataRequest, read_examples, resolve_scored_class

    task, training = preset["task"], preset["training"]
    info = dataset_info(task["dataset"][0], task.get("kind"), datasets_dir)
    base = DataRequest(
        info,
        "original",
        preset["model"],
        training["max_seq_length"],
        training["doc_stride"],
        training["max_train_examples"],
        training["max_eval_examples"],
        task.get("positive_label"),
    )
    base, scored = resolve_scored_class(base, datasets_dir)
    lines = [
        f"Scored (positive) class: {scored.describe() if scored else base.positive_label}.",
        "",
        "| variant | pairs | positive | QQP in the paper | positive |",
        "|---|---:|---:|---:|---:|",
    ]
    for variant in task["variant"]:
        train, _ = read_examples(replace(base, variant=variant), datasets_dir)
        share = sum(example.label == base.positive_label for example in train) / len(train)
        size, paper_share = PAPER_VARIANTS[variant]
        lines.append(
            f"| {variant} | {len(train):,} | {share:.1%} | {size:,} | {float(paper_share):.0%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_id")
    parser.add_argument("name", help="the files' stem in docs/results, e.g. table8")
    parser.add_argument(
        "--api", default=os.environ.get("DICESWEEP_API_URL", "http://127.0.0.1:8000")
    )
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument(
        "--conditions",
        default="the Ray head to itself",
        help="what else ran on the machine meanwhile, said in the results",
    )
    args = parser.parse_args()
    headers = {}
    if os.environ.get("DICESWEEP_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['DICESWEEP_API_KEY']}"
    api = httpx.Client(base_url=args.api, headers=headers, timeout=120)
    sweep = api.get(f"/v1/sweeps/{args.sweep_id}").raise_for_status().json()
    if sweep["status"] != "succeeded":
        raise SystemExit(f"sweep {args.sweep_id} is {sweep['status']}: publish a finished one")
    grid = f"/v1/sweeps/{args.sweep_id}/grid"
    markdown = api.get(grid, params={"format": "markdown"}).raise_for_status().text
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / args.name
    Path(f"{stem}.csv").write_text(api.get(grid, params={"format": "csv"}).raise_for_status().text)
    Path(f"{stem}.png").write_bytes(
        api.get(grid, params={"format": "png"}).raise_for_status().content
    )
    spec = (
        api.get(f"/v1/search-spaces/{sweep['preset']}").raise_for_status().json()["spec"]
        if sweep["preset"]
        else spec_that_ran(args.tracking_uri, args.sweep_id)
    )
    Path(f"{stem}-spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    per_trial = trials(api, args.sweep_id)
    per_trial.insert(
        per_trial.columns.get_loc("stage") + 1,
        "precision",
        trained_in(args.tracking_uri, list(per_trial["run_id"])),
    )
    metric = str((spec.get("search") or {}).get("metric", "eval_f1"))  # the spec's default
    evaluations = last_evaluations(args.tracking_uri, list(per_trial["run_id"]), metric)
    per_trial = pd.concat([per_trial.reset_index(drop=True), evaluations], axis=1)
    buffer = io.StringIO()
    per_trial.to_csv(buffer, index=False, float_format="%.6g")
    Path(f"{stem}-trials.csv").write_text(buffer.getvalue())

    started = datetime.fromisoformat(sweep["started_at"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(sweep["finished_at"].replace("Z", "+00:00"))
    wall = (finished - started).total_seconds()
    hours = trial_hours(args.tracking_uri, list(per_trial["run_id"]))
    experiment = experiment_of(args.tracking_uri, str(per_trial["run_id"].iloc[0]))
    links = sweep.get("links") or {}
    counts = sweep["trials"]
    spec_file, trials_file = f"{args.name}-spec.yaml", f"{args.name}-trials.csv"
    preset = f"preset `{sweep['preset']}`" if sweep["preset"] else "its own spec, no preset"
    at_once = (spec.get("resources") or {}).get("max_concurrent_trials")
    if at_once is None:
        concurrency = "as many trials at a time as fit"
    else:
        concurrency = f"{at_once} trials at a time"
    run = f"""Sweep `{sweep["id"]}` (`{sweep["name"]}`, {preset}), submitted over
REST to a running `dicesweep serve` and read back through its API; MLflow experiment
`{experiment}` ({links.get("mlflow_experiment", "no link")}), parent run
{links.get("mlflow_run", "no link")}.

- {sweep["trial_count"]} trials: {counts["done"]} finished, {counts["failed"]} failed.
- Wall time {wall / 60:.1f} min (started {sweep["started_at"]}, finished {sweep["finished_at"]}),
  {hours:.2f} trial-hours, on {machine_description()}, CPU only, {concurrency}
  ({args.conditions}).
- The exact spec: [{spec_file}]({spec_file}); one line per trial: [{trials_file}]({trials_file});
  the cells: [{args.name}.csv]({args.name}.csv)."""
    path = Path(f"{stem}.md")
    if not path.exists():
        path.write_text(f"# {sweep['name']}\n")
    write_section(path, "The run", run)
    write_section(path, "The table", f"{markdown}\n\n![{args.name}]({args.name}.png)")
    if len(spec["task"]["variant"]) > 1:
        datasets = Path(os.environ.get("DICESWEEP_DATASETS_DIR", "../shared/data"))
        write_section(path, "The training sets", class_ratios(spec, datasets))
    print(f"wrote {path}: {wall / 60:.1f} min, {hours:.2f} trial-hours")


if __name__ == "__main__":
    main()
