"""NER as reading comprehension (BERT-MRC, the formulation of the paper's NER results):
its settings in a spec, ``task: {kind: ner, formulation: mrc, mrc: {...}}``.

One (query, sentence) example per entity type; binary start and end heads per word;
optionally a span-match head over (start, end) pairs and an answerability head. The
defaults of the heads and their weights are the official code's
(ShannonAI/dice_loss_for_NLP, ``tasks/mrc_ner``); ``dice_positions``, ``labels`` and
``decoding`` default to this project's rules, each with the official one as an option.
The ``en_conll03`` presets set the official values (docs/sweeps.md, the fidelity
table); docs/sweeps.md describes each field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from search_spaces.errors import ClosedModel, rule_error

Formulation = Literal["tagger", "mrc"]
Weight = Annotated[float, Field(strict=True, ge=0, le=100, allow_inf_nan=False)]
# Which (start, end) pairs the span-match loss is computed on (the official
# ``--span_loss_candidates``): every valid pair, the gold and predicted ones, or those
# and a random half of the rest.
SpanCandidates = Literal["all", "gold_pred", "gold_pred_random"]
MAX_QUERY_CHARS = 1000


class MrcNerSpec(ClosedModel):
    """How NER is asked as reading comprehension (``task.mrc``)."""

    # A span-match head scores every (start, end) pair of words, trained on the
    # candidates; the official CoNLL-2003 script has none (``--construct_entity_span
    # start_and_end``), its other scripts have one (``start_end_match``).
    span_head: bool = True
    span_weight: Weight = 0.3  # the span loss's weight (``--weight_span``)
    span_candidates: SpanCandidates = "gold_pred_random"
    # An answerability head on [CLS] (does the sentence hold this type at all?): "off",
    # trained beside start/end ("train"), or trained and used to drop the spans of a
    # query it calls unanswerable ("train_infer", the official ``--pred_answerable``).
    answerable: Literal["off", "train", "train_infer"] = "off"
    answerable_weight: Weight = 0.4  # its loss's weight (``--answerable_task_ratio``)
    # Where dice and dsc score start and end: the context words ("context", as BCE and
    # focal are), or every position of the window, query, [SEP] and padding included
    # ("all", as the official code calls its DiceLoss without the label mask).
    dice_positions: Literal["context", "all"] = "context"
    # Where the start and end targets sit and which positions BCE and focal count:
    # "words": a word is its first sub-token, the targets there and the mask the
    # context words; "official": the mask is every context sub-token and the last
    # [SEP] (``token_type_ids == 1``), the end target the last sub-token of the
    # entity's last word (the official code's datasets/mrc_ner_dataset.py).
    labels: Literal["words", "official"] = "words"
    # How a query's start and end flags become spans: "strict": each start to the
    # nearest end at or after it, a start without one predicting nothing; "official":
    # the official code's BMES decoding (a start without an end is a one-position
    # span; an end that is also a start opens the next span), over the masked positions.
    decoding: Literal["strict", "official"] = "strict"
    # The encoder's hidden dropout (``hidden_dropout_prob``, also before the heads; the
    # official ``--bert_hidden_dropout``); None: the model's own (BERT: 0.1).
    dropout: Annotated[float, Field(strict=True, ge=0, lt=1)] | None = None
    # The question asked for each entity type; unset types take the data set's own
    # queries (trainables.data.ner_queries), else the tag's name.
    queries: dict[str, str] = Field(default_factory=dict)

    @field_validator("queries")
    @classmethod
    def _short_questions(cls, queries: dict[str, str]) -> dict[str, str]:
        for kind, query in queries.items():
            if not kind or not query.strip() or len(query) > MAX_QUERY_CHARS:
                raise rule_error(
                    f"the query of {kind!r} must be 1 to {MAX_QUERY_CHARS} characters", kind
                )
        return queries
