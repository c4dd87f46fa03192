"""docs/sweeps.md's fidelity table of the en_conll03 presets is the one
scripts/preset_fidelity.py generates from the presets, and it holds no undeclared
departure from the official scripts."""

from __future__ import annotations

from tests.scripts import script

fidelity = script("preset_fidelity")


def test_the_table_in_the_docs_is_current() -> None:
    text = fidelity.DOC.read_text(encoding="utf-8")
    assert fidelity.with_table(text) == text, "run: python scripts/preset_fidelity.py --write"


def test_no_preset_departs_from_its_script_undeclared() -> None:
    assert fidelity.departures() == []


def test_the_declared_departures_are_the_model_the_project_rules_and_the_eval_batch() -> None:
    for preset in fidelity.PRESETS:
        differing = {row.setting for row in fidelity.rows(preset) if row.verdict != "same"}
        assert differing == set(fidelity.REASONS), preset


def test_a_preset_changed_by_hand_shows_an_undeclared_departure(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table reads the presets themselves: a learning rate set otherwise is caught."""
    resolved = fidelity.resolve_spec

    def changed(data: dict[str, object]) -> object:
        return resolved({**data, "training": {"learning_rate": 1e-4}})

    monkeypatch.setattr(fidelity, "resolve_spec", changed)
    assert "en_conll03: learning rate" in fidelity.departures()
