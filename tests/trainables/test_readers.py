"""Readers on small generated files, then on the real data sets (marked ``data``)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from search_spaces.datasets import UnknownDatasetError
from trainables.data import (
    Answer,
    PairExample,
    QAExample,
    TaggedSentence,
    label_list,
    load_split,
    read_conll2003,
    read_conllu,
    read_glue_tsv,
    read_squad,
    split_squad_by_article,
    tag_inventory,
)

MRPC_HEAD = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
QQP_HEAD = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding=encoding)
    return path


# --- GLUE TSV -----------------------------------------------------------------


def test_mrpc_with_bom_and_bare_quotes(tmp_path: Path) -> None:
    text = (
        MRPC_HEAD
        + '1\t11\t12\tHe called " the witness " a liar .\tHe said " the witness " lied .\n'
        + "0\t21\t22\tShares rose 5 % .\tShares fell .\n"
    )
    path = write(tmp_path / "train.tsv", text, encoding="utf-8-sig")  # starts with a BOM
    assert read_glue_tsv(path) == [
        PairExample(
            "11-12", 'He called " the witness " a liar .', 'He said " the witness " lied .', 1
        ),
        PairExample("21-22", "Shares rose 5 % .", "Shares fell .", 0),
    ]


def test_mrpc_malformed_row_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.tsv", MRPC_HEAD + "1\t1\t2\ta\tb\n" + "2\t3\t4\tc\td\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:3: .*Quality 0 or 1"):
        read_glue_tsv(path)


def test_qqp_skips_malformed_rows_with_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = (
        QQP_HEAD
        + "7\t1\t2\tHow do I learn Python?\tWhat is the best way to learn Python?\t1\n"
        + "8\t3\t4\tWhy is the sky blue?\n"  # 4 columns
        + "9\t5\t6\tWhat is love?\t\t0\n"  # empty question2
        + '10\t7\t8\tIs "this" quoted?\tIs this quoted?\t0\n'
    )
    path = write(tmp_path / "qqp" / "train.tsv", text)
    with caplog.at_level(logging.WARNING, logger="trainables.data.readers"):
        examples = read_glue_tsv(path)
    assert [e.guid for e in examples] == ["7", "10"]
    assert examples[1].text_a == 'Is "this" quoted?'
    assert [e.label for e in examples] == [1, 0]
    assert "skipped 2 malformed QQP rows" in caplog.text
    assert "kept 2" in caplog.text


def test_unlabelled_glue_file_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "test.tsv", "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\ta\tb\n"
    )
    with pytest.raises(ValueError, match="unknown GLUE TSV header"):
        read_glue_tsv(path)


# --- CoNLL-2003 and CoNLL-U ----------------------------------------------------

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC"""  # no trailing newline: the last sentence still counts


def test_conll2003_sentences_skip_docstart(tmp_path: Path) -> None:
    sentences = read_conll2003(write(tmp_path / "train.txt", CONLL))
    assert sentences == [
        TaggedSentence(("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC")),
        TaggedSentence(("Peter", "Blackburn"), ("B-PER", "I-PER")),
        TaggedSentence(("BRUSSELS",), ("B-LOC",)),
    ]


def test_conll2003_one_column_line_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"x\.txt:2: expected 'token \.\.\. tag'"):
        read_conll2003(write(tmp_path / "x.txt", "EU NNP B-NP B-ORG\nlonely\n"))


