"""A trial's data: read, varied, capped, tokenised once and cached on disk.

A binary set's scored class is resolved here, where its training file is read:
the spec's ``positive_label``, else the file's minority (``trainables.data.classes``).

Every trial of a sweep that shares (data set, variant, caps, tokenizer, max
length, stride) reads the same pickled features from ``cache_dir``; the first
one writes them under a file lock, atomically, so concurrent trials never read
a half-written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from filelock import FileLock
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from search_spaces.datasets import DatasetInfo
from trainables.data import PairExample, QAExample, TaggedSentence, label_list, load_split
from trainables.data.classes import ScoredClass, scored_class, stratified_sample
from trainables.data.variants import make_variant
from trainables.modeling import TINY_BERT, load_tokenizer, tiny_tokenizer, tokenizer_fingerprint
from trainables.tasks import EncodeOptions, Feature, Task, build_task

# The data-set variants are fixed data sets, the same for every seed of a sweep:
# seeds vary initialisation and order, not the data.
VARIANT_SEED = 0
CAP_SEED = 0


@dataclass(frozen=True)
class DataRequest:
    """What a trial asks for (all of it is part of the cache key)."""

    dataset: DatasetInfo  # search_spaces.datasets.dataset_info: a catalogue entry or a folder
    variant: str
    model: str
    max_seq_length: int
    doc_stride: int
    max_train_examples: int | None
    max_eval_examples: int | None
    # The scored class of a binary set; the variants follow it. None: the training
    # file's minority (``resolve_scored_class`` sets it before the cache key is made).
    positive_label: int | None = None


@dataclass
class TrialData:
    """Everything the training loop needs from the data side."""

    info: DatasetInfo
    task: Task
    tokenizer: PreTrainedTokenizerBase
    train_features: list[Feature]
    eval_features: list[Feature]
    eval_examples: list[Any]
    scored: ScoredClass | None = None  # a binary set's scored class; None for the others


def _cap(examples: list[Any], limit: int | None) -> list[Any]:
    """A fixed subset of ``limit`` examples (the same for every trial); pairs keep
    their label shares (``stratified_sample``)."""
    if limit is None:
        return examples
    return stratified_sample(examples, limit, CAP_SEED)


def resolve_scored_class(
    request: DataRequest, datasets_dir: Path
) -> tuple[DataRequest, ScoredClass | None]:
    """``request`` with a binary set's scored class filled in from its training file,
    and that class; a set that is not binary is returned as it is, with None.

    Raises:
        ValueError: a binary set whose training labels are not 0 and 1.
    """
    info = request.dataset
    if not info.binary:
        return request, None
    train = load_split(info, "train", datasets_dir)
    labels = [e.label for e in train if isinstance(e, PairExample)]
    scored = scored_class(labels, request.positive_label)
    return replace(request, positive_label=scored.label), scored


def _texts(examples: Sequence[Any]) -> list[str]:
    """The raw texts a tiny tokenizer learns its vocabulary from."""
    texts: list[str] = []
    for example in examples:
        if isinstance(example, PairExample):
            texts += [example.text_a, example.text_b]
        elif isinstance(example, TaggedSentence):
            texts.append(" ".join(example.tokens))
        elif isinstance(example, QAExample):
            texts += [example.question, example.context]
    return texts


def read_examples(request: DataRequest, datasets_dir: Path) -> tuple[list[Any], list[Any]]:
    """The training examples (the variant built, then capped) and the evaluation ones
    (capped) a trial of ``request`` trains and is scored on, before tokenising.
    The variants turn around ``request.positive_label`` (None: the file's minority)."""
    info = request.dataset
    train = load_split(info, "train", datasets_dir)
    if request.variant != "original":
        if not info.binary:
            raise ValueError(
                f"variant {request.variant!r} needs a binary data set; {info.name!r} is {info.kind}"
            )
        pairs = [e for e in train if isinstance(e, PairExample)]
        train = make_variant(
            pairs, request.variant, seed=VARIANT_SEED, positive=request.positive_label
        )
    evaluation = load_split(info, "eval", datasets_dir)
    return _cap(train, request.max_train_examples), _cap(evaluation, request.max_eval_examples)


def _labels(info: DatasetInfo, datasets_dir: Path) -> list[str]:
    return [] if info.kind == "mrc" else label_list(info, datasets_dir)


def _tokenizer(request: DataRequest, train: list[Any], cache_dir: Path) -> PreTrainedTokenizerBase:
    if request.model != TINY_BERT:
        return load_tokenizer(request.model)
    key = _digest(
        {
            "dataset": asdict(request.dataset),
            "variant": request.variant,
            "cap": request.max_train_examples,
            "positive": request.positive_label,  # the variant's texts follow it
        }
    )
    return tiny_tokenizer(_texts(train), cache_dir, key)


def _digest(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _cached(path: Path, build: Any) -> Any:
    """Load ``path``, or build, write atomically and return it (under a file lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            with path.open("rb") as handle:
                return pickle.load(handle)
        value = build()
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with partial.open("wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        partial.replace(path)
        return value


def load_trial_data(request: DataRequest, datasets_dir: Path, cache_dir: Path) -> TrialData:
    """Read, vary, cap and tokenise (or load the cached features of) one trial's data,
    scored on the resolved scored class of a binary set.

    Raises:
        UnknownDatasetError, FileNotFoundError, ValueError: from the readers and
            variants, naming the data set and the rule.
    """
    info = request.dataset
    request, scored = resolve_scored_class(request, datasets_dir)
    train, evaluation = read_examples(request, datasets_dir)
    # SQuAD v2 and the like: unanswerable training questions mean "no answer" is a prediction.
    no_answer = any(isinstance(e, QAExample) and not e.answers for e in train)
    task = build_task(
        info.kind, _labels(info, datasets_dir), positive=request.positive_label, no_answer=no_answer
    )
    tokenizer = _tokenizer(request, train, cache_dir)
    options = EncodeOptions(request.max_seq_length, request.doc_stride)
    key = _digest(
        {
            "request": asdict(request),
            "tokenizer": tokenizer_fingerprint(tokenizer),
            "labels": task.labels,
            "format": 2,  # 2: caps on pair sets are stratified
        }
    )
    folder = cache_dir / "features" / f"{info.name}-{key}"
    train_features = _cached(
        folder / "train.pkl", lambda: task.encode(train, tokenizer, options, training=True)
    )
    eval_features = _cached(
        folder / "eval.pkl", lambda: task.encode(evaluation, tokenizer, options, training=False)
    )
    return TrialData(info, task, tokenizer, train_features, eval_features, evaluation, scored)
