"""The foreground average's background tag against the spec's data sets.

``classes: foreground`` (the dice family, ``search_spaces.losses``) averages every
class but one background tag: ``O`` unless the loss names another. Which tags a data
set has is known before a trial for some of them only: a paraphrase (``pi``) set's
classes are ``0`` and ``1``, and a POS set's UPOS or CTB tags have no ``O``. Where the
tag is certainly absent the spec is refused here, at submission; NER sets and local
tag sets are checked by the trainable against the tags it reads
(``validate_loss_spec`` with ``labels``).
"""

from __future__ import annotations

from search_spaces.dataset_refs import dataset_label
from search_spaces.datasets import DATASETS, TaskKind
from search_spaces.errors import rule_error
from search_spaces.loss_entries import LossEntry, candidates
from search_spaces.losses import DEFAULT_BACKGROUND
from search_spaces.sweep_sections import TaskSpec

PAIR_LABELS = ("0", "1")  # a pairs set's classes, catalogue or local


def background_tags(entry: LossEntry) -> list[str]:
    """The background tags a loss entry's foreground points leave out (none when no
    point of it takes ``classes: foreground``)."""
    params = entry.params()
    if "foreground" not in candidates(params.get("classes", "mean")):
        return []
    return [str(tag) for tag in candidates(params.get("background", DEFAULT_BACKGROUND))]


def _absent(tag: str, kind: TaskKind, labels: tuple[str, ...]) -> bool:
    """Whether a data set of ``kind`` whose known labels are ``labels`` surely lacks ``tag``."""
    if kind == "pi":
        return tag not in (labels or PAIR_LABELS)
    return kind == "pos" and tag == DEFAULT_BACKGROUND


def check_background(task: TaskSpec, losses: list[LossEntry]) -> None:
    """Refuse a foreground loss whose background tag a data set of the task lacks.

    Raises:
        PydanticCustomError: at ``search_space.losses[i]``, naming the tag, the data
            set and its classes.
    """
    for index, entry in enumerate(losses):
        for tag in background_tags(entry):
            for dataset in task.dataset:
                kind = task.kind_of(dataset)
                labels = DATASETS[dataset].labels if isinstance(dataset, str) else ()
                if _absent(tag, kind, labels):
                    has = (
                        f"its classes are {', '.join(labels or PAIR_LABELS)}"
                        if kind == "pi"
                        else "its tags have no O"
                    )
                    raise rule_error(
                        f"{entry.name}: classes 'foreground' leaves out the background tag "
                        f"{tag!r}, which {dataset_label(dataset)} ({kind}) does not have: {has}; "
                        "name one of its classes as background",
                        f"search_space.losses[{index}]",
                    )
