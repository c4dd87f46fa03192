"""Named sweep specs shipped as YAML files in ``search_spaces/presets/``.

Each file is a spec whose ``name`` is the file's stem, with a ``description`` that
ends in its trial count; a preset may ``extends`` another. Every preset resolves
with ``{"extends": "<name>"}`` alone.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from search_spaces.spec import SweepSpec, resolve_spec, trial_count

PRESETS_DIR = "presets"


class UnknownPresetError(ValueError):
    """A preset name that no file in ``search_spaces/presets/`` defines."""


class PresetInfo(BaseModel):
    """A preset as listed: its name, what it runs and how many trials that is."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    trial_count: int


@functools.cache
def _read_presets() -> dict[str, dict[str, Any]]:
    """Parse every ``presets/*.yaml`` once.

    Raises:
        ValueError: a file that is not a mapping, or whose ``name`` is not its stem.
    """
    found: dict[str, dict[str, Any]] = {}
    for entry in resources.files("search_spaces").joinpath(PRESETS_DIR).iterdir():
        if not entry.name.endswith(".yaml"):
            continue
        stem = entry.name.removesuffix(".yaml")
        data = yaml.safe_load(entry.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("name") != stem:
            raise ValueError(f"preset file {entry.name} must be a mapping with name: {stem}")
        found[stem] = data
    return found


def load_presets() -> dict[str, dict[str, Any]]:
    """Every preset's spec as written (``extends`` not applied), by name; a fresh copy."""
    return copy.deepcopy(_read_presets())


def shared_presets() -> Mapping[str, Mapping[str, Any]]:
    """Every preset's spec as written, by name: the parsed files themselves, read-only
    by contract (``resolve_spec`` never modifies its inputs), so resolving a spec
    copies nothing. ``load_presets`` gives a copy to change."""
    return _read_presets()


def preset_names() -> list[str]:
    """The preset names, sorted."""
    return sorted(_read_presets())


def get_preset(name: str) -> SweepSpec:
    """The preset ``name`` resolved into a spec (its ``extends`` applied).

    Raises:
        UnknownPresetError: no such preset; the message lists the valid names.
    """
    if name not in _read_presets():
        raise UnknownPresetError(f"unknown preset {name!r}; valid: {', '.join(preset_names())}")
    return resolve_spec({"extends": name}, shared_presets())


def list_presets() -> list[PresetInfo]:
    """Name, description and trial count of every preset, sorted by name."""
    infos = []
    for name in preset_names():
        spec = get_preset(name)
        infos.append(
            PresetInfo(name=name, description=spec.description, trial_count=trial_count(spec))
        )
    return infos
