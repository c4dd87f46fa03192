"""NER as reading comprehension, data side: CoNLL-2003 to (query, sentence) examples and
back to IOB2 without a difference, through the words and through the tokenised
windows; the decoder and the scorer against conlleval's counts on a hand-made file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from seqeval.metrics.sequence_labeling import get_entities

from search_spaces.mrc_ner import MrcNerSpec
from trainables.data import TaggedSentence, read_conll2003
from trainables.data.mrc_ner import (
    entity_spans,
    entity_types,
    flat_spans,
    from_mrc_examples,
    resolve_overlaps,
    to_mrc_examples,
    to_tags,
)
from trainables.data.ner_queries import queries_for
from trainables.metrics import ner_metrics
from trainables.modeling import tiny_tokenizer
from trainables.tasks import EncodeOptions, build_task
from trainables.tasks.base import Batch
from trainables.tasks.mrc_ner import MrcNer
from trainables.tasks.mrc_ner_model import MrcNerOutput

CONLL_TYPES = ["LOC", "MISC", "ORG", "PER"]


def conll_task(labels: Sequence[str], settings: MrcNerSpec | None = None) -> MrcNer:
    task = build_task("ner", labels, mrc=settings or MrcNerSpec(), dataset="conll2003")
    assert isinstance(task, MrcNer)
    return task


def raw_tags(path: Path) -> list[str]:
    """The NER column of a CoNLL-2003 file as it is written, sentence after sentence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split()[-1] for line in lines if line.strip() and line[:10] != "-DOCSTART-"]


@pytest.mark.data
@pytest.mark.parametrize("split", ["train.txt", "valid.txt"])
def test_conll2003_to_mrc_examples_and_back_without_a_difference(
    datasets_dir: Path, split: str
) -> None:
    path = datasets_dir / "conll2003" / split
    sentences = read_conll2003(path)
    assert entity_types(t for s in sentences for t in s.tags) == CONLL_TYPES
    examples = to_mrc_examples(sentences, CONLL_TYPES, queries_for("conll2003", CONLL_TYPES))
    assert len(examples) == 4 * len(sentences)
    # Every entity seqeval finds (its conlleval mode) is one span of one example.
    entities = sum(len(get_entities(list(s.tags))) for s in sentences)
    assert sum(len(e.spans) for e in examples) == entities > 5000
    back = from_mrc_examples(examples, [len(s.tags) for s in sentences])
    assert [t for tags in back for t in tags] == raw_tags(path)  # 0 differences
    assert all(tuple(tags) == s.tags for tags, s in zip(back, sentences, strict=True))


@pytest.mark.data
@pytest.mark.parametrize(
    "settings",
    [MrcNerSpec(), MrcNerSpec(labels="official", decoding="official")],
    ids=["words-strict", "official"],
)
def test_conll2003_dev_through_the_tokenised_windows_scores_100(
    datasets_dir: Path, tmp_path: Path, settings: MrcNerSpec
) -> None:
    """Each window's gold start and end, as logits, decode to the dev set's own tags,
    in either layout and decoding; the per-query span count agrees."""
    sentences = read_conll2003(datasets_dir / "conll2003" / "valid.txt")
    labels = sorted({t for s in sentences for t in s.tags})
    task = conll_task(labels, settings)
    texts = [" ".join(s.tokens) for s in sentences] + list(task.queries.values())
    tokenizer = tiny_tokenizer(texts, tmp_path, "dev")
    features = task.encode(sentences, tokenizer, EncodeOptions(512), training=False)
    assert sum(sum(f["start_labels"]) for f in features) == sum(
        len(entity_spans(s.tags)) for s in sentences
    )
    batches = [task.collate(features[i : i + 64], 0) for i in range(0, len(features), 64)]
    scores = task.evaluate(gold_as_logits, batches, sentences)
    assert scores["f1"] == 100.0 and scores["accuracy"] == 100.0
    assert scores["span_f1"] == 100.0


def gold_as_logits(batch: Batch) -> MrcNerOutput:
    """A reader that is always right: logit +1 at gold starts and ends, -1 elsewhere."""
    return MrcNerOutput(
        start_logits=batch["start_labels"].float() * 2 - 1,
        end_logits=batch["end_labels"].float() * 2 - 1,
        span_logits=None,
        answerable_logits=None,
    )


# A hand-made prediction file in conlleval's format: word, gold tag, predicted tag.
PREDICTIONS = """\
EU B-ORG B-ORG
rejects O O
German B-MISC B-MISC
call O O
to O O
boycott O O
British B-MISC B-LOC
lamb O O
. O O

Peter B-PER B-PER
Blackburn I-PER O

The O O
European B-ORG B-ORG
Commission I-ORG I-ORG
said O O
on O O
Thursday O B-MISC
it O O
disagreed O O
with O O
German B-MISC B-MISC
advice O O
"""
# conlleval on this file: 6 gold phrases (ORG EU, MISC German, MISC British, PER Peter
# Blackburn, ORG European Commission, MISC German), 7 found (ORG EU, MISC German, LOC
# British, PER Peter, ORG European Commission, MISC Thursday, MISC German), 4 correct:
# precision 4/7 = 57.14%, recall 4/6 = 66.67%, FB1 2PR/(P+R) = 8/13 = 61.54.
CONLLEVAL_F1 = 100 * 8 / 13


