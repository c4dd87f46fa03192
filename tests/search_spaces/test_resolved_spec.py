"""A resolved spec, as the service stores it, validates again without presets."""

from __future__ import annotations

import pytest

from search_spaces.errors import SpecError
from search_spaces.presets import get_preset, preset_names, resolve_spec
from search_spaces.spec import validate_spec


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
