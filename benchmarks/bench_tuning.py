"""Fair tuning per loss: the two-stage sweep with a stopping stage 1 against the full grid.

One task, two losses, learning rates, seeds:

- full grid: one sweep per learning rate, every loss × every seed, each reported on
  dev; a loss's learning rate is the one with the best mean dev F1 over the seeds
  (the grid chooses on the split it reports on: the costly, optimistic reference);
- two-stage: one sweep with ``tune`` (every learning rate once per loss, chosen on a
  10% tuning split held out of the training file, the scheduler stopping the weak
  ones: ``halving``, synchronous successive halving, by default; ``asha`` for the
  asynchronous reference), then every seed at each loss's choice, reported on dev.

Tasks: ``pos`` (the ``smoke`` preset's: tiny-bert POS on 2,000 UD English EWT
sentences, ce and dsc), ``mrpc`` and ``conll`` (``--model minilm``: MiniLM-L6, ``make
bench-deps``; ce and dice). Trial-hours are the trials' summed wall time from their
MLflow runs. Prints a table (the choice per loss, the trial-hours ratio, how many
stage-1 trials stopped at which rung) and, unless ``--no-docs``, writes the "Tuning:
two-stage (scheduler) against the full grid, model on task" section of
docs/benchmarks.md.

    python benchmarks/bench_tuning.py                                  # tiny-bert POS
    python benchmarks/bench_tuning.py --model minilm --task mrpc       # hours on 2 CPUs
    python benchmarks/bench_tuning.py --smoke --no-docs                # a minute: it works
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_table import machine_description, write_section
from search_spaces.presets import deep_merge

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "sweep_service.cli"]
# Per task: the spec over ``smoke`` (data set, losses, the training a trial runs with
# four evaluations or more: the halving rungs at 1 and 3 evaluations) and the rates.
TASKS: dict[str, dict[str, Any]] = {
    "pos": {
        "spec": {"training": {"epochs": 2, "eval_every_steps": 16}},
        "learning_rates": [3e-4, 6e-4, 1e-3, 2e-3, 3e-3, 1e-2],
    },
    "mrpc": {
        "spec": {
            "task": {"kind": "pi", "dataset": "mrpc"},
            "search_space": {"losses": [{"name": "ce"}, {"name": "dice"}]},
            "training": {"epochs": 3, "eval_every_steps": 58, "max_seq_length": 128},
        },
        "learning_rates": [1e-5, 3e-5, 1e-4, 3e-4, 1e-3],
    },
    # Study 6's fixed subset (2,000 training sentences, 1,000 dev) at smoke's batch 32
    # and length 64: 63 steps an epoch, 378 in 6 epochs, evaluated every 75 steps and at
    # each epoch's end (11 evaluations; stage 1's rungs at 1 and 3 of them fall at a
    # sixth and a third of a trial).
    "conll": {
        "spec": {
            "task": {"kind": "ner", "dataset": "conll2003"},
            "search_space": {"losses": [{"name": "ce"}, {"name": "dice"}]},
            "training": {
                "epochs": 6,
                "eval_every_steps": 75,
                "max_train_examples": 2000,
                "max_eval_examples": 1000,
            },
        },
        "learning_rates": [1e-5, 3e-5, 1e-4, 3e-4, 1e-3],
    },
}
SEEDS = [0, 1, 2]


def base_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The spec both sweeps share: the task's over ``smoke``, the model, the seeds."""
    spec = deep_merge({"extends": "smoke", "seeds": args.seeds}, TASKS[args.task]["spec"])
    if args.model == "minilm":
        from bench_train import minilm_path

        spec["model"] = minilm_path()
    caps = {
        "max_train_examples": args.train_examples,
        "max_eval_examples": args.eval_examples,
        "precision": args.precision,  # both sweeps alike: the comparison stays fair
    }
    spec["training"] = {**spec["training"], **{k: v for k, v in caps.items() if v is not None}}
    if args.smoke:  # a minute: few examples, one evaluation per 8 steps
        limits = {"max_train_examples": 400, "max_eval_examples": 100, "eval_every_steps": 8}
        spec["training"] = {**spec["training"], "epochs": 1, **limits}
    return spec


def grid_spec(base: dict[str, Any], learning_rate: float) -> dict[str, Any]:
    training = {**base["training"], "learning_rate": learning_rate}
    return {**base, "name": "bench-grid", "training": training}


