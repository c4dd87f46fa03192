"""Evaluation metrics of the paper's four tasks, in percent (0..100) as its tables.

Pure functions over plain sequences (lists, numpy arrays, CPU tensors), no torch.
Every function returns a dict with the same key names where they apply:
``f1``, ``precision``, ``recall``, ``accuracy``, ``exact_match``.

Raises (every function): ``ValueError`` when predictions and gold differ in
length (per sentence for tagging) or are empty.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from trainables.data.examples import QAExample


def _check_lengths(predictions: Sequence[Any], gold: Sequence[Any], what: str) -> None:
    if len(predictions) != len(gold):
        raise ValueError(f"{what}: {len(predictions)} predictions but {len(gold)} gold items")
    if len(gold) == 0:
        raise ValueError(f"{what}: no items to score")


def _percent(numerator: float, denominator: float) -> float:
    """``100 * numerator / denominator``, 0 for an empty denominator (nothing to score)."""
    return 100.0 * numerator / denominator if denominator else 0.0


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def pi_metrics(preds: Sequence[Any], labels: Sequence[Any], positive: int = 1) -> dict[str, float]:
    """Precision, recall and F1 of the ``positive`` class, and accuracy (paraphrase ID).

    ``preds`` and ``labels`` are class ids of shape (N,). Precision is 0 when
    nothing is predicted positive, recall 0 when no gold item is positive.
    """
    _check_lengths(preds, labels, "pi_metrics")
    pairs = [(int(p), int(g)) for p, g in zip(preds, labels, strict=True)]
    true_pos = sum(p == positive and g == positive for p, g in pairs)
    pred_pos = sum(p == positive for p, _ in pairs)
    gold_pos = sum(g == positive for _, g in pairs)
    precision = _percent(true_pos, pred_pos)
    recall = _percent(true_pos, gold_pos)
    return {
        "f1": _f1(precision, recall),
        "precision": precision,
        "recall": recall,
        "accuracy": _percent(sum(p == g for p, g in pairs), len(pairs)),
    }


def _check_sentences(
    pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]], what: str
) -> None:
    _check_lengths(pred_tags, gold_tags, what)
    for index, (pred, gold) in enumerate(zip(pred_tags, gold_tags, strict=True)):
        if len(pred) != len(gold):
            raise ValueError(
                f"{what}: sentence {index} has {len(pred)} predicted tags, {len(gold)} gold"
            )


def ner_metrics(
    pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Span-level micro precision, recall and F1 (CoNLL, via seqeval), and token accuracy.

    Tags are IOB2 strings per token, one list per sentence. A predicted entity
    counts only when its type and both boundaries match a gold one exactly;
    seqeval's default mode, as the CoNLL-2003 ``conlleval`` script.
    """
    # Imported here: seqeval loads scikit-learn (~2 s), which only NER scoring needs.
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    _check_sentences(pred_tags, gold_tags, "ner_metrics")
    gold = [list(tags) for tags in gold_tags]
    pred = [list(tags) for tags in pred_tags]
    # zero_division=0: no predicted (or no gold) entity scores 0, without a warning.
    return {
        "f1": 100.0 * float(f1_score(gold, pred, zero_division=0)),
        "precision": 100.0 * float(precision_score(gold, pred, zero_division=0)),
        "recall": 100.0 * float(recall_score(gold, pred, zero_division=0)),
        "accuracy": 100.0 * float(accuracy_score(gold, pred)),
    }


