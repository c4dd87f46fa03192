"""Training throughput of this project's loop and of Hugging Face ``Trainer``, each in
fp32 and under bf16 autocast: ``bench_train.py --throughput`` runs it.

The four set-ups train the same model from the same seed on the same tokenised
examples, batch size, max length and threads, ``n_steps`` optimiser steps each, timed
from the first step (no evaluation). They take turns within each repeat, the order
rotated from one repeat to the next, so a machine that slows down (another process,
heat) slows every set-up alike; each set-up's median and range over the repeats are
reported.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

import torch

from search_spaces.sections import TrainingSpec
from trainables.loop import batches, grouped_order, pick_device
from trainables.losses import build_loss
from trainables.modeling import TINY_BERT, build_model
from trainables.step import step_context, train_step

# (loop, precision): the set-ups, each timed once per repeat.
SETUPS = [("ours", "fp32"), ("ours", "bf16"), ("Trainer", "fp32"), ("Trainer", "bf16")]


def fresh_model(data: Any, model: str, device: torch.device) -> Any:
    torch.manual_seed(0)
    vocab = len(data.tokenizer) if model == TINY_BERT else None
    return build_model(model, data.info.kind, data.task.num_labels, vocab).to(device)


def ours_rate(data: Any, model: str, training: TrainingSpec, n_steps: int) -> float:
    """Examples per second of ``trainables.step.train_step`` over ``n_steps`` length-grouped
    batches (``ce``, the loss in fp32, fused AdamW), in ``training.precision``."""
    device = pick_device()
    net = fresh_model(data, model, device)
    lengths = [len(f["input_ids"]) for f in data.train_features]
    order = grouped_order(lengths, 0, 0, training.batch_size)[: training.batch_size * n_steps]
    loss_fn = build_loss({"name": "ce"}).to(device)
    context = step_context(net, data.task, loss_fn, training, device, n_steps)
    net.train()
    start = time.perf_counter()
    for step in batches(data, data.train_features, training.batch_size, order):
        train_step(context, [step])
    return training.batch_size * n_steps / (time.perf_counter() - start)


def trainer_rate(data: Any, model: str, training: TrainingSpec, n_steps: int) -> float:
    """Examples per second of Hugging Face ``Trainer``
    (``train_sampling_strategy="group_by_length"``) over ``n_steps`` steps, with
    ``bf16=True`` when ``training.precision`` is bf16 (on a CPU: ``use_cpu=True``)."""
    from transformers import (
        DataCollatorForTokenClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    device = pick_device()
    net = fresh_model(data, model, device)
    pad = DataCollatorWithPadding if data.info.kind == "pi" else DataCollatorForTokenClassification
    with tempfile.TemporaryDirectory() as out:
        arguments = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=training.batch_size,
            max_steps=n_steps,
            learning_rate=training.learning_rate,
            warmup_steps=training.warmup_ratio,  # a float below 1: a share of the steps
            weight_decay=training.weight_decay,
            max_grad_norm=training.grad_clip or 0.0,
            train_sampling_strategy="group_by_length",
            bf16=training.precision == "bf16",
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=device.type == "cpu",
            seed=0,
        )
        trainer = Trainer(
            model=net,
            args=arguments,
            train_dataset=data.train_features,
            data_collator=pad(data.tokenizer),
        )
        start = time.perf_counter()
        trainer.train()
        return training.batch_size * n_steps / (time.perf_counter() - start)


def throughput(
    data: Any, model: str, batch: int, lr: float, n_steps: int, repeats: int
) -> list[dict[str, Any]]:
    """Each set-up of ``SETUPS`` timed ``repeats`` times, interleaved: one row per
    set-up with its median, lowest and highest examples per second."""
    rates: dict[tuple[str, str], list[float]] = {setup: [] for setup in SETUPS}
    for repeat in range(repeats):
        shift = repeat % len(SETUPS)
        for loop, precision in SETUPS[shift:] + SETUPS[:shift]:
            training = TrainingSpec(batch_size=batch, learning_rate=lr, precision=precision)
            rate = (ours_rate if loop == "ours" else trainer_rate)(data, model, training, n_steps)
            rates[(loop, precision)].append(rate)
            print(f"  {loop} {precision}: {rate:.1f} examples/s", flush=True)
    return [
        {
            "loop": loop,
            "precision": precision,
            "steps": n_steps,
            "median": statistics.median(found),
            "low": min(found),
            "high": max(found),
        }
        for (loop, precision), found in rates.items()
    ]


def with_auto(rows: list[dict[str, Any]], chosen: str) -> list[dict[str, Any]]:
    """``rows`` and ours in ``auto``: the ours row of the precision a sweep's ``auto``
    is decided as on this host (``chosen``), labelled ``auto → chosen``; the same loop
    in the same precision, so not timed again."""
    (ours,) = [r for r in rows if r["loop"] == "ours" and r["precision"] == chosen]
    return [*rows, {**ours, "precision": f"auto → {chosen}", "trains_in": chosen}]


def render_throughput(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of ``throughput``'s rows (each with its ``dataset``), each set-up
    against ``Trainer`` in fp32 and against ``Trainer`` in the precision it trains in,
    on the same data set."""
    lines = [
        "| data set | loop | precision | steps of 16 | examples/s (median) | range "
        "| / Trainer fp32 | / Trainer same precision |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    trainer = {(r["dataset"], r["precision"]): r["median"] for r in rows if r["loop"] == "Trainer"}
    lines += [
        f"| {r['dataset']} | {r['loop']} | {r['precision']} | {r['steps']} | {r['median']:.1f} "
        f"| {r['low']:.1f}–{r['high']:.1f} "
        f"| {r['median'] / trainer[r['dataset'], 'fp32']:.2f} "
        f"| {r['median'] / trainer[r['dataset'], r.get('trains_in', r['precision'])]:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)