def two_stage_spec(base: dict[str, Any], rates: list[float], scheduler: str) -> dict[str, Any]:
    return {
        **base,
        "name": "bench-two-stage",
        "tune": {"learning_rate": rates, "trials_per_loss": len(rates), "holdout": 0.1},
        "scheduler": {"kind": scheduler, "grace_period": 1, "reduction_factor": 3},
        # One trial at a time: the order in which ASHA compares nothing.
        "resources": {"max_concurrent_trials": 1},
    }


def run_sweep(spec: dict[str, Any], sweep_id: str, home: Path, datasets: Path) -> float:
    """``dicesweep run`` on ``spec`` as ``sweep_id``; its wall time in seconds."""
    path = home / f"{sweep_id}.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_"))}
    env.update(DICESWEEP_HOME=str(home), DICESWEEP_DATASETS_DIR=str(datasets))
    started = time.perf_counter()
    ran = subprocess.run(
        [*CLI, "run", str(path), "--sweep-id", sweep_id], env=env, capture_output=True, text=True
    )
    if ran.returncode != 0:
        raise SystemExit(f"{sweep_id} failed ({ran.returncode}):\n{ran.stderr[-3000:]}")
    return time.perf_counter() - started


def trial_runs(client: Any, sweep_id: str) -> list[Any]:
    from search_spaces.contract import EXPERIMENT, ROLE_TAG, SWEEP_TAG

    experiment = client.get_experiment_by_name(EXPERIMENT)
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial'"
    return list(client.search_runs([experiment.experiment_id], query, max_results=1000))


def hours(runs: list[Any]) -> float:
    return sum((run.info.end_time - run.info.start_time) for run in runs) / 3_600_000


def clock_hours(client: Any, runs: list[Any]) -> float:
    """The trials' own training clocks summed, in hours
    (``sweep_service.results.training_seconds``): what they computed, leaving out the
    time a stage-1 trial waits paused at a rung with its MLflow run open."""
    from sweep_service.results import training_seconds

    return sum(training_seconds(client, run.info.run_id) for run in runs) / 3600


def steps(runs: list[Any]) -> int:
    """The optimiser steps the trials ran, summed: their work, whatever else the machine
    was doing (trial-hours count that too)."""
    return int(sum(run.data.metrics.get("optimizer_steps", 0) for run in runs))


def loss_of(run: Any) -> str:
    from search_spaces.contract import LOSS_LABEL_TAG

    return str(run.data.tags[LOSS_LABEL_TAG])


def stopped_rungs(client: Any, runs: list[Any]) -> dict[int, int]:
    """``{rung: stage-1 trials a scheduler stopped there}``, a rung named by the
    evaluations a trial ran to reach it (halving's at 1, 3, 9, ...), as the sweep page
    and the tables' notes name it (``sweep_service.results.evaluations``)."""
    from search_spaces.contract import STOP_TAG
    from sweep_service.results import evaluations

    rungs: dict[int, int] = {}
    for run in runs:
        if run.data.tags.get(STOP_TAG) != "scheduler":
            continue
        rung = evaluations(client, run.info.run_id)
        rungs[rung] = rungs.get(rung, 0) + 1
    return dict(sorted(rungs.items()))


def grid_choices(runs: list[Any]) -> dict[str, dict[float, list[float]]]:
    """``{loss: {learning rate: dev F1 of each seed}}`` of the grid's runs."""
    scores: dict[str, dict[float, list[float]]] = {}
    for run in runs:
        lr = float(run.data.params["training.learning_rate"])
        scores.setdefault(loss_of(run), {}).setdefault(lr, []).append(run.data.metrics["eval_f1"])
    return scores


