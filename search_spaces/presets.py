"""Named sweep specs shipped as YAML files in ``search_spaces/presets/``, and
``apply_extends``: a spec merged over the preset it ``extends``, as written.

Each file is a spec whose ``name`` is the file's stem, with a ``description`` that
ends in its trial count; a preset may ``extends`` another. Every preset resolves
with ``{"extends": "<name>"}`` alone (``search_spaces.resolve``, which validates;
nothing here knows the spec's model).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from search_spaces.errors import SpecError, SpecIssue, brief
from search_spaces.spec_file import SpecLoader

PRESETS_DIR = "presets"


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
    by contract (``apply_extends`` never modifies its inputs), so resolving a spec
    copies nothing. ``load_presets`` gives a copy to change."""
    return _read_presets()


def preset_names() -> list[str]:
    """The preset names, sorted."""
    return sorted(_read_presets())


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
