"""Load a catalogued data set from a dataset hub instead of local files.

For machines that can reach a hub: ``pip install dicesweep[hub]``. Hub records
are mapped to the same example types as the local readers, so the rest of a
trial cannot tell where its data came from.
"""

from __future__ import annotations

from typing import Any

from search_spaces.datasets import DatasetInfo, Split, get_dataset
from trainables.data.examples import Answer, Example, PairExample, QAExample, TaggedSentence

HUB_SPLITS: dict[Split, str] = {"train": "train", "eval": "validation", "test": "test"}
PAIR_COLUMNS = {"mrpc": ("sentence1", "sentence2"), "qqp": ("question1", "question2")}
TAG_COLUMNS = {"ner": "ner_tags", "pos": "upos"}


def load_from_hub(name: str, split: Split) -> list[Example]:
    """Download one split of a catalogued data set and map it to example types.

    Raises:
        UnknownDatasetError: ``name`` is not in the catalogue.
        ImportError: the ``datasets`` library is not installed.
        ValueError: a GLUE test split (its labels are hidden: -1).
    """
    info = get_dataset(name)
    try:
        import datasets  # optional: only hub users install it
    except ImportError as error:
        raise ImportError(
            "loading data sets from a hub needs the 'datasets' library: pip install dicesweep[hub]"
        ) from error
    records = datasets.load_dataset(info.hub_id, info.hub_config, split=HUB_SPLITS[split])
    if info.kind == "pi":
        return _pairs(info, records)
    if info.kind == "mrc":
        return [_question(record) for record in records]
    column = TAG_COLUMNS[info.kind]
    names = records.features[column].feature.names  # ClassLabel ids -> tag strings
    return [
        TaggedSentence(record["tokens"], [names[tag] for tag in record[column]])
        for record in records
    ]


def _pairs(info: DatasetInfo, records: Any) -> list[Example]:
    first, second = PAIR_COLUMNS[info.name]
    examples: list[Example] = []
    for record in records:
        if record["label"] not in (0, 1):
            raise ValueError(
                f"data set {info.name!r}: hub record {record['idx']} has label "
                f"{record['label']}; GLUE test splits are unlabelled, use train or eval"
            )
        examples.append(
            PairExample(str(record["idx"]), record[first], record[second], int(record["label"]))
        )
    return examples


def _question(record: dict[str, Any]) -> QAExample:
    answers = record["answers"]  # parallel lists: text[i] starts at answer_start[i]
    return QAExample(
        record["id"],
        record["title"],
        record["context"],
        record["question"],
        [
            Answer(text, int(start))
            for text, start in zip(answers["text"], answers["answer_start"], strict=True)
        ],
    )
