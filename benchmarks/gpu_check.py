"""The GPU path in one run: MiniLM-L6 trials in fp32, bf16 and fp16 through the project's
loop, four trials sharing one GPU through a local Ray head, and a step of each reading-
comprehension head; the figures into one JSON file and a one-screen summary.

    python benchmarks/gpu_check.py --out gpu-check/gpu-check.json   # on a CUDA GPU
    python benchmarks/gpu_check.py --dry-run --out /tmp/gpu-check.json --resolved DIR

``scripts/gpu-check.sh`` installs what it needs and runs it (``make gpu-check``). With
``--dry-run`` every check runs at CPU scale: the trials in fp32 for a handful of steps,
the sweep on CPUs (``gpus_per_trial: 0``), and the pip reports in ``--resolved`` (the
install step resolved, not run) read back. Exits 0 when every check passes, 1 when one
fails, 2 without a CUDA GPU (not a dry run).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from bench_train import minilm_path
from gpu_check_report import Check, print_summary, resolution

from search_spaces.dataset_refs import dataset_info
from search_spaces.sections import Precision, TrainingSpec
from search_spaces.settings import DicesweepSettings, isolate_ray
from trainables.loop import batches, fit, seed_everything
from trainables.losses import build_loss
from trainables.precision import DTYPES, autocast, batch_loss
from trainables.step import step_context, to_device, train_step
from trainables.tasks import model_inputs
from trainables.trial_data import DataRequest, TrialData, load_trial_data

# fp16's and bf16's training loss (the mean of the last LAST_STEPS steps) may differ from
# fp32's after the same steps, same seed and batches, by at most this share of fp32's.
LOSS_TOLERANCE = 0.10
LAST_STEPS = 10
WARMUP_STEPS = 5  # steps left out of steps/s: CUDA's kernels and cuBLAS's handles load
Phase = tuple[dict[str, Any], list[Check]]  # a phase's figures and its checks


@dataclass(frozen=True)
class Scale:
    """How much each check trains: the GPU run's, or the CPU rehearsal's."""

    train_sentences: int
    eval_sentences: int
    steps: int  # each precision trial's optimiser steps
    sweep_steps: int
    head_steps: int
    batch_size: int = 16


GPU_SCALE = Scale(train_sentences=400, eval_sentences=200, steps=100, sweep_steps=300, head_steps=3)
DRY_SCALE = Scale(train_sentences=48, eval_sentences=16, steps=6, sweep_steps=2, head_steps=1)


class StepClock:
    """A ``trainables.loop.Reporter`` that keeps no checkpoint and records each step's
    loss and the seconds between consecutive steps (a gap holding an evaluation left out)."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.gaps: list[float] = []
        self._last: float | None = None

    def latest_checkpoint(self) -> Path | None:
        return None

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path) -> None:
        self._last = None

    def progress(self, step: int, total: int, loss: float) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.gaps.append(now - self._last)
        self._last = now
        self.losses.append(loss)

    def steps_per_s(self) -> float:
        timed = self.gaps[WARMUP_STEPS:] or self.gaps
        return len(timed) / sum(timed) if timed else math.nan


def conll(model: str, settings: DicesweepSettings, scale: Scale, **extra: Any) -> TrialData:
    """A fixed subset of CoNLL-2003 tokenised for ``model`` (``extra``: the formulation)."""
    info = dataset_info("conll2003", None, settings.datasets_dir)
    request = DataRequest(
        info, "original", model, 128, 128, scale.train_sentences, scale.eval_sentences, **extra
    )
    return load_trial_data(request, settings.datasets_dir, settings.cache_dir)


def squad(model: str, settings: DicesweepSettings) -> TrialData:
    """32 training and 16 dev questions of SQuAD v1.1 (fixed subsets), windows of 256
    tokens: a batch for a head's step."""
    info = dataset_info("squad_v1", None, settings.datasets_dir)
    request = DataRequest(info, "original", model, 256, 128, 32, 16)
    return load_trial_data(request, settings.datasets_dir, settings.cache_dir)


