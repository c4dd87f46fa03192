"""Tversky on a CoNLL-2003 tagger: the all-tag average (``O`` included) against the
foreground average (``classes: foreground``), in short real fine-tunes of MiniLM-L6.

Each run fine-tunes MiniLM-L6 (``make bench-deps``) as a BIO tagger on a fixed random
subset of the training sentences with set-level Tversky (linear denominator) and
evaluates it on a fixed subset of dev sentences at a few optimiser steps: entity F1
(conlleval's) and the share of dev words tagged other than ``O``. Prints a table, and
the losses' arithmetic at initialisation, and writes both into docs/losses.md (section
"Measured: the foreground average on CoNLL-2003"):

    python benchmarks/bench_foreground.py             # 3 losses x 2 seeds, 60 steps each
    python benchmarks/bench_foreground.py --loss "α 0.9, foreground" --seeds 0 \\
        --json a09.json --no-docs                      # some runs now ...
    python benchmarks/bench_foreground.py --seeds --with a06.json a09.json  # ... one table
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from bench_train import minilm_path

from docs_table import write_section
from search_spaces.dataset_refs import dataset_info
from search_spaces.sections import TrainingSpec
from search_spaces.settings import DicesweepSettings
from trainables.loop import batches, grouped_order, pick_device, seed_everything
from trainables.losses import build_loss
from trainables.modeling import build_model
from trainables.step import step_context, to_device, train_step
from trainables.tasks import Batch, model_inputs
from trainables.trial_data import DataRequest, TrialData, load_trial_data

SECTION = "Measured: the foreground average on CoNLL-2003"
# Study 3's set-up for Table 10 (docs/results/study3-conll.md) but for the steps and caps.
LEARNING_RATE, BATCH, MAX_LENGTH = 1e-4, 16, 128
LOSSES = {
    "α 0.6, every tag": {"name": "tversky", "alpha": 0.6, "beta": 0.4, "scope": "set"},
    "α 0.6, foreground": {
        "name": "tversky",
        "alpha": 0.6,
        "beta": 0.4,
        "scope": "set",
        "classes": "foreground",
    },
    "α 0.9, foreground": {
        "name": "tversky",
        "alpha": 0.9,
        "beta": 0.1,
        "scope": "set",
        "classes": "foreground",
    },
}


def load_data(model: str, settings: DicesweepSettings, train: int, evaluation: int) -> TrialData:
    """CoNLL-2003 tokenised for ``model``: ``train`` training and ``evaluation`` dev
    sentences, each a fixed subset (the cap's seed), the same for every run."""
    info = dataset_info("conll2003", None, settings.datasets_dir)
    request = DataRequest(info, "original", model, MAX_LENGTH, 128, train, evaluation)
    return load_trial_data(request, settings.datasets_dir, settings.cache_dir)


def _tversky_index(tp: float, fp: float, fn: float, alpha: float, beta: float) -> float:
    """Set-level Tversky index with smoothing 1 from soft counts (words)."""
    return (tp + 1) / (tp + alpha * fp + beta * fn + 1)


def initial_arithmetic(data: TrialData) -> str:
    """Set-level Tversky on a batch of the training subset's mean tag counts, at
    initialisation (every tag ``p = 1/C`` at every word) and with every word tagged
    ``O``: per alpha (0.3 and those of ``LOSSES``), each tag's term and the two
    averages (a table)."""
    labels = data.task.labels
    counts = data.task.class_counts(data.train_features)
    per_batch = [BATCH * n / len(data.train_features) for n in counts]  # words a batch
    words, c, background = sum(per_batch), len(labels), labels.index("O")
    entity = [n for k, n in enumerate(per_batch) if k != background]
    n_o, n_mean = per_batch[background], sum(entity) / len(entity)
    lines = [
        f"A batch of {BATCH} of these training sentences holds {words:.0f} words on average, "
        f"{n_o:.0f} of them `O`, each entity tag {min(entity):.1f}–{max(entity):.1f} "
        f"({n_mean:.1f} on average). Init: every tag p = 1/{c} at every word.",
        "",
        "| α, β | α·FP / β·FN at init, mean entity tag (range) | entity term at init "
        "| `O` term at init | every tag: init → all `O` | foreground: init → all `O` "
        "| entity term, all `O` |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    pairs = {(0.3, 0.7)} | {(float(s["alpha"]), float(s["beta"])) for s in LOSSES.values()}
    for alpha, beta in sorted(pairs):

        def ratio(n: float, alpha: float = alpha, beta: float = beta) -> float:
            return alpha * (words - n) / (beta * (c - 1) * n)

        def at_init(n: float, alpha: float = alpha, beta: float = beta) -> float:
            return 1 - _tversky_index(n / c, (words - n) / c, (c - 1) * n / c, alpha, beta)

        init = [at_init(n) for n in entity]
        all_o = [1 - _tversky_index(0.0, 0.0, n, alpha, beta) for n in entity]
        o_init, o_all_o = at_init(n_o), 1 - _tversky_index(n_o, words - n_o, 0.0, alpha, beta)
        lines.append(
            f"| {alpha:g}, {beta:g} | {ratio(n_mean):.1f} ({min(map(ratio, entity)):.1f}–"
            f"{max(map(ratio, entity)):.1f}) | {min(init):.2f}–{max(init):.2f} | {o_init:.2f} "
            f"| {(sum(init) + o_init) / c:.2f} → {(sum(all_o) + o_all_o) / c:.2f} "
            f"| {sum(init) / len(init):.2f} → {sum(all_o) / len(all_o):.2f} "
            f"| {min(all_o):.2f}–{max(all_o):.2f} |"
        )
    return "\n".join(lines)


def evaluate(net: torch.nn.Module, data: TrialData, device: torch.device) -> dict[str, float]:
    """Entity F1 (percent, the task's scorer) and the percent of dev words (their first
    sub-word) predicted as a tag other than ``O``."""
    tags: Counter[str] = Counter()

    def predict(batch: Batch) -> Any:
        with torch.no_grad():
            outputs = net(**model_inputs(batch))
        best = outputs.logits.argmax(-1).tolist()  # (B, L)
        for row, positions in zip(best, batch["first_tokens"], strict=True):
            tags.update(data.task.labels[row[p]] for p in positions)
        return outputs

    net.eval()
    order = list(range(len(data.eval_features)))
    dev = [to_device(b, device) for b in batches(data, data.eval_features, BATCH, order)]
    metrics = data.task.evaluate(predict, dev, data.eval_examples)
    net.train()
    words = sum(tags.values())
    return {"f1": metrics["f1"], "non_o": 100 * (words - tags["O"]) / words}


def fine_tune(
    data: TrialData, model: str, loss: dict[str, Any], seed: int, steps: int, at: list[int]
) -> list[dict[str, float]]:
    """``steps`` optimiser steps (warm-up 10%, linear decay) of ``loss``, evaluated after
    each step in ``at``; one row per evaluation."""
    seed_everything(seed)
    device = pick_device()
    net = build_model(model, "ner", data.task.num_labels).to(device)
    loss_fn = build_loss(loss, labels=data.task.labels).to(device)
    training = TrainingSpec(learning_rate=LEARNING_RATE, batch_size=BATCH, max_steps=steps)
    context = step_context(net, data.task, loss_fn, training, device, steps)
    lengths = [len(f["input_ids"]) for f in data.train_features]
    rows: list[dict[str, float]] = []
    step, epoch = 0, 0
    net.train()
    while step < steps:
        order = grouped_order(lengths, seed, epoch, BATCH)
        for batch in batches(data, data.train_features, BATCH, order):
            value = train_step(context, [batch])
            step += 1
            if step % 10 == 0:
                print(
                    f"{time.strftime('%H:%M:%S')} step {step}/{steps}", file=sys.stderr, flush=True
                )
            if step in at:
                rows.append({"step": step, "loss": value, **evaluate(net, data, device)})
            if step == steps:
                break
        epoch += 1
    return rows


def render(results: list[dict[str, Any]], n_train: int, n_eval: int) -> str:
    """The table of every run's evaluations, and where they come from."""
    lines = [
        f"MiniLM-L6 tagger, set-level Tversky with the linear denominator, smoothing 1; "
        f"{n_train} training sentences (a fixed random subset), scored on {n_eval} dev "
        f"sentences (a fixed subset); learning rate {LEARNING_RATE:g}, batch {BATCH}, "
        f"warm-up 10%, {MAX_LENGTH} tokens. Written by `benchmarks/bench_foreground.py`.",
        "",
        "| loss | seed | step | batch loss | dev words not `O` (%) | entity F1 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['label']} | {r['seed']} | {r['step']} | {r['loss']:.4f} | {r['non_o']:.1f} "
        f"| {r['f1']:.2f} |"
        for r in results
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1], help="none: only --with")
    parser.add_argument("--train", type=int, default=960, help="training sentences")
    parser.add_argument("--eval", type=int, default=200, help="dev sentences")
    parser.add_argument("--loss", choices=list(LOSSES), nargs="+", help="only these")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--with",
        dest="earlier",
        type=Path,
        nargs="+",
        default=[],
        help="rows an earlier run wrote with --json, rendered with these",
    )
    parser.add_argument("--no-docs", action="store_true", help="leave docs/losses.md alone")
    parser.add_argument(
        "--docs", type=Path, default=Path(__file__).parents[1] / "docs" / "losses.md"
    )
    args = parser.parse_args()
    model = minilm_path()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dicesweep-bench-") as home:
        settings = DicesweepSettings(home=Path(home))
        data = load_data(model, settings, args.train, args.eval)
        for seed in args.seeds:
            for label in args.loss or list(LOSSES):
                for row in fine_tune(
                    data, model, LOSSES[label], seed, args.steps, args.checkpoints
                ):
                    results.append({"label": label, "seed": seed, **row})
                    print(json.dumps(results[-1], ensure_ascii=False), flush=True)
        arithmetic = initial_arithmetic(data)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    for earlier in args.earlier:
        results += json.loads(earlier.read_text())
    results.sort(key=lambda r: (list(LOSSES).index(r["label"]), r["seed"], r["step"]))
    table = render(results, args.train, args.eval) + "\n\n" + arithmetic
    print(table)
    if not args.no_docs:
        write_section(args.docs, SECTION, table)


if __name__ == "__main__":
    main()