CONLLU = """# newdoc id = doc1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tknow\tknow\tVERB\tVB\t_\t_\t_\t0:root\tCopyOf=4
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# text = Yes
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_skips_comments_ranges_and_empty_nodes(tmp_path: Path) -> None:
    sentences = read_conllu(write(tmp_path / "x.conllu", CONLLU))
    assert sentences == [
        TaggedSentence(("I", "do", "n't", "know", "."), ("PRON", "AUX", "PART", "VERB", "PUNCT")),
        TaggedSentence(("Yes",), ("INTJ",)),
    ]


def test_conllu_short_line_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"y\.conllu:1: .*10 tab-separated columns, got 3"):
        read_conllu(write(tmp_path / "y.conllu", "1\tI\tPRON\n"))


def test_tagged_sentence_needs_one_tag_per_token() -> None:
    with pytest.raises(ValueError, match="2 tokens but 1 tags"):
        TaggedSentence(["a", "b"], ["O"])


def test_tag_inventory_sorted_with_outside_first() -> None:
    sentences = [
        TaggedSentence(["x", "y", "z"], ["B-PER", "O", "I-PER"]),
        TaggedSentence(["w"], ["B-LOC"]),
    ]
    assert tag_inventory(sentences, outside_first=True) == ["O", "B-LOC", "B-PER", "I-PER"]
    assert tag_inventory(sentences) == ["B-LOC", "B-PER", "I-PER", "O"]


# --- SQuAD ----------------------------------------------------------------------


def squad_document(n_articles: int) -> dict[str, object]:
    """``n_articles`` articles "T0".., each one paragraph with two questions."""
    articles = []
    for a in range(n_articles):
        qas = [
            {
                "id": f"q{a}-{q}",
                "question": f"Q{q}?",
                "answers": [{"text": "Paris", "answer_start": 4}],
            }
            for q in range(2)
        ]
        articles.append(
            {"title": f"T{a}", "paragraphs": [{"context": "The Paris thing", "qas": qas}]}
        )
    return {"version": "1.1", "data": articles}


def test_read_squad_one_example_per_question(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.json", json.dumps(squad_document(2)))
    examples = read_squad(path)
    assert [e.qid for e in examples] == ["q0-0", "q0-1", "q1-0", "q1-1"]
    assert examples[0] == QAExample("q0-0", "T0", "The Paris thing", "Q0?", (Answer("Paris", 4),))
    assert examples[0].context[4:9] == "Paris"


def test_read_squad_refuses_a_file_without_data(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="top-level 'data' list"):
        read_squad(write(tmp_path / "x.json", "[]"))


def test_split_by_article_is_disjoint_and_deterministic(tmp_path: Path) -> None:
    examples = read_squad(write(tmp_path / "dev.json", json.dumps(squad_document(10))))
    train, evaluation = split_squad_by_article(examples, eval_fraction=0.2, seed=3)
    train_titles, eval_titles = {e.title for e in train}, {e.title for e in evaluation}
    assert len(eval_titles) == 2  # round(0.2 * 10)
    assert len(train_titles) == 8 and not train_titles & eval_titles
    assert len(train) + len(evaluation) == 20  # 10 articles x 2 questions
    assert (train, evaluation) == split_squad_by_article(examples, eval_fraction=0.2, seed=3)
    other_seeds = {
        frozenset(e.title for e in split_squad_by_article(examples, 0.2, seed)[1])
        for seed in range(10)
    }
    assert len(other_seeds) > 1  # the seed moves articles across the split


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_split_by_article_rejects_a_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        split_squad_by_article([], eval_fraction=fraction)


# --- load_split through the catalogue ------------------------------------------


def test_load_split_missing_file_names_dataset_path_and_setting(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        load_split("conll2003", "eval", tmp_path)
    message = str(caught.value)
    assert "'conll2003'" in message
    assert str(tmp_path.resolve() / "conll2003" / "valid.txt") in message
    assert "DICESWEEP_DATASETS_DIR" in message


def test_load_split_unknown_names_and_splits(tmp_path: Path) -> None:
    with pytest.raises(UnknownDatasetError, match=r"valid: .*mrpc"):
        load_split("nope", "train", tmp_path)
    with pytest.raises(ValueError, match="no 'test' split; available: train, eval"):
        load_split("squad_v1", "test", tmp_path)


def test_load_split_and_label_lists_from_a_generated_folder(tmp_path: Path) -> None:
    write(tmp_path / "conll2003" / "train.txt", CONLL)
    write(tmp_path / "squad" / "dev-v1.1.json", json.dumps(squad_document(5)))
    assert len(load_split("conll2003", "train", tmp_path)) == 3
    assert label_list("conll2003", tmp_path) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    assert label_list("mrpc", tmp_path) == ["0", "1"]
    with pytest.raises(ValueError, match="span extraction"):
        label_list("squad_v1", tmp_path)
    train = load_split("squad_v1", "train", tmp_path)
    evaluation = load_split("squad_v1", "eval", tmp_path)
    assert len({e.title for e in evaluation}) == 1  # round(0.2 * 5)
    assert len(train) + len(evaluation) == 10  # 5 articles x 2 questions


# --- the real data sets ----------------------------------------------------------


@pytest.mark.data
def test_real_mrpc(datasets_dir: Path) -> None:
    train = load_split("mrpc", "train", datasets_dir)
    assert len(train) == 3668
    positives = sum(e.label for e in train)
    assert positives == 2474 and round(100 * positives / len(train), 2) == 67.45  # 2474/3668
    dev = load_split("mrpc", "eval", datasets_dir)  # starts with a BOM
    assert len(dev) == 408 and round(100 * sum(e.label for e in dev) / 408, 1) == 68.4  # 279/408
    assert len(load_split("mrpc", "test", datasets_dir)) == 1725  # msr_paraphrase_test.txt
    assert any('"' in e.text_a for e in train)  # bare quotes survive QUOTE_NONE
    assert len({e.guid for e in train}) == 3668


@pytest.mark.data
def test_real_conll2003(datasets_dir: Path) -> None:
    train = load_split("conll2003", "train", datasets_dir)
    tags = Counter(tag for sentence in train for tag in sentence.tags)
    assert len(train) == 14041
    assert sum(tags.values()) == 203621
    assert round(100 * tags["O"] / 203621, 1) == 83.3
    assert not any("-DOCSTART-" in sentence.tokens for sentence in train)
    assert len(load_split("conll2003", "eval", datasets_dir)) == 3250
    assert len(load_split("conll2003", "test", datasets_dir)) == 3453
    labels = label_list("conll2003", datasets_dir)
    assert labels[0] == "O" and len(labels) == 9  # O + B-/I- of PER, LOC, ORG, MISC


@pytest.mark.data
def test_real_ud_english_ewt(datasets_dir: Path) -> None:
    train = load_split("ud_en_ewt", "train", datasets_dir)
    assert len(train) == 12544
    assert len(load_split("ud_en_ewt", "eval", datasets_dir)) == 2001
    assert len(load_split("ud_en_ewt", "test", datasets_dir)) == 2077
    tags = Counter(tag for sentence in train for tag in sentence.tags)
    assert tags["NOUN"] == 34751 and tags["X"] == 400
    assert label_list("ud_en_ewt", datasets_dir) == sorted(tags) and len(tags) == 17


@pytest.mark.data
def test_real_ud_chinese_gsd(datasets_dir: Path) -> None:
    sizes = [
        len(load_split("ud_zh_gsd", split, datasets_dir)) for split in ("train", "eval", "test")
    ]
    assert sizes == [3997, 500, 500]
    assert len(label_list("ud_zh_gsd", datasets_dir)) == 15  # UD v1 tags seen in train


@pytest.mark.data
def test_real_squad_split_by_article(datasets_dir: Path) -> None:
    everything = read_squad(datasets_dir / "squad" / "dev-v1.1.json")
    assert len(everything) == 10570 and len({e.title for e in everything}) == 48
    train = load_split("squad_v1", "train", datasets_dir)
    evaluation = load_split("squad_v1", "eval", datasets_dir)
    train_titles, eval_titles = {e.title for e in train}, {e.title for e in evaluation}
    assert (len(train_titles), len(eval_titles)) == (38, 10)  # round(0.2 * 48) = 10
    assert not train_titles & eval_titles
    assert len(train) + len(evaluation) == 10570
    assert {e.qid for e in train} | {e.qid for e in evaluation} == {e.qid for e in everything}
    assert load_split("squad_v1", "eval", datasets_dir) == evaluation  # deterministic
    assert all(e.context[a.start :].startswith(a.text) for e in evaluation for a in e.answers)
