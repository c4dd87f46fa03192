"""The Ray Tune trainable ``train(config)``, and the same trial from the command line.

    python -m trainables.train --task ner --dataset conll2003 \
        --loss '{"name": "dsc", "alpha": 0.1}' --model tiny-bert --epochs 1

``--model`` is ``tiny-bert`` (built here, nothing to download), a folder of a saved
model, or a hub id; one that cannot load ends the command in one line at its start.

``config`` follows the trial contract of ``search_spaces.sections.TrialConfig``:
``dataset``, ``variant``, ``model``, ``loss``, ``seed``, ``training``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from search_spaces.data_roots import allowed_roots, confined_folder
from search_spaces.dataset_refs import dataset_info
from search_spaces.datasets import get_dataset
from search_spaces.sections import TrainingSpec, TrialConfig
from search_spaces.settings import DicesweepSettings
from search_spaces.setup import LOWERCASE_METRIC

if TYPE_CHECKING:
    from trainables.data.classes import ScoredClass
    from trainables.loop import Reporter
    from trainables.trial_data import DataRequest, TrialData

# torch and transformers are imported where a trial runs, never here: the sweep's
# driver imports this module for ``train`` (Ray pickles it by reference) and, with
# them, would hold about half a gigabyte it never uses.


def parse_config(config: Mapping[str, Any]) -> TrialConfig:
    """Validate a trial config (raises ``pydantic.ValidationError`` naming the field)."""
    return TrialConfig.model_validate(dict(config))


def loss_dict(trial: TrialConfig) -> dict[str, Any]:
    """The trial's loss spec as the plain mapping ``build_loss`` takes."""
    return trial.loss.model_dump(exclude_none=True)


def data_request(trial: TrialConfig, settings: DicesweepSettings, model: str) -> DataRequest:
    """What data ``trial`` trains and is scored on (``trainables.trial_data``), read from
    inside the allowed roots where a service set them."""
    from trainables.trial_data import DataRequest

    training = trial.training
    roots = allowed_roots(settings)
    return DataRequest(
        dataset=dataset_info(trial.dataset, trial.kind, settings.datasets_dir, roots),
        variant=trial.variant,
        model=model,
        max_seq_length=training.max_seq_length,
        doc_stride=training.doc_stride,
        max_train_examples=training.max_train_examples,
        max_eval_examples=training.max_eval_examples,
        positive_label=trial.positive_label,
        holdout=trial.holdout,
        holdout_seed=trial.holdout_seed,
        stage=trial.stage,
        formulation=trial.formulation,
        mrc=None if trial.mrc is None else trial.mrc.model_dump(),
        test=training.score_test and trial.stage == "final",  # stage 1 never reads test
    )


def run_trial(
    config: Mapping[str, Any], reporter: Reporter, settings: DicesweepSettings | None = None
) -> dict[str, float]:
    """Load the data (cached), then fit; returns the final metrics."""
    from trainables.loop import fit
    from trainables.trial_data import load_trial_data

    settings = settings or DicesweepSettings()
    trial = parse_config(config)
    model = trial_model(trial.model, allowed_roots(settings))
    request = data_request(trial, settings, model)
    data = load_trial_data(request, settings.datasets_dir, settings.cache_dir)
    training = trial.training
    loss = loss_dict(trial)
    facts = {LOWERCASE_METRIC: float(lowercases(data.tokenizer))}
    if data.scored is not None:
        facts |= scored_class_metrics(data, data.scored)
    reporting = FactsReporter(reporter, facts)
    return {**fit(data, model, loss, trial.seed, training, reporting, trial.metric), **facts}