def read_predictions(text: str) -> tuple[list[TaggedSentence], list[list[str]]]:
    gold, predicted = [], []
    for block in text.strip().split("\n\n"):
        rows = [line.split() for line in block.splitlines()]
        gold.append(TaggedSentence([r[0] for r in rows], [r[1] for r in rows]))
        predicted.append([r[2] for r in rows])
    return gold, predicted


def test_decoder_and_scorer_give_conllevals_f1_on_a_hand_made_file(tmp_path: Path) -> None:
    gold, predicted = read_predictions(PREDICTIONS)
    assert len(gold) == 3
    assert ner_metrics(predicted, [s.tags for s in gold])["f1"] == pytest.approx(CONLLEVAL_F1)
    labels = sorted({t for s in gold for t in s.tags} | {"B-LOC"})
    task = conll_task(labels)
    tokenizer = tiny_tokenizer([" ".join(s.tokens) for s in gold], tmp_path, "hand")
    features = task.encode(gold, tokenizer, EncodeOptions(128), training=False)
    batch = task.collate(features, 0)
    outputs = logits_of(predicted, task, batch)
    # What the decoder must drop: a lower-scoring PER over "European Commission said"
    # (overlapping the ORG), and a LOC start at "lamb" with no end after it.
    add_flags(outputs, batch, task.types.index("PER"), 2, [(1, 3)], score=0.5)
    add_flags(outputs, batch, task.types.index("LOC"), 0, [(7, None)], score=3.0)
    scores = task.evaluate(lambda _: outputs, [batch], gold)
    assert scores["f1"] == pytest.approx(CONLLEVAL_F1, abs=1e-9)


def logits_of(predicted: list[list[str]], task: MrcNer, batch: Batch) -> MrcNerOutput:
    """Start and end logits (+2 at a predicted entity's first and last word, -2
    elsewhere) of every window, from the predicted tags of its sentence."""
    shape = batch["input_ids"].shape
    outputs = MrcNerOutput(torch.full(shape, -2.0), torch.full(shape, -2.0), None, None)
    for sentence, tags in enumerate(predicted):
        for kind, start, end in entity_spans(tags):
            add_flags(outputs, batch, task.types.index(kind), sentence, [(start, end)], 2.0)
    return outputs


def add_flags(
    outputs: MrcNerOutput,
    batch: Batch,
    type_index: int,
    sentence: int,
    spans: list[tuple[int, int | None]],
    score: float,
) -> None:
    """Set the start (and end, unless None) logits of ``spans`` (word indices) in the
    window of ``sentence`` that asks for type ``type_index``."""
    (row,) = [
        r
        for r in range(len(batch["type_index"]))
        if int(batch["example_index"][r]) == sentence and int(batch["type_index"][r]) == type_index
    ]
    positions = batch["word_positions"][row]
    for start, end in spans:
        outputs.start_logits[row, positions[start]] = score
        if end is not None:
            outputs.end_logits[row, positions[end]] = score


def test_flat_spans_pair_each_start_with_the_nearest_end() -> None:
    #        0      1      2      3      4      5
    starts = [True, False, True, False, True, False]
    ends = [False, True, False, False, False, False]
    # 0 -> 1; 2 has no end at or after it; 4 neither.
    assert flat_spans(starts, ends) == [(0, 1)]
    # A start inside the span just taken is part of it: 0..3, then 4..4.
    assert flat_spans([1, 0, 1, 0, 1], [0, 0, 0, 1, 1]) == [(0, 3), (4, 4)]


def test_overlaps_across_types_keep_the_higher_score() -> None:
    kept = resolve_overlaps([(1.0, ("PER", 0, 1)), (3.0, ("ORG", 1, 2)), (0.5, ("LOC", 4, 4))])
    assert kept == [("ORG", 1, 2), ("LOC", 4, 4)]
    assert to_tags(5, kept) == ["O", "B-ORG", "I-ORG", "O", "B-LOC"]


def test_entity_spans_follow_conlleval_on_stray_inside_tags() -> None:
    # I-PER after O opens a PER; I-LOC after I-PER opens a LOC.
    assert entity_spans(["O", "I-PER", "I-PER", "I-LOC", "B-LOC", "I-LOC"]) == [
        ("PER", 1, 2),
        ("LOC", 3, 3),
        ("LOC", 4, 5),
    ]


def test_queries_come_from_the_spec_then_the_data_set_then_the_tag() -> None:
    queries = queries_for("conll2003", ["PER", "DATE"], {"PER": "Who is named?"})
    assert queries == {"PER": "Who is named?", "DATE": "DATE"}
    assert "organizations" in queries_for("conll2003", ["ORG"])["ORG"]


def test_a_truncated_entity_is_no_target(tmp_path: Path) -> None:
    sentence = TaggedSentence(["a"] * 30 + ["Paris"], ["O"] * 30 + ["B-LOC"])
    task = conll_task(["O", "B-LOC"], MrcNerSpec(queries={"LOC": "a place"}))
    tokenizer = tiny_tokenizer([" ".join(sentence.tokens), "place"], tmp_path, "truncated")
    (feature,) = task.encode([sentence], tokenizer, EncodeOptions(24), training=True)
    assert sum(feature["start_labels"]) == 0 and feature["answerable"] == 0
    assert len(feature["input_ids"]) == 24