def run_all(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    """Both sweeps (the two-stage one between the grid's learning rates, so that the
    machine's load falls on both alike); what the table needs from MLflow."""
    base = base_spec(args)
    walls: dict[str, float] = {}
    for sweep_id in sweep_order(args.learning_rates):
        if sweep_id == "two-stage":
            spec = two_stage_spec(base, args.learning_rates, args.scheduler)
        else:
            spec = grid_spec(base, float(sweep_id.removeprefix("grid-")))
        walls[sweep_id] = run_sweep(spec, sweep_id, home, args.datasets)
        print(f"{sweep_id}: {walls[sweep_id]:.0f} s", flush=True)
    return summarise(home / "mlflow.db", args.learning_rates, walls)


def sweep_order(rates: list[float]) -> list[str]:
    order = [f"grid-{lr:g}" for lr in rates]
    order.insert(len(order) // 2, "two-stage")
    return order


def summarise(store: Path, rates: list[float], walls: dict[str, float] | None) -> dict[str, Any]:
    """What the table needs, read from the MLflow store ``store`` that both sweeps
    logged to; ``walls`` None: each sweep's wall time from its parent run."""
    from mlflow.tracking import MlflowClient

    from search_spaces.contract import EXPERIMENT, ROLE_TAG, STAGE_TAG, SWEEP_TAG, TUNED_TAG

    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None, f"{store} holds no dicesweep sweep"

    def parent(sweep_id: str) -> Any:
        query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'sweep'"
        (run,) = client.search_runs([experiment.experiment_id], query)
        return run

    if walls is None:
        walls = {}
        for sweep_id in sweep_order(rates):
            info = parent(sweep_id).info
            walls[sweep_id] = (info.end_time - info.start_time) / 1000
    grid = [run for lr in rates for run in trial_runs(client, f"grid-{lr:g}")]
    staged = trial_runs(client, "two-stage")
    stage_one = [run for run in staged if run.data.tags.get(STAGE_TAG) == "tune"]
    chosen = json.loads(parent("two-stage").data.tags[TUNED_TAG])
    # Stage 2 trains exactly the grid's trials at each loss's choice (the same seeds,
    # data and steps): the grid's clocks for those trials price stage 2 under the
    # grid's load, whatever else ran beside stage 2.
    at_choice = [
        run
        for run in grid
        if float(run.data.params["training.learning_rate"])
        == float(chosen[loss_of(run)]["learning_rate"])
    ]
    return {
        "walls": walls,
        "scores": grid_choices(grid),
        "chosen": chosen,
        "stage_one_hours": clock_hours(client, stage_one),
        "at_choice_hours": clock_hours(client, at_choice),
        "grid": (len(grid), hours(grid), clock_hours(client, grid), steps(grid)),
        "staged": (len(staged), hours(staged), clock_hours(client, staged), steps(staged)),
        "stage_one": len(stage_one),
        "rungs": stopped_rungs(client, stage_one),
    }


def table(args: argparse.Namespace, found: dict[str, Any]) -> str:
    scores, chosen, walls = found["scores"], found["chosen"], found["walls"]

    def mean(loss: str, lr: float) -> str:
        values = scores[loss][lr]
        return f"{sum(values) / len(values):.2f}"

    rows = [
        "| loss | full grid: best lr (mean dev F1) | two-stage: chosen lr (its grid mean) | same |",
        "|---|---|---|---|",
    ]
    for loss, by_lr in sorted(scores.items()):
        best = max(by_lr, key=lambda lr: sum(by_lr[lr]) / len(by_lr[lr]))
        mine = float(chosen[loss]["learning_rate"])
        rows.append(
            f"| {loss} | {best:g} ({mean(loss, best)}) | {mine:g} ({mean(loss, mine)}) | "
            f"{'yes' if mine == best else 'no'} |"
        )
    grid_trials, grid_spans, grid_hours, grid_steps = found["grid"]
    staged_trials, staged_spans, staged_hours, staged_steps = found["staged"]
    rungs = found["rungs"]
    where = ", ".join(f"{n} at rung {k}" for k, n in rungs.items()) or "none"
    grid_wall = sum(w for k, w in walls.items() if k.startswith("grid-")) / 60
    rows += [
        "",
        "| sweep | trials | trial-hours (training clocks) | optimiser steps "
        "| trial-hours (run spans, waits included) | wall (min) |",
        "|---|---|---|---|---|---|",
        f"| full grid ({len(args.learning_rates)} lr × {len(args.seeds)} seeds × 2 losses) | "
        f"{grid_trials} | {grid_hours:.3f} | {grid_steps:,} | {grid_spans:.3f} | "
        f"{grid_wall:.1f} |",
        f"| two-stage (stage 1: {found['stage_one']}, stopped by {args.scheduler}: "
        f"{sum(rungs.values())} ({where}); stage 2: {staged_trials - found['stage_one']}) | "
        f"{staged_trials} | {staged_hours:.3f} | {staged_steps:,} | {staged_spans:.3f} | "
        f"{walls['two-stage'] / 60:.1f} |",
        f"| two-stage / full grid | | {staged_hours / grid_hours:.0%} | "
        f"{staged_steps / grid_steps:.0%} | {staged_spans / grid_spans:.0%} | |",
    ]
    matched = found["stage_one_hours"] + found["at_choice_hours"]
    rows += [
        "",
        f"Stage 1's clocks: {found['stage_one_hours']:.3f} trial-hours; stage 2's: "
        f"{staged_hours - found['stage_one_hours']:.3f}. Stage 2 trains the grid's own "
        f"trials at each loss's choice (the same seeds, data and steps), which took "
        f"{found['at_choice_hours']:.3f} trial-hours in the grid: priced so, the two-stage "
        f"sweep costs {matched:.3f} trial-hours, {matched / grid_hours:.0%} of the grid's.",
    ]
    return "\n".join(rows)


def caps_flags(args: argparse.Namespace) -> str:
    """The caps and the precision given on the command line, as flags for the docs' command."""
    flags = {
        "--train-examples": args.train_examples,
        "--eval-examples": args.eval_examples,
        "--precision": args.precision,
    }
    return "".join(f" {flag} {value}" for flag, value in flags.items() if value is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_data = os.environ.get("DICESWEEP_DATASETS_DIR", ROOT.parent / "shared" / "data")
    parser.add_argument("--datasets", type=Path, default=Path(default_data))
    parser.add_argument("--model", choices=["tiny-bert", "minilm"], default="tiny-bert")
    parser.add_argument("--task", choices=sorted(TASKS), default="pos")
    parser.add_argument("--scheduler", choices=["halving", "asha"], default="halving")
    parser.add_argument("--learning-rates", type=float, nargs="+", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument(
        "--train-examples", type=int, default=None, help="cap on training examples (the task's)"
    )
    parser.add_argument(
        "--eval-examples", type=int, default=None, help="cap on dev examples (default: all)"
    )
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default=None,
        help="training.precision of every trial (default: the spec's, auto)",
    )
    parser.add_argument("--smoke", action="store_true", help="few examples, 1 epoch")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument(
        "--keep", action="store_true", help="keep the sweeps' home (its MLflow store) and say where"
    )
    parser.add_argument(
        "--summarise",
        type=Path,
        metavar="MLFLOW_DB",
        help="train nothing: the table from a kept run's mlflow.db (the other flags as run)",
    )
    args = parser.parse_args()
    args.learning_rates = args.learning_rates or TASKS[args.task]["learning_rates"]
    if args.summarise is not None:
        found = summarise(args.summarise, args.learning_rates, walls=None)
    else:
        home = Path(tempfile.mkdtemp(prefix="dsw-t-", dir="/tmp"))
        try:
            found = run_all(args, home)
        finally:
            if args.keep:
                print(f"kept: {home} (table again: --summarise {home / 'mlflow.db'})")
            else:
                shutil.rmtree(home, ignore_errors=True)
    text = table(args, found)
    print(text)
    if args.no_docs:
        return
    model = "MiniLM-L6" if args.model == "minilm" else "tiny-bert"
    body = (
        f"Machine: {machine_description()}, no GPU. Command: `python benchmarks/bench_tuning.py "
        f"--model {args.model} --task {args.task} --scheduler {args.scheduler}{caps_flags(args)}` "
        "(one run; the "
        f"two-stage sweep runs between the grid's sweeps). {model} on {args.task}, learning "
        f"rates {', '.join(f'{lr:g}' for lr in args.learning_rates)}, seeds "
        f"{', '.join(map(str, args.seeds))}. The grid chooses each loss's learning rate on "
        "dev, where it reports (the reference); the two-stage sweep chooses on a 10% tuning "
        f"split of the training file, {args.scheduler} (rungs at 1, 3, 9 evaluations, factor "
        "3, per loss, one trial at a time) stopping weak stage-1 trials, then runs every seed "
        "at the choice. Trial-hours (training clocks): the trials' own clocks, from the "
        "start of training to their last evaluation, summed over the stretches between "
        "resumes (a stage-1 trial paused at a rung computes nothing while it waits); "
        "optimiser steps: the steps they ran, summed (their work, which other load on the "
        "machine does not change); trial-hours (run spans): from each trial's MLflow run "
        "start to its end, which counts a paused trial's wait and each trial's start-up. "
        "Wall: each sweep's command"
        + (
            " (here its parent run in MLflow: table rebuilt with --summarise)"
            if args.summarise
            else ""
        )
        + ". A choice that differs from the grid's is a gap in the grid's own dev means, "
        "given beside it.\n\n" + text
    )
    heading = f"Tuning: two-stage ({args.scheduler}) against the full grid, {model} on {args.task}"
    write_section(ROOT / "docs" / "benchmarks.md", heading, body)


if __name__ == "__main__":
    main()