def peak_mib(device: torch.device) -> float | None:
    """The most GPU memory allocated since the last reset (MiB), None off a GPU."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**20


def fresh_peak(device: torch.device) -> None:
    """Free what the last check left and start a new peak."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def precision_trial(
    data: TrialData, model: str, precision: Precision, scale: Scale
) -> dict[str, Any]:
    """One ``ce`` trial of ``scale.steps`` steps in ``precision`` through
    ``trainables.loop.fit``: steps/s, peak GPU memory, the final training loss (mean of
    the last ``LAST_STEPS`` steps) and the dev F1."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fresh_peak(device)
    training = TrainingSpec(
        max_steps=scale.steps,
        batch_size=scale.batch_size,
        learning_rate=1e-4,
        precision=precision,
    )
    clock = StepClock()
    metrics = fit(data, model, {"name": "ce"}, 0, training, clock)
    return {
        "precision": precision,
        "trained_in": metrics["precision"],
        "steps": len(clock.losses),
        "steps_per_s": clock.steps_per_s(),
        "peak_gpu_mib": peak_mib(device),
        "final_loss": sum(clock.losses[-LAST_STEPS:]) / len(clock.losses[-LAST_STEPS:]),
        "eval_f1": metrics["eval_f1"],
    }


def loss_checks(trials: list[dict[str, Any]]) -> list[Check]:
    """Each trial trained in the precision asked for, and each 16-bit trial's final loss
    lies within ``LOSS_TOLERANCE`` of fp32's."""
    checks = [
        Check(f"{t['precision']} trial", t["trained_in"] == t["precision"], f"{t['trained_in']}")
        for t in trials
    ]
    reference = next(t["final_loss"] for t in trials if t["precision"] == "fp32")
    for trial in trials:
        if trial["precision"] == "fp32":
            continue
        gap = abs(trial["final_loss"] - reference) / reference
        trial["loss_vs_fp32"] = gap
        detail = f"{trial['final_loss']:.4f} vs fp32 {reference:.4f}: {gap:.1%}"
        checks.append(
            Check(
                f"{trial['precision']} loss ≤ {LOSS_TOLERANCE:.0%}", gap <= LOSS_TOLERANCE, detail
            )
        )
    return checks


def head_step(data: TrialData, model: str, precision: Precision, scale: Scale) -> dict[str, Any]:
    """A task head's forward pass on one batch under ``precision``'s autocast (each
    output's shape and dtype, the loss's dtype), then ``scale.head_steps`` optimiser
    steps of ``trainables.step.train_step`` on it."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fresh_peak(device)
    seed_everything(0)
    net: Any = data.task.build_model(model).to(device)  # QueryNer too: not a PreTrainedModel
    counts = data.task.class_counts(data.train_features)
    loss_fn = build_loss({"name": "dsc"}, class_counts=counts, labels=data.task.labels or None)
    loss_fn = loss_fn.to(device)
    training = TrainingSpec(max_steps=scale.head_steps, precision=precision)
    context = step_context(net, data.task, loss_fn, training, device, scale.head_steps)
    order = list(range(scale.batch_size))
    batch = next(batches(data, data.train_features, scale.batch_size, order))
    on_device = to_device(batch, device)
    with autocast(device, context.precision):
        outputs = net(**model_inputs(on_device))
    loss = batch_loss(data.task.loss, outputs, on_device, loss_fn, device)
    fields = outputs.items() if hasattr(outputs, "items") else vars(outputs).items()
    shapes = {k: [list(v.shape), str(v.dtype)] for k, v in fields if isinstance(v, torch.Tensor)}
    losses = [train_step(context, [batch]) for _ in range(scale.head_steps)]
    return {
        "precision": context.precision,
        "batch": list(on_device["input_ids"].shape),
        "outputs": shapes,
        "loss_dtype": str(loss.dtype),
        "step_losses": losses,
        "peak_gpu_mib": peak_mib(device),
    }


def head_checks(name: str, step: dict[str, Any]) -> list[Check]:
    """The head's start and end logits are (B, L) (its span logits (B, L, L)) in the
    autocast dtype, its loss fp32, and every step's loss finite."""
    b, length = step["batch"]
    wanted = {
        "start_logits": [b, length],
        "end_logits": [b, length],
        "span_logits": [b, length, length],
    }
    dtype = str(DTYPES.get(step["precision"], torch.float32))
    shapes_ok = all(
        step["outputs"][k] == [shape, dtype] for k, shape in wanted.items() if k in step["outputs"]
    )
    label = f"{name} {step['precision']}"
    shown = ", ".join(
        f"{k} {v[0]} {v[1].removeprefix('torch.')}" for k, v in step["outputs"].items()
    )
    return [
        Check(f"{label} shapes", shapes_ok and "start_logits" in step["outputs"], shown),
        Check(f"{label} loss fp32", step["loss_dtype"] == "torch.float32", step["loss_dtype"]),
        Check(
            f"{label} steps",
            all(math.isfinite(x) for x in step["step_losses"]),
            " ".join(f"{x:.4f}" for x in step["step_losses"]),
        ),
    ]


