"""Metrics against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

import re
import string
import warnings
from pathlib import Path

import numpy as np
import pytest

from trainables.data import Answer, QAExample, load_split
from trainables.metrics import (
    ner_metrics,
    normalize_answer,
    pi_metrics,
    pos_metrics,
    squad_exact_match,
    squad_f1,
    squad_metrics,
)

# --- paraphrase identification ----------------------------------------------------

PREDS = [1, 1, 1, 0, 0, 0, 1, 0]
LABELS = [1, 0, 1, 1, 0, 0, 0, 0]


def test_pi_metrics_positive_class() -> None:
    # TP = items 0, 2 -> 2; predicted positive = 0, 1, 2, 6 -> 4; gold positive = 0, 2, 3 -> 3
    # P = 2/4 = 50, R = 2/3 = 66.67, F1 = 2PR/(P+R) = 4/7 = 57.14; correct 0,2,4,5,7 -> 5/8
    metrics = pi_metrics(np.array(PREDS), np.array(LABELS))
    assert metrics == pytest.approx(
        {"f1": 400 / 7, "precision": 50.0, "recall": 200 / 3, "accuracy": 62.5}
    )


def test_pi_metrics_other_positive_label() -> None:
    # Class 0: predicted 3, 4, 5, 7 (4); gold 1, 4, 5, 6, 7 (5); TP 4, 5, 7 (3)
    # P = 3/4 = 75, R = 3/5 = 60, F1 = 2 * 75 * 60 / 135 = 66.67
    metrics = pi_metrics(PREDS, LABELS, positive=0)
    assert metrics["precision"] == pytest.approx(75.0)
    assert metrics["recall"] == pytest.approx(60.0)
    assert metrics["f1"] == pytest.approx(200 / 3)


def test_pi_metrics_no_positive_prediction_scores_zero() -> None:
    assert pi_metrics([0, 0], [1, 0]) == {
        "f1": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "accuracy": 50.0,
    }


def test_pi_metrics_rejects_mismatched_or_empty_input() -> None:
    with pytest.raises(ValueError, match="3 predictions but 2 gold"):
        pi_metrics([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="no items"):
        pi_metrics([], [])


# --- NER (seqeval spans) -------------------------------------------------------------


def test_ner_metrics_span_level() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC", "I-MISC"]]
    pred = [["B-PER", "O", "B-ORG", "B-LOC"], ["B-LOC", "O", "B-MISC", "I-MISC"]]
    # Gold spans: PER[0:2], LOC[3], ORG[0], MISC[2:4] -> 4.
    # Predicted: PER[0] (boundary wrong), ORG[2] (spurious), LOC[3] (right),
    #            LOC[0] (type wrong), MISC[2:4] (right) -> 5, of which 2 right.
    # P = 2/5 = 40, R = 2/4 = 50, F1 = 2 * 40 * 50 / 90 = 44.44
    # Token accuracy: sentence 1 right at 0, 3; sentence 2 at 1, 2, 3 -> 5/8 = 62.5
    metrics = ner_metrics(pred, gold)
    assert metrics == pytest.approx(
        {"f1": 4000 / 90, "precision": 40.0, "recall": 50.0, "accuracy": 62.5}
    )


def test_ner_metrics_default_mode_reads_a_leading_i_as_a_start() -> None:
    # conlleval-compatible default mode: I-PER after O opens a PER span, so [0:2] matches.
    assert ner_metrics([["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"] == 100.0


def test_ner_metrics_no_predicted_entity_is_zero_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = ner_metrics([["O", "O"]], [["B-LOC", "O"]])
    assert (metrics["precision"], metrics["recall"], metrics["f1"]) == (0.0, 0.0, 0.0)
    assert metrics["accuracy"] == 50.0


def test_ner_metrics_rejects_a_sentence_length_mismatch() -> None:
    with pytest.raises(ValueError, match="sentence 1 has 1 predicted tags, 2 gold"):
        ner_metrics([["O"], ["O"]], [["O"], ["O", "O"]])


# --- POS ----------------------------------------------------------------------------


def test_pos_metrics_micro_equals_accuracy() -> None:
    pred = [["DET", "NOUN", "VERB"], ["PRON", "VERB"]]
    gold = [["DET", "NOUN", "NOUN"], ["PRON", "AUX"]]
    # 3 of 5 words right -> 60; each wrong word is one FP and one FN, so P = R = F1 = 60
    assert pos_metrics(pred, gold) == pytest.approx(
        {"f1": 60.0, "precision": 60.0, "recall": 60.0, "accuracy": 60.0}
    )


def test_pos_metrics_rejects_a_sentence_length_mismatch() -> None:
    with pytest.raises(ValueError, match="sentence 0 has 2 predicted tags, 1 gold"):
        pos_metrics([["X", "X"]], [["X"]])


# --- SQuAD ---------------------------------------------------------------------------


def official_normalize_answer(s: str) -> str:
    """``normalize_answer`` of the official SQuAD v1.1 evaluate-v1.1.py, verbatim."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat", "cat"),  # case and article
        ("  an  apple, the pie! ", "apple pie"),  # punctuation, articles, whitespace
        ("A-team", "ateam"),  # punctuation goes first, so "a" is no longer a word
        ("theater in\tAthens\n", "theater in athens"),  # articles only as whole words
        ("Levi's Stadium", "levis stadium"),
        ("the", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected
    assert official_normalize_answer(text) == expected


def test_exact_match_takes_the_best_gold_answer() -> None:
    assert squad_exact_match("the Eiffel Tower.", ["Paris", "Eiffel tower"]) == 1.0
    assert squad_exact_match("Tower", ["Eiffel Tower"]) == 0.0
    # Both normalise to "": equal strings, as in the official script.
    assert squad_exact_match("the", ["a"]) == 1.0


def test_f1_token_overlap() -> None:
    # "big red dog" vs "red dog barked": 2 common, P = R = 2/3 -> F1 = 2/3
    assert squad_f1("the big red dog", ["a red dog barked"]) == pytest.approx(2 / 3)
    # vs "red dog barked loudly": P = 2/3, R = 2/4 -> F1 = 2 * (1/3) / (7/6) = 4/7; max with 0
    assert squad_f1("the big red dog", ["cat", "red dog barked loudly"]) == pytest.approx(4 / 7)
    # Repeated tokens count once per match: "dog dog" vs "dog": P = 1/2, R = 1 -> 2/3
    assert squad_f1("the dog dog", ["dog"]) == pytest.approx(2 / 3)
    assert squad_f1("the", ["a"]) == 0.0  # no token left, no overlap
    with pytest.raises(ValueError, match="at least one gold answer"):
        squad_f1("x", [])


def test_squad_metrics_percent_with_an_unanswered_question() -> None:
    examples = [
        QAExample("q1", "t", "c", "Who won?", [Answer("Denver Broncos", 0)]),
        QAExample(
            "q2",
            "t",
            "c",
            "Where?",
            [Answer("Santa Clara, California", 0), Answer("Levi's Stadium", 0)],
        ),
        QAExample("q3", "t", "c", "When?", [Answer("2016", 0)]),
    ]
    predictions = {"q1": "Denver Broncos", "q2": "Levi's Stadium in Santa Clara", "other": "x"}
    # q1: EM 1, F1 1. q2: "levis stadium in santa clara" (5 tokens) vs "santa clara
    # california": P 2/5, R 2/3 -> 1/2; vs "levis stadium": P 2/5, R 1 -> 4/7; EM 0.
    # q3 unanswered: 0. EM = 1/3 = 33.33; F1 = (1 + 4/7) / 3 = 11/21 = 52.38
    assert squad_metrics(predictions, examples) == pytest.approx(
        {"exact_match": 100 / 3, "f1": 1100 / 21}
    )


def test_squad_v2_unanswerable_questions_score_an_empty_prediction() -> None:
    examples = [
        QAExample("q1", "t", "c", "Who won?", [Answer("Denver Broncos", 0)]),
        QAExample("q2", "t", "c", "Who lost?", []),
        QAExample("q3", "t", "c", "Who sang?", []),
    ]
    # q1 right; q2 answered with nothing (the article only, normalised away): right;
    # q3 answered with a span: wrong, in both measures (the v2 script's rule).
    predictions = {"q1": "Denver Broncos", "q2": "the", "q3": "Beyonce"}
    assert squad_metrics(predictions, examples) == pytest.approx(
        {"exact_match": 200 / 3, "f1": 200 / 3}
    )


@pytest.mark.data
def test_squad_metrics_of_gold_answers_on_real_dev(datasets_dir: Path) -> None:
    examples = [e for e in load_split("squad_v1", "eval", datasets_dir) if isinstance(e, QAExample)]
    predictions = {e.qid: e.answers[0].text for e in examples}
    assert squad_metrics(predictions, examples) == {"exact_match": 100.0, "f1": 100.0}


def test_pi_baselines_are_always_positive_f1_and_majority_accuracy() -> None:
    from trainables.metrics import pi_baselines

    labels = [1, 0, 1, 1, 0]  # precision 3/5, recall 1: F1 = 2 * 0.6 / 1.6 = 75
    assert pi_baselines(labels) == {
        "baseline_f1": pytest.approx(75.0),
        "baseline_accuracy": pytest.approx(60.0),  # paraphrase for every pair: 3 of 5
    }
    assert pi_baselines(labels)["baseline_f1"] == pi_metrics([1] * 5, labels)["f1"]
    # The positive class in the minority: always-positive F1 of 2/5 positives, and the
    # majority class (1) still gives the accuracy.
    assert pi_baselines(labels, positive=0) == {
        "baseline_f1": pytest.approx(2 * 0.4 / 1.4 * 100),
        "baseline_accuracy": pytest.approx(60.0),
    }


def test_tagging_baselines_tag_every_word_o_or_with_the_commonest_tag() -> None:
    from trainables.metrics import tagging_baselines

    pos = [["NOUN", "VERB", "NOUN"], ["DET", "NOUN"]]  # NOUN: 3 of 5 words
    assert tagging_baselines(pos, by_spans=False) == {
        "baseline_f1": pytest.approx(60.0),
        "baseline_accuracy": pytest.approx(60.0),
    }
    assert (
        tagging_baselines(pos, by_spans=False)["baseline_f1"]
        == (pos_metrics([["NOUN"] * 3, ["NOUN"] * 2], pos)["f1"])
    )
    ner = [["B-PER", "I-PER", "O", "O"], ["O", "B-LOC"]]  # O: 3 of 6 words
    assert tagging_baselines(ner, by_spans=True) == {
        "baseline_f1": 0.0,
        "baseline_accuracy": pytest.approx(50.0),
    }


def test_top_prediction_share() -> None:
    from trainables.metrics import top_prediction_share

    assert top_prediction_share([1, 1, 0, 1]) == pytest.approx(75.0)
    assert top_prediction_share(["O"] * 9 + ["B-PER"]) == pytest.approx(90.0)
    assert top_prediction_share([]) == 0.0


def test_the_no_skill_span_rule_answers_the_first_k_words() -> None:
    from trainables.metrics import first_k_tokens, span_baselines

    examples = [
        QAExample(
            "a", "t", "Ada Lovelace wrote the first program.", "Who?", [Answer("Ada Lovelace", 0)]
        ),
        QAExample("b", "t", "The engine was never built.", "What?", [Answer("engine", 4)]),
        QAExample("c", "t", "In London, in 1843.", "Where?", [Answer("London", 3)]),
    ]
    assert first_k_tokens(examples) == 1  # answers of 2, 1, 1 words: mean 1.33
    # "Ada" (F1 2/3), "The" (normalised away: 0), "In" (0); exact match nowhere.
    assert span_baselines(examples) == {
        "baseline_f1": pytest.approx(100 * (2 / 3) / 3),
        "baseline_exact_match": 0.0,
    }
    unanswerable = QAExample("d", "t", "Never.", "When?", [])
    # SQuAD v2: answering nothing (1 of 4 right) beats the first word (2/3 of a point).
    assert span_baselines([*examples, unanswerable], no_answer=True) == {
        "baseline_f1": pytest.approx(25.0),
        "baseline_exact_match": pytest.approx(25.0),
    }
