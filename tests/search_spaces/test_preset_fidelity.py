"""docs/sweeps.md's fidelity tables of the en_conll03 and squad_v1 presets are the ones
scripts/preset_fidelity.py generates from the presets, and they hold no undeclared
departure from the official scripts."""

from __future__ import annotations

from tests.scripts import script

fidelity = script("preset_fidelity")


def test_the_table_in_the_docs_is_current() -> None:
    text = fidelity.DOC.read_text(encoding="utf-8")
    assert fidelity.with_table(text) == text, "run: python scripts/preset_fidelity.py --write"


def test_no_preset_departs_from_its_script_undeclared() -> None:
    assert fidelity.departures() == []


def test_every_declared_reason_is_of_a_setting_that_differs() -> None:
    """A reason stays only while its preset's value differs from the script's."""
    for family in fidelity.FAMILIES:
        for preset in family.presets:
            differing = {row.setting for row in fidelity.rows(preset) if row.verdict != "same"}
            declared = {name for name in family.reasons if family.reason(name, preset)}
            assert differing == declared, preset


def test_the_en_conll03_departures_are_the_model_the_project_rules_and_the_eval_batch() -> None:
    assert set(fidelity.EN_CONLL03.reasons) == {
        "model",
        "repeated entity strings",
        "entities ending a sentence",
        "evaluation batch",
    }


def test_the_squad_v1_presets_differ_from_their_scripts_only_where_a_reason_says() -> None:
    focal = {row.setting: row for row in fidelity.rows("squad_v1-focal")}
    assert focal["decay"].verdict.startswith("one-cycle is not offered")
    assert focal["gradient accumulation"].preset == "18"  # 6 on each of three GPUs
    dice = {row.setting: row for row in fidelity.rows("squad_v1")}
    assert dice["loss"].verdict == dice["decay"].verdict == dice["model"].verdict == "same"


def test_a_preset_changed_by_hand_shows_an_undeclared_departure(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table reads the presets themselves: a learning rate set otherwise is caught."""
    resolved = fidelity.resolve_spec

    def changed(data: dict[str, object]) -> object:
        return resolved({**data, "training": {"learning_rate": 1e-4}})

    monkeypatch.setattr(fidelity, "resolve_spec", changed)
    assert {"en_conll03: learning rate", "squad_v1-ce: learning rate"} <= set(fidelity.departures())
