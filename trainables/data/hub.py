"""Data sets from the Hugging Face hub, loaded with ``datasets.load_dataset``.

A spec names one as ``{hub: org/name, config: ...}`` with ``task.kind``. Its records
are read by the fields of the ``jsonl`` format, with the hub's usual names as well,
so the rest of a trial cannot tell where its data came from:

- pairs (``pi``): ``text_a``/``text_b`` (or ``sentence1``/``sentence2``,
  ``question1``/``question2``) and ``label`` 0 or 1;
- tagging (``ner``, ``pos``): ``tokens`` and ``tags`` (or ``ner_tags``, ``upos``,
  ``pos_tags``), tag ids named by the column's ``ClassLabel``; NER's IOB1/BIOES read as IOB2;
- reading comprehension (``mrc``): SQuAD's ``id``, ``title``, ``context``, ``question``
  and ``answers`` (``{"text": [...], "answer_start": [...]}``).

Whether the hub or its cache can serve the data set is checked before a sweep starts
(``search_spaces.checks``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from search_spaces.datasets import DatasetInfo, Split
from trainables.data.examples import Answer, Example, PairExample, QAExample, TaggedSentence
from trainables.data.readers import to_iob2

HUB_SPLITS: dict[Split, tuple[str, ...]] = {
    "train": ("train",),
    "eval": ("validation", "dev"),
    "test": ("test",),
}
PAIR_FIELDS = (("text_a", "text_b"), ("sentence1", "sentence2"), ("question1", "question2"))
TAG_FIELDS = ("tags", "ner_tags", "upos", "pos_tags")


def load_from_hub(info: DatasetInfo, split: Split) -> list[Example]:
    """One split of the hub data set ``info`` (``hub_id``, ``hub_config``) as examples.

    Raises:
        ValueError: the data set has no such split, or a record lacks the fields of
            its kind (the message names the record and the fields).
    """
    import datasets

    available = datasets.get_dataset_split_names(info.hub_id, info.hub_config)
    names = [name for name in HUB_SPLITS[split] if name in available]
    if not names:
        raise ValueError(
            f"hub data set {info.hub_id!r} has no {' or '.join(HUB_SPLITS[split])} split; "
            f"it has: {', '.join(available)}"
        )
    records = datasets.load_dataset(info.hub_id, info.hub_config, split=names[0])
    return map_records(info, records, records.features)


def map_records(
    info: DatasetInfo, records: Iterable[Mapping[str, Any]], features: Any
) -> list[Example]:
    """``records`` (a ``datasets.Dataset``) as the example type of ``info.kind``."""
    if info.kind == "pi":
        return [_pair(info, index, record) for index, record in enumerate(records)]
    if info.kind == "mrc":
        return [_question(record) for record in records]
    column = next((name for name in TAG_FIELDS if name in features), None)
    if "tokens" not in features or column is None:
        raise ValueError(
            f"hub data set {info.hub_id!r}: a tagging record needs 'tokens' and one of "
            f"{', '.join(TAG_FIELDS)}; it has {', '.join(features)}"
        )
    tag_names = getattr(features[column], "feature", None)
    names = getattr(tag_names, "names", None)  # ClassLabel ids -> tag strings
    sentences = []
    for record in records:
        tags = [names[tag] if names else str(tag) for tag in record[column]]
        tokens = [str(token) for token in record["tokens"]]
        sentences.append(TaggedSentence(tokens, to_iob2(tags) if info.kind == "ner" else tags))
    return sentences


def _pair(info: DatasetInfo, index: int, record: Mapping[str, Any]) -> PairExample:
    fields = next(((a, b) for a, b in PAIR_FIELDS if a in record and b in record), None)
    if fields is None or "label" not in record:
        raise ValueError(
            f"hub data set {info.hub_id!r}: record {index} needs 'label' and one of "
            f"{', '.join('/'.join(pair) for pair in PAIR_FIELDS)}; it has {', '.join(record)}"
        )
    label = record["label"]
    if label not in (0, 1):
        raise ValueError(
            f"hub data set {info.hub_id!r}: record {index} has label {label!r}; pairs are "
            "labelled 0 or 1 (GLUE test splits are unlabelled: -1)"
        )
    identifier = record.get("idx", record.get("id", index))
    return PairExample(str(identifier), record[fields[0]], record[fields[1]], int(label))


def _question(record: Mapping[str, Any]) -> QAExample:
    answers = record["answers"]  # parallel lists: text[i] starts at answer_start[i]
    return QAExample(
        str(record["id"]),
        str(record.get("title", "")),
        record["context"],
        record["question"],
        [
            Answer(text, int(start))
            for text, start in zip(answers["text"], answers["answer_start"], strict=True)
        ],
    )
