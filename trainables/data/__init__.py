"""Data for the trainables: example types, readers, Table 8 variants."""

from trainables.data.examples import Answer, Example, PairExample, QAExample, TaggedSentence
from trainables.data.hub import load_from_hub
from trainables.data.loading import label_list, load_split, tag_inventory
from trainables.data.own_formats import read_jsonl, read_pairs_tsv
from trainables.data.readers import (
    read_conll2003,
    read_conllu,
    read_glue_tsv,
    read_squad,
    split_squad_by_article,
    to_iob2,
)
from trainables.data.variants import (
    VARIANT_NAMES,
    VariantPlan,
    class_counts,
    make_variant,
    plan_variant,
)

__all__ = [
    "VARIANT_NAMES",
    "Answer",
    "Example",
    "PairExample",
    "QAExample",
    "TaggedSentence",
    "VariantPlan",
    "class_counts",
    "label_list",
    "load_from_hub",
    "load_split",
    "make_variant",
    "plan_variant",
    "read_conll2003",
    "read_conllu",
    "read_glue_tsv",
    "read_jsonl",
    "read_pairs_tsv",
    "read_squad",
    "split_squad_by_article",
    "tag_inventory",
    "to_iob2",
]
