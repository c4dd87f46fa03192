"""Named sweep specs shipped as YAML files in ``search_spaces/presets/``, and
``resolve_spec``: a spec merged over the preset it ``extends``, then validated.

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

from search_spaces.dataset_refs import dataset_label
from search_spaces.errors import SpecError, SpecIssue, brief
from search_spaces.spec import (
    DEFAULT_MAX_TRIALS,
    SweepSpec,
    check_text,
    stage_counts,
    trial_count,
    validate_spec,
)
from search_spaces.spec_file import SpecLoader
from search_spaces.spec_width import check_width

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
        data = yaml.load(entry.read_text(encoding="utf-8"), Loader=SpecLoader)
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
        raise UnknownPresetError(
            f"unknown preset {brief(name)}; valid: {', '.join(preset_names())}"
        )
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


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``: mappings merge key by key, anything else (lists
    included) is replaced. Neither input is modified."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def apply_extends(
    data: Mapping[str, Any], presets: Mapping[str, Mapping[str, Any]], chain: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``data`` merged over its ``extends`` preset (itself resolved the same way).

    Raises:
        SpecError: an unknown preset (listing the valid ones) or presets extending in a cycle.
    """
    name = data.get("extends")
    if name is None:
        return dict(data)
    if not isinstance(name, str) or name not in presets:
        valid = ", ".join(sorted(presets))
        raise SpecError([SpecIssue("extends", f"unknown preset {brief(name)}; valid: {valid}")])
    if name in chain:
        cycle = " -> ".join((*chain, name))
        raise SpecError([SpecIssue("extends", f"presets extend each other in a cycle: {cycle}")])
    return deep_merge(apply_extends(presets[name], presets, (*chain, name)), data)


def resolve_spec(
    data: Mapping[str, Any],
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    max_trials: int = DEFAULT_MAX_TRIALS,
) -> SweepSpec:
    """Apply ``extends`` (``presets`` defaults to the packaged ones), then validate.

    Raises:
        SpecError: every problem found, each with its field path and rule; a sweep of
            more than ``max_trials`` trials is one.
    """
    if not isinstance(data, Mapping):
        raise SpecError([SpecIssue("", f"a sweep spec is a mapping, got {type(data).__name__}")])
    check_width(data)  # before anything compares its keys with the valid ones
    check_text(data)  # before any message could quote it
    merged = apply_extends(data, shared_presets() if presets is None else presets)
    spec = validate_spec(merged, max_trials=max_trials)
    if "extends" in data and "description" not in data and DESCRIBED.intersection(data):
        # The preset's own words would describe another sweep (its data, its seeds).
        return spec.model_copy(update={"description": derived_description(spec)})
    return spec


# What a preset's description speaks of: a spec that changes one of them and writes no
# description of its own gets one derived from what it runs.
DESCRIBED = frozenset({"task", "model", "search_space", "search", "seeds", "tune"})


def derived_description(spec: SweepSpec) -> str:
    """``"ce, focal and dsc on my_ner (ner), tiny-bert, 1 seed (3 trials)"``; a
    two-stage sweep counts both stages: ``"... 1 seed (8 trials: 6 in stage 1 + 2 in
    stage 2)"``."""
    losses = list(dict.fromkeys(entry.name for entry in spec.search_space.losses))
    datasets = ", ".join(dataset_label(dataset) for dataset in spec.task.dataset)
    kind = f" ({spec.task.kind})" if spec.task.kind else ""
    seeds, trials, stages = len(spec.seeds), trial_count(spec), stage_counts(spec)
    counted = f"{trials} trial{'s' if trials != 1 else ''}"
    if "tune" in stages:
        counted += f": {stages['tune']} in stage 1 + {stages['final']} in stage 2"
    return (
        f"{_listed(losses)} on {datasets}{kind}, {spec.model}, "
        f"{seeds} seed{'s' if seeds != 1 else ''} ({counted})"
    )


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
