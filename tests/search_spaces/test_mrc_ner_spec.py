"""``task: {kind: ner, formulation: mrc}``: where it is allowed, what it defaults to, and
what each trial receives."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from search_spaces.errors import SpecError
from search_spaces.mrc_ner import MrcNerSpec
from search_spaces.resolve import resolve_spec
from trainables.driver.tune_search import to_param_space


def spec(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "mrc-ner",
        "task": task,
        "model": "tiny-bert",
        "search_space": {"losses": [{"name": "ce"}, {"name": "dice", "scope": "set"}]},
        "seeds": [0],
    }


def issue(task: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        resolve_spec(spec(task), presets={})
    return str(caught.value.issues[0])


def test_the_tagger_stays_the_default_and_its_trials_unchanged() -> None:
    resolved = resolve_spec(spec({"dataset": "conll2003"}), presets={})
    assert (resolved.task.formulation, resolved.task.mrc) == ("tagger", None)
    space = to_param_space(resolved)
    assert "formulation" not in space and "mrc" not in space


def test_mrc_trials_carry_the_defaults_or_the_given_settings() -> None:
    resolved = resolve_spec(spec({"dataset": "conll2003", "formulation": "mrc"}), presets={})
    space = to_param_space(resolved)
    assert space["formulation"] == "mrc" and space["mrc"] == MrcNerSpec().model_dump()
    assert space["mrc"]["span_head"] and space["mrc"]["dice_positions"] == "context"
    given = {"dataset": "conll2003", "formulation": "mrc", "mrc": {"queries": {"PER": "Who?"}}}
    assert to_param_space(resolve_spec(spec(given), presets={}))["mrc"]["queries"] == {
        "PER": "Who?"
    }


@pytest.mark.parametrize(
    "task,expected",
    [
        (
            {"dataset": "ud_en_ewt", "formulation": "mrc"},
            "task.formulation: formulation 'mrc' applies to ner data sets only",
        ),
        (
            {"dataset": "conll2003", "mrc": {"span_head": False}},
            "task.mrc: mrc settings need formulation: mrc",
        ),
        ({"dataset": "conll2003", "formulation": "qa"}, "task.formulation"),
        (
            {"dataset": "conll2003", "formulation": "mrc", "mrc": {"span_wieght": 1}},
            "task.mrc.span_wieght",
        ),
        (
            {"dataset": "conll2003", "formulation": "mrc", "mrc": {"queries": {"PER": " "}}},
            "task.mrc.queries.PER: the query of 'PER' must be 1 to 1000 characters",
        ),
        (
            {"dataset": "conll2003", "formulation": "mrc", "mrc": {"dropout": 1.0}},
            "task.mrc.dropout",
        ),
    ],
)
def test_a_misplaced_or_misspelt_setting_names_its_field(
    task: dict[str, Any], expected: str
) -> None:
    assert issue(task).startswith(expected)


def test_the_span_f1_metric_needs_the_mrc_formulation() -> None:
    with pytest.raises(
        SpecError, match=r"search\.metric.*eval_span_f1 .* needs task.formulation mrc"
    ):
        resolve_spec({"extends": "smoke", "search": {"metric": "eval_span_f1"}})


def test_the_official_layout_and_decoding_are_options_with_the_project_defaults() -> None:
    mrc = MrcNerSpec()
    assert (mrc.labels, mrc.decoding) == ("words", "strict")
    with pytest.raises(ValidationError, match="labels"):
        MrcNerSpec.model_validate({"labels": "tokens"})