def precisions(dry_run: bool) -> list[Precision]:
    """The precisions to train in: fp32 alone on a CPU, fp32, bf16 (where the GPU has
    it) and fp16 on a GPU."""
    if dry_run:
        return ["fp32"]
    bf16: list[Precision] = ["bf16"] if torch.cuda.is_bf16_supported() else []
    return ["fp32", *bf16, "fp16"]


def refuse_without_gpu() -> None:
    """Exit 2 in one line where torch sees no CUDA GPU."""
    if not torch.cuda.is_available():
        build = torch.version.cuda or "a CPU-only build"
        print(f"gpu-check: torch {torch.__version__} ({build}) sees no CUDA GPU", file=sys.stderr)
        raise SystemExit(2)


def machine(dry_run: bool) -> dict[str, Any]:
    """What ran the check: torch's version and CUDA, the GPU's name and memory."""
    facts: dict[str, Any] = {
        "dry_run": dry_run,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(gpu=props.name, gpu_mib=props.total_memory / 2**20)
        facts["bf16"] = torch.cuda.is_bf16_supported()
    return facts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the figures' JSON file")
    parser.add_argument("--dry-run", action="store_true", help="CPU scale, fp32, no GPU")
    parser.add_argument("--resolved", type=Path, help="pip's dry-run reports (dry run)")
    parser.add_argument("--resolve-s", type=float, default=150, help="each resolution's bound")
    parser.add_argument("--install-s", type=float, help="the install step's seconds")
    return parser.parse_args(argv)


def precision_phase(model: str, settings: DicesweepSettings, scale: Scale, dry_run: bool) -> Phase:
    """The same ``ce`` trial in each precision the device has, and their checks."""
    data = conll(model, settings, scale)
    trials = [precision_trial(data, model, p, scale) for p in precisions(dry_run)]
    checks = loss_checks(trials)
    return {"trials": trials, "tolerance": LOSS_TOLERANCE}, checks


def heads_phase(model: str, settings: DicesweepSettings, scale: Scale, dry_run: bool) -> Phase:
    """A step of the MRC-NER head and of the span-MRC head in each precision."""
    heads = {
        "mrc-ner": conll(model, settings, DRY_SCALE, formulation="mrc", mrc={}),
        "span-mrc": squad(model, settings),
    }
    figures: dict[str, Any] = {}
    checks: list[Check] = []
    for name, data in heads.items():
        for precision in precisions(dry_run):
            figures[f"{name} {precision}"] = step = head_step(data, model, precision, scale)
            checks += head_checks(name, step)
    return figures, checks


def run_phase(name: str, phase: Callable[[], Phase]) -> Phase:
    """``phase``'s figures (with its seconds) and checks; one that raises is a failed
    check naming the error, and the other phases still run."""
    started = time.perf_counter()
    try:
        figures, checks = phase()
    except Exception as error:
        traceback.print_exc()
        figures, checks = {"error": repr(error)}, [Check(name, False, repr(error)[:300])]
    return {**figures, "seconds": time.perf_counter() - started}, checks


def run_checks(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], list[Check]]:
    """Every phase in turn; the pip reports of a dry run read last (resolved beside)."""
    from gpu_check_sweep import shared_sweep

    scale = DRY_SCALE if args.dry_run else GPU_SCALE
    settings = DicesweepSettings(home=home)
    model = minilm_path()
    phases: dict[str, Callable[[], Phase]] = {
        "precision": lambda: precision_phase(model, settings, scale, args.dry_run),
        "heads": lambda: heads_phase(model, settings, scale, args.dry_run),
        "sweep": lambda: shared_sweep(model, home, scale.sweep_steps, args.dry_run),
    }
    if args.resolved is not None:
        phases["install"] = lambda: resolution(args.resolved, args.resolve_s + 10)
    figures: dict[str, Any] = {"machine": machine(args.dry_run), "scale": vars(scale)}
    checks: list[Check] = []
    for name, phase in phases.items():
        figures[name], found = run_phase(name, phase)
        checks += found
    figures["install_s"] = args.install_s
    return figures, checks


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.dry_run:
        refuse_without_gpu()
    started = time.perf_counter()
    transformers.logging.set_verbosity_error()  # each head's load report: expected here
    transformers.logging.disable_progress_bar()
    home = Path(tempfile.mkdtemp(prefix="dsg-", dir="/tmp"))  # short: Ray's socket paths
    os.environ["DICESWEEP_HOME"] = str(home)
    isolate_ray(home)  # before Ray is imported: its head keeps to this folder
    try:
        figures, checks = run_checks(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    figures["seconds"] = time.perf_counter() - started
    figures["checks"] = [vars(c) for c in checks]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=1))
    print_summary(figures, checks, args.out)
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
