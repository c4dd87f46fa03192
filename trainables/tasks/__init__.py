"""Task kinds (``pi``, ``ner``, ``pos``, ``mrc``): features, loss and metrics for each."""

from __future__ import annotations

from collections.abc import Sequence

from search_spaces.datasets import TaskKind
from search_spaces.mrc_ner import MrcNerSpec
from trainables.data.mrc_ner import entity_types
from trainables.data.ner_queries import queries_for
from trainables.tasks.base import Batch, EncodeOptions, Feature, Task, model_inputs
from trainables.tasks.classification import PairClassification
from trainables.tasks.mrc_ner import MrcNer
from trainables.tasks.span import SpanExtraction
from trainables.tasks.tagging import Tagging


def build_task(
    kind: TaskKind,
    labels: Sequence[str],
    positive: int | None = None,
    no_answer: bool = False,
    mrc: MrcNerSpec | None = None,
    dataset: str = "",
) -> Task:
    """The task adapter for ``kind`` (``positive``: the scored class of ``pi``, required
    there; ``no_answer``: ``mrc`` questions may have no answer, as in SQuAD v2; ``mrc``:
    ``ner`` asked as reading comprehension, with the queries of ``dataset``); raises
    ``ValueError`` listing the valid kinds."""
    if kind == "ner" and mrc is not None:
        return MrcNer(labels, mrc, queries_for(dataset, entity_types(labels), mrc.queries))
    if kind == "pi":
        if positive is None:
            raise ValueError("a pi task needs its scored class (positive: 0 or 1)")
        return PairClassification(labels, positive)
    if kind in ("ner", "pos"):
        return Tagging(labels, kind=kind)
    if kind == "mrc":
        return SpanExtraction(labels, no_answer=no_answer)
    raise ValueError(f"unknown task kind {kind!r}; valid: mrc, ner, pi, pos")


__all__ = ["Batch", "EncodeOptions", "Feature", "Task", "build_task", "model_inputs"]
