"""A resolved spec, as the service stores it, validates again without presets."""

from __future__ import annotations

import pytest

from search_spaces.errors import SpecError
from search_spaces.presets import preset_names
from search_spaces.resolve import get_preset, resolve_spec, validate_spec


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_round_trips_through_its_stored_form(name: str) -> None:
    spec = get_preset(name)
    assert validate_spec(spec.model_dump(mode="json"), max_trials=None) == spec


def test_extends_is_provenance_and_never_applied_again() -> None:
    stored = resolve_spec({"extends": "smoke", "seeds": [3, 4]}).model_dump(mode="json")
    # Were the preset applied again, its seeds would come back; the stored ones stay.
    assert stored["extends"] == "smoke"
    assert validate_spec(stored, max_trials=None).seeds == [3, 4]


def test_an_unresolved_spec_is_refused_naming_the_missing_fields() -> None:
    with pytest.raises(SpecError) as caught:
        validate_spec({"extends": "smoke"}, max_trials=None)
    paths = {issue.path for issue in caught.value.issues}
    assert {"name", "task", "search_space"} <= paths


def test_no_cap_when_the_service_already_applied_its_own() -> None:
    stored = resolve_spec({"extends": "table8"}).model_dump(mode="json")
    with pytest.raises(SpecError, match="exceed the cap of 2"):
        validate_spec(stored, max_trials=2)
    assert validate_spec(stored, max_trials=None).name == "table8"


def test_a_spec_changing_what_a_preset_describes_gets_a_description_of_its_own() -> None:
    """The preset's words describe the preset's sweep: one's own NER folder with one
    seed is described as what it runs, not as all six losses on CoNLL-2003 x 3 seeds."""
    own = {
        "extends": "loss_compare",
        "seeds": [0],
        "task": {"kind": "ner", "dataset": {"path": "/data/my_ner", "format": "conll"}},
    }
    described = resolve_spec(own).description
    assert described == (
        "ce, wce, focal, dice, tversky and dsc on my_ner (ner), bert-base-cased, 1 seed (6 trials)"
    )
    assert "conll2003" not in described and "3 seeds" not in described
    losses = {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": [0.1, 0.5]}]}
    assert resolve_spec({"extends": "smoke", "search_space": losses}).description == (
        "ce and dsc on ud_en_ewt_sample (pos), tiny-bert, 1 seed (3 trials)"
    )
    # A description written in the spec is kept; a spec that changes nothing it speaks
    # of keeps the preset's.
    assert resolve_spec({**own, "description": "mine"}).description == "mine"
    assert resolve_spec({"extends": "smoke", "training": {"epochs": 2}}).description == (
        get_preset("smoke").description
    )
    # Stored in the resolved spec, it is what the driver reads (MLflow, the pages).
    stored = resolve_spec(own).model_dump(mode="json")
    assert validate_spec(stored, max_trials=None).description == described