def pos_metrics(
    pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Word-level micro precision, recall, F1 and accuracy of part-of-speech tags.

    With exactly one tag per word every wrong word is one false positive (of
    the predicted tag) and one false negative (of the gold tag), so micro
    precision = recall = F1 = accuracy; all four are returned so that the keys
    match the other tasks (the paper reports F1 for POS).
    """
    _check_sentences(pred_tags, gold_tags, "pos_metrics")
    words = [
        (p, g)
        for pred, gold in zip(pred_tags, gold_tags, strict=True)
        for p, g in zip(pred, gold, strict=True)
    ]
    accuracy = _percent(sum(p == g for p, g in words), len(words))
    return {"f1": accuracy, "precision": accuracy, "recall": accuracy, "accuracy": accuracy}


def top_prediction_share(predictions: Iterable[Hashable]) -> float:
    """The percent of ``predictions`` equal to the most frequent one: 100 for a
    constant predictor (one class, tag or answer for every input), 0 for none."""
    counts = Counter(predictions)
    return _percent(max(counts.values(), default=0), sum(counts.values()))


def pi_baselines(labels: Sequence[Any], positive: int = 1) -> dict[str, float]:
    """Paraphrase identification's no-skill rules, scored by ``pi_metrics``: the F1 of
    predicting ``positive`` for every pair (``baseline_f1``) and the accuracy of
    predicting the majority class for every pair (``baseline_accuracy``)."""
    majority = Counter(int(label) for label in labels).most_common(1)[0][0] if labels else 0
    return {
        "baseline_f1": pi_metrics([positive] * len(labels), labels, positive)["f1"],
        "baseline_accuracy": pi_metrics([majority] * len(labels), labels, positive)["accuracy"],
    }


def tagging_baselines(gold_tags: Sequence[Sequence[str]], by_spans: bool) -> dict[str, float]:
    """Tagging's no-skill rule, scored as the task scores (``ner_metrics`` for spans,
    ``pos_metrics`` per word): every word tagged ``O`` where spans are scored and the
    tag set has ``O`` (NER: F1 0), else every word the most frequent gold tag (POS).
    Returns ``baseline_f1`` and ``baseline_accuracy``."""
    counts = Counter(tag for sentence in gold_tags for tag in sentence)
    fill = "O" if by_spans and "O" in counts else counts.most_common(1)[0][0] if counts else "O"
    predicted = [[fill] * len(sentence) for sentence in gold_tags]
    scores = (ner_metrics if by_spans else pos_metrics)(predicted, gold_tags)
    return {"baseline_f1": scores["f1"], "baseline_accuracy": scores["accuracy"]}


# SQuAD v1.1: the functions below follow the official evaluate-v1.1.py step by step.
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    return _f1(common / len(pred_tokens), common / len(gold_tokens))


def squad_exact_match(prediction: str, gold_answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0.

    Raises:
        ValueError: no gold answer.
    """
    if not gold_answers:
        raise ValueError("squad_exact_match: a question needs at least one gold answer")
    target = normalize_answer(prediction)
    return max(float(target == normalize_answer(gold)) for gold in gold_answers)


def squad_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    """Best bag-of-tokens F1 (0..1) of the normalised prediction over the gold answers.

    Raises:
        ValueError: no gold answer.
    """
    if not gold_answers:
        raise ValueError("squad_f1: a question needs at least one gold answer")
    return max(_token_f1(prediction, gold) for gold in gold_answers)


def squad_metrics(
    predictions: Mapping[str, str], examples: Sequence[QAExample]
) -> dict[str, float]:
    """Exact match and F1 over ``examples``, in percent, as the official scripts.

    ``predictions`` maps question ids to answer strings; a question without a
    prediction scores 0 (as in the official script), predictions for other ids
    are ignored. A question without gold answers (SQuAD v2's unanswerable) scores 1
    in both when the prediction is empty after normalisation, else 0, as the v2
    script scores it.

    Raises:
        ValueError: no examples.
    """
    if not examples:
        raise ValueError("squad_metrics: no examples to score")
    exact = f1 = 0.0
    for example in examples:
        if example.qid not in predictions:
            continue
        if not example.answers:
            right = float(normalize_answer(predictions[example.qid]) == "")
            exact, f1 = exact + right, f1 + right
            continue
        gold = [answer.text for answer in example.answers]
        exact += squad_exact_match(predictions[example.qid], gold)
        f1 += squad_f1(predictions[example.qid], gold)
    return {"exact_match": _percent(exact, len(examples)), "f1": _percent(f1, len(examples))}


def first_k_tokens(examples: Sequence[QAExample]) -> int:
    """k of the no-skill span rule: the mean length in words of the questions' first
    gold answers, rounded, at least 1 (SQuAD v1.1 dev: 3)."""
    lengths = [len(e.answers[0].text.split()) for e in examples if e.answers]
    return max(round(sum(lengths) / len(lengths)), 1) if lengths else 1


def span_baselines(examples: Sequence[QAExample], no_answer: bool = False) -> dict[str, float]:
    """Reading comprehension's no-skill rule, scored by ``squad_metrics``: answer every
    question with the first k words of its passage (``first_k_tokens``); where
    questions may have no answer (``no_answer``, SQuAD v2) answering nothing is a rule
    too, and the better of the two by F1 counts. Returns ``baseline_f1`` and
    ``baseline_exact_match``."""
    k = first_k_tokens(examples)
    rules = [{e.qid: " ".join(e.context.split()[:k]) for e in examples}]
    if no_answer:
        rules.append({e.qid: "" for e in examples})
    best = max((squad_metrics(rule, examples) for rule in rules), key=lambda s: s["f1"])
    return {"baseline_f1": best["f1"], "baseline_exact_match": best["exact_match"]}
