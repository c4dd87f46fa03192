"""A trial's data: read, varied, capped, tokenised once and cached on disk.

A binary set's scored class is resolved here, where its training file is read:
the spec's ``positive_label``, else the file's minority (``trainables.data.classes``).

Every trial of a sweep that shares (data set, variant, caps, tokenizer, max
length, stride, holdout, stage) reads the same pickled features from ``cache_dir``;
the first one writes them under a file lock, atomically, so concurrent trials never
read a half-written file.

A two-stage sweep's stage 1 (``search_spaces.tuning``) holds out a share of the
training file (``holdout_split``) before anything else is done to it: a ``tune``
trial trains on the rest and is scored on the held-out split. The split only selects:
a ``final`` trial trains on the whole training file, whatever its ``holdout``, and is
scored on the dev set.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from filelock import FileLock
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from search_spaces.datasets import DatasetInfo
from search_spaces.mrc_ner import MrcNerSpec
from search_spaces.setup import CAP_SEED
from trainables.data import PairExample, QAExample, TaggedSentence, label_list, load_split
from trainables.data.classes import ScoredClass, scored_class, stratified_sample
from trainables.data.variants import make_variant
from trainables.modeling import TINY_BERT, load_tokenizer, tiny_tokenizer, tokenizer_fingerprint
from trainables.tasks import EncodeOptions, Feature, Task, build_task
from trainables.tasks.mrc_ner import MrcNer

# The data-set variants are fixed data sets, the same for every seed of a sweep:
# seeds vary initialisation and order, not the data.
VARIANT_SEED = 0


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
    holdout: float | None = None  # share of the training file held out (tune only); None: none
    holdout_seed: int = 0
    stage: str = "final"  # "tune": scored on the held-out split; "final": on the dev set
    formulation: str = "tagger"  # ner: "tagger", or "mrc" (reading comprehension)
    mrc: dict[str, Any] | None = None  # formulation mrc: search_spaces.mrc_ner.MrcNerSpec
    # Also read the data set's test split (capped as the evaluation split is); a tune
    # trial never does (``trainables.train.data_request``).
    test: bool = False


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
    test_features: list[Feature] | None = None  # the test split, where the trial scores it
    test_examples: list[Any] | None = None


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


def holdout_split(examples: list[Any], share: float, seed: int) -> tuple[list[Any], list[Any]]:
    """``(rest, held_out)``: about ``share`` of ``examples`` held out, chosen by ``seed``,
    both in file order. Pairs are held out class by class (the same share of each
    label, so the tuning split keeps the file's imbalance); reading-comprehension
    questions whole articles at a time (questions on one paragraph never fall on
    both sides); tagged sentences one by one. Each group keeps at least one example
    on each side where it has two."""
    groups: dict[Any, list[int]] = {}
    for index, example in enumerate(examples):
        groups.setdefault(_holdout_group(example), []).append(index)
    rng = random.Random(seed)
    held: set[int] = set()
    if examples and isinstance(examples[0], QAExample):
        titles = sorted(groups)
        count = min(max(1, round(share * len(titles))), len(titles) - 1)
        for title in rng.sample(titles, count):
            held.update(groups[title])
    else:
        for key in sorted(groups, key=str):
            members = groups[key]
            count = min(max(1, round(share * len(members))), len(members) - 1)
            held.update(rng.sample(members, count))
    rest = [e for i, e in enumerate(examples) if i not in held]
    return rest, [e for i, e in enumerate(examples) if i in held]


def _holdout_group(example: Any) -> Any:
    if isinstance(example, PairExample):
        return example.label
    if isinstance(example, QAExample):
        return example.title
    return None


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
    (capped) a trial of ``request`` trains and is scored on, before tokenising: a
    ``tune`` trial's without its tuning split and scored on it, a ``final`` trial's
    the whole training file, scored on dev.
    The variants turn around ``request.positive_label`` (None: the file's minority)."""
    info = request.dataset
    train = load_split(info, "train", datasets_dir)
    held_out: list[Any] = []
    if request.holdout is not None and request.stage == "tune":
        # Before the variant and the cap: the tuning split is drawn from the training
        # file as it is, and nothing of it reaches a trial's training data.
        train, held_out = holdout_split(train, request.holdout, request.holdout_seed)
    if request.variant != "original":
        if not info.binary:
            raise ValueError(
                f"variant {request.variant!r} needs a binary data set; {info.name!r} is {info.kind}"
            )
        pairs = [e for e in train if isinstance(e, PairExample)]
        train = make_variant(
            pairs, request.variant, seed=VARIANT_SEED, positive=request.positive_label
        )
    evaluation = held_out if request.stage == "tune" else load_split(info, "eval", datasets_dir)
    return _cap(train, request.max_train_examples), _cap(evaluation, request.max_eval_examples)


def _labels(info: DatasetInfo, datasets_dir: Path) -> list[str]:
    return [] if info.kind == "mrc" else label_list(info, datasets_dir)


def _tokenizer(
    request: DataRequest, train: list[Any], cache_dir: Path, queries: Sequence[str] = ()
) -> PreTrainedTokenizerBase:
    """The model's tokenizer; for ``tiny-bert`` one learned from the training texts and
    the ``queries`` of NER as reading comprehension (a query spelled out letter by
    letter would leave a short window no room for its sentence)."""
    if request.model != TINY_BERT:
        return load_tokenizer(request.model)
    parts = {
        "dataset": asdict(request.dataset),
        "variant": request.variant,
        "cap": request.max_train_examples,
        "holdout": [request.holdout, request.holdout_seed],
        "positive": request.positive_label,  # the variant's texts follow it
    }
    key = _digest({**parts, "queries": list(queries)} if queries else parts)
    return tiny_tokenizer(_texts(train) + list(queries), cache_dir, key)


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
        info.kind,
        _labels(info, datasets_dir),
        positive=request.positive_label,
        no_answer=no_answer,
        mrc=MrcNerSpec.model_validate(request.mrc or {}) if request.formulation == "mrc" else None,
        dataset=info.name,
    )
    queries = list(task.queries.values()) if isinstance(task, MrcNer) else []
    tokenizer = _tokenizer(request, train, cache_dir, queries)
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
    data = TrialData(info, task, tokenizer, train_features, eval_features, evaluation, scored)
    if request.test:
        test = _cap(load_split(info, "test", datasets_dir), request.max_eval_examples)
        data.test_examples = test
        data.test_features = _cached(
            folder / "test.pkl", lambda: task.encode(test, tokenizer, options, training=False)
        )
    return data
