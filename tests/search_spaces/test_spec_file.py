"""Reading spec files: YAML 1.2 numbers, JSON as JSON, errors that say where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search_spaces.resolve import resolve_spec
from search_spaces.spec_file import SpecFileError, read_spec_file


def test_an_exponent_without_a_dot_is_a_number_in_yaml(tmp_path: Path) -> None:
    # PyYAML's YAML 1.1 reads `5e-5` as a string; every learning rate written so failed.
    path = tmp_path / "spec.yaml"
    path.write_text(
        "extends: smoke\ntraining: {learning_rate: 5e-5, warmup_ratio: 1e-1}\nname: 1e-3x\n"
    )
    spec = read_spec_file(str(path))
    assert spec["training"] == {"learning_rate": 5e-5, "warmup_ratio": 0.1}
    assert spec["name"] == "1e-3x"
    assert resolve_spec(spec).training.learning_rate == 5e-5


def test_a_resolved_spec_round_trips_through_json(tmp_path: Path) -> None:
    # What the service writes for a driver (spec.json) reads back as it was.
    resolved = resolve_spec({"extends": "smoke", "training": {"learning_rate": 5.0e-5}})
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(resolved.model_dump(mode="json")))
    assert read_spec_file(str(path)) == resolved.model_dump(mode="json")
    path.write_text('{"extends": "smoke",\n "seeds": [0,]}')
    with pytest.raises(SpecFileError, match=r"spec\.json:2:14: invalid JSON: Expecting value"):
        read_spec_file(str(path))