def lowercases(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` folds case (an uncased model): ``"Paris"`` and ``"paris"``
    give the same tokens."""
    return bool(tokenizer.tokenize("Paris Is") == tokenizer.tokenize("paris is"))


def scored_class_metrics(data: TrialData, scored: ScoredClass) -> dict[str, float]:
    """What a binary trial reports of its scored class: the label (``positive_label``,
    resolved from the training file when the spec left it out), its share of the whole
    training file (``positive_share``) and of the training set the trial trains on, the
    variant built and capped (``train_positive_share``), each share in 0..1."""
    counts = data.task.class_counts(data.train_features)
    return {
        "positive_label": float(scored.label),
        "positive_share": scored.share,
        "train_positive_share": counts[scored.label] / sum(counts),
    }


class FactsReporter:
    """Adds what a trial knows of its setup to every evaluation it reports: its
    tokenizer's casing (``search_spaces.setup.LOWERCASE_METRIC``) and a binary trial's
    scored class (``scored_class_metrics``), so its MLflow run and report rows say
    which class F1 is of and whether the model saw case."""

    def __init__(self, inner: Reporter, facts: dict[str, float]) -> None:
        self.inner = inner
        self.facts = facts

    def latest_checkpoint(self) -> Path | None:
        return self.inner.latest_checkpoint()

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        self.inner.report({**metrics, **self.facts}, checkpoint_dir)

    def progress(self, step: int, total: int, loss: float) -> None:
        self.inner.progress(step, total, loss)


def trial_model(model: str, roots: Sequence[Path] | None) -> str:
    """The model to load: with ``roots`` (a service's job) a folder is resolved, once it
    and every file in it lie inside them; a hub id or ``tiny-bert`` as it is.

    Raises:
        OutsideRootsError: the folder or a file in it resolves outside ``roots``.
    """
    folder = Path(model)
    if roots is None or not folder.is_absolute() or not folder.is_dir():
        return model  # the driver made a folder absolute; the rest are hub ids
    return str(confined_folder(folder, roots, f"model folder {folder.name!r}"))


NODE_KEY = "node_id"
# Every evaluation a trial has reported, oldest first, in each checkpoint it reports.
REPORTS_FILE = "reports.json"


class RayTuneReporter:
    """Reports to Ray Tune and resumes from the checkpoint Ray hands back.

    Each checkpoint carries every evaluation reported up to it (``REPORTS_FILE``): a
    driver killed before it saved Tune's results table loses the last reports from the
    table, and a trial resumed from a checkpoint past them never reports them again;
    the driver's backfill logs them from the checkpoint (``checkpoint_reports``)."""

    def __init__(self) -> None:
        self._restored: Path | None = None
        self._reports: list[dict[str, Any]] = []

    def latest_checkpoint(self) -> Path | None:
        from ray import tune

        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            return None
        self._restored = Path(checkpoint.to_directory())
        reports = self._restored / REPORTS_FILE
        # A checkpoint from before reports were kept carries none.
        self._reports = json.loads(reports.read_text()) if reports.exists() else []
        return self._restored

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path) -> None:
        import ray
        from ray import tune

        # The Ray node that trained it, beside Tune's hostname and node_ip: the trial's
        # MLflow run records where each attempt ran.
        reported = {**metrics, NODE_KEY: ray.get_runtime_context().get_node_id()}
        self._reports.append(reported)
        # A NumPy scalar (not JSON) as a number.
        (checkpoint_dir / REPORTS_FILE).write_text(json.dumps(self._reports, default=float))
        tune.report(reported, checkpoint=tune.Checkpoint.from_directory(str(checkpoint_dir)))

    def progress(self, step: int, total: int, loss: float) -> None:
        """Ray Tune shows progress from the reports; nothing to do per step."""


def checkpoint_reports(checkpoint: Any) -> list[dict[str, Any]]:
    """The evaluations a trial reported up to ``checkpoint`` (a ``ray.tune.Checkpoint``
    on any storage; None: no checkpoint), oldest first; none for a checkpoint without
    ``REPORTS_FILE``."""
    if checkpoint is None:
        return []
    path = f"{checkpoint.path}/{REPORTS_FILE}"
    try:
        with checkpoint.filesystem.open_input_stream(path) as stream:
            reports: list[dict[str, Any]] = json.loads(stream.read())
    except FileNotFoundError:
        return []
    return reports


def train(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: one fine-tuning run, reported every evaluation."""
    import ray
    import torch

    # One intra-op thread per reserved CPU: more threads than cores make every
    # trial on the node spin-wait on the others (10-100x slower steps).
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    torch.set_num_threads(max(1, int(cpus)))
    # What it reports reaches MLflow through the driver (trainables.driver.tracking).
    run_trial(config, RayTuneReporter())


class TerminalReporter:
    """A progress bar and a line per evaluation; checkpoints kept in ``output_dir``."""

    def __init__(self, output_dir: Path, resume: bool) -> None:
        self.output_dir = output_dir
        self.resume = resume
        self._bar: Any = None

    def latest_checkpoint(self) -> Path | None:
        from trainables.checkpoints import CHECKPOINT_FILE

        folder = self.output_dir / "checkpoint"
        if self.resume and (folder / CHECKPOINT_FILE).exists():
            print(f"resuming from {folder}", file=sys.stderr)
            return folder
        return None

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path) -> None:
        from trainables.checkpoints import CHECKPOINT_FILE

        target = self.output_dir / "checkpoint"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkpoint_dir / CHECKPOINT_FILE, target / CHECKPOINT_FILE)
        shown = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, int | float) else f"{k}={v}" for k, v in metrics.items()
        )
        (self._bar.write if self._bar else print)(shown)

    def progress(self, step: int, total: int, loss: float) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=step - 1, unit="step", dynamic_ncols=True)
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{loss:.4f}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _parser() -> argparse.ArgumentParser:
    defaults = TrainingSpec()
    parser = argparse.ArgumentParser(
        prog="python -m trainables.train", description="Fine-tune one trial without Ray."
    )
    parser.add_argument(
        "--task", choices=["pi", "ner", "pos", "mrc"], help="checked against the data set"
    )
    parser.add_argument("--dataset", required=True, help="catalogue name, e.g. conll2003")
    parser.add_argument("--variant", default="original", help="Table 8 variant (binary sets)")
    parser.add_argument(
        "--positive-label",
        type=int,
        choices=[0, 1],
        default=None,
        help="scored class of a binary set (default: the training file's minority class)",
    )
    parser.add_argument("--model", default="tiny-bert", help="hub id, local path or tiny-bert")
    parser.add_argument("--loss", default='{"name": "ce"}', help="loss spec as JSON")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument(
        "--max-steps", type=int, default=None, help="optimiser steps; overrides epochs"
    )
    parser.add_argument(
        "--early-stopping-patience", type=int, default=None, help="evaluations without a rise"
    )
    parser.add_argument("--min-delta", type=float, default=defaults.min_delta)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--max-seq-length", type=int, default=defaults.max_seq_length)
    parser.add_argument("--eval-every-steps", type=int, default=None)
    parser.add_argument(
        "--evaluations-per-epoch", type=int, default=None, help="k evaluations an epoch"
    )
    parser.add_argument(
        "--grad-accumulation",
        type=int,
        default=defaults.grad_accumulation,
        help="micro-batches a step",
    )
    parser.add_argument(
        "--checkpoint",
        choices=["last", "best"],
        default=defaults.checkpoint,
        help="the model reported: the last evaluation's or the best one's on dev",
    )
    parser.add_argument(
        "--score-test", action="store_true", help="score the reported model on the test split"
    )
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-eval-examples", type=int, default=None)
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16", "fp16"],
        default=defaults.precision,
        help="autocast of the forward pass (fp16: a CUDA GPU only); losses stay fp32",
    )
    parser.add_argument("--output-dir", type=Path, default=Path("trial-output"))
    parser.add_argument("--resume", action="store_true", help="continue from output-dir")
    return parser


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The trial config a sweep would send, built from command-line flags."""
    kind = get_dataset(args.dataset).kind
    if args.task is not None and args.task != kind:
        raise SystemExit(f"--task {args.task} does not match data set {args.dataset!r} ({kind})")
    return {
        "sweep_id": "local",
        "dataset": args.dataset,
        "variant": args.variant,
        "positive_label": args.positive_label,
        "model": args.model,
        "loss": json.loads(args.loss),
        "seed": args.seed,
        "training": {
            "epochs": args.epochs,
            "max_steps": args.max_steps,
            "early_stopping_patience": args.early_stopping_patience,
            "min_delta": args.min_delta,
            "learning_rate": args.lr,
            "batch_size": args.batch_size,
            "max_seq_length": args.max_seq_length,
            "eval_every_steps": args.eval_every_steps,
            "evaluations_per_epoch": args.evaluations_per_epoch,
            "grad_accumulation": args.grad_accumulation,
            "checkpoint": args.checkpoint,
            "score_test": args.score_test,
            "max_train_examples": args.max_train_examples,
            "max_eval_examples": args.max_eval_examples,
            "precision": args.precision,
        },
    }


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    config = config_from_args(args)
    from trainables.model_source import ModelUnavailableError, check_model

    try:  # before the data is read: a model that cannot load is said in one line
        check_model(config["model"])
    except ModelUnavailableError as error:
        raise SystemExit(f"trainables.train: {error}") from None
    reporter = TerminalReporter(args.output_dir, args.resume)
    try:
        metrics = run_trial(config, reporter)
    finally:
        reporter.close()
    print(json.dumps({"config": config, "metrics": metrics}, indent=2))


if __name__ == "__main__":
    main()
