"""Resolving a sweep spec: the one module that turns what was written into the spec
that runs, on its way down from the route (or the driver) and never back up.

``resolve_spec`` takes a spec as submitted (``extends`` not applied) and, in turn:
checks its width (``spec_width``) and its text (``check_text``), merges it over the
preset it ``extends`` (``presets.apply_extends``), validates it into a ``SweepSpec``
(``spec``'s model and rules) and caps its trials (``trial_count``), and gives a spec
that changes what its preset's description speaks of a description of its own
(``derived_description``). ``validate_spec`` is the same walk for a spec already
resolved (the driver's, the stored one's): no presets, no new description.

Neither ``spec`` nor ``presets`` imports this module; both are below it.

Number of trials (``trial_count``):

- grid: ``grid points × data sets × variants × seeds``, where the grid points are the
  sum over loss entries of the product of each entry's list lengths;
- random/TPE: ``num_samples × seeds``: ``num_samples`` configurations are drawn and each
  runs once per seed, so the searcher sees the mean over seeds;
- with ``tune`` (``search_spaces.tuning``): ``losses × trials_per_loss`` in stage 1 plus
  ``losses × seeds`` in stage 2 (one data set and one variant, a grid of losses);
- seeds until decided (``seeds: {min, max, until: decided}``): the seeds are counted at
  ``max``, the most the rule may run (the cap's count; a sweep whose losses stop sooner
  runs fewer).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from search_spaces.dataset_refs import dataset_label
from search_spaces.errors import SpecError, SpecIssue, brief
from search_spaces.plural import counted
from search_spaces.presets import apply_extends, preset_names, shared_presets
from search_spaces.spec import SweepSpec
from search_spaces.spec_width import check_width
from search_spaces.tuning import Stage

DEFAULT_MAX_TRIALS = 1000

# What a preset's description speaks of: a spec that changes one of them and writes no
# description of its own gets one derived from what it runs.
DESCRIBED = frozenset({"task", "model", "search_space", "search", "seeds", "tune"})


class UnknownPresetError(ValueError):
    """A preset name that no file in ``search_spaces/presets/`` defines."""


class PresetInfo(BaseModel):
    """A preset as listed: its name, what it runs and how many trials that is."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    trial_count: int


class Resolved(NamedTuple):
    """A submission resolved: its spec and how many trials it runs (both stages)."""

    spec: SweepSpec
    trials: int


def resolve_submission(
    data: Mapping[str, Any], *, max_trials: int = DEFAULT_MAX_TRIALS
) -> Resolved:
    """``resolve_spec`` with the trial count it checked against ``max_trials``: what
    the service stores, so that nothing past this module counts again. Raises
    SpecError as ``resolve_spec`` does."""
    spec = resolve_spec(data, max_trials=max_trials)
    return Resolved(spec, trial_count(spec))


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
    _check_mapping(data)
    check_width(data)  # before anything compares its keys with the valid ones
    check_text(data)  # before any message could quote it
    merged = apply_extends(data, shared_presets() if presets is None else presets)
    spec = _validated(merged, max_trials)
    if "extends" in data and "description" not in data and DESCRIBED.intersection(data):
        # The preset's own words would describe another sweep (its data, its seeds).
        return spec.model_copy(update={"description": derived_description(spec)})
    return spec


def validate_spec(
    data: Mapping[str, Any], *, max_trials: int | None = DEFAULT_MAX_TRIALS
) -> SweepSpec:
    """Validate a whole spec whose ``extends`` is already applied (it is kept, as
    provenance, and never applied again): what a driver does with the spec the service
    resolved and stored. ``max_trials=None`` sets no cap on the trials.

    Raises:
        SpecError: every problem found, each with its field path and rule.
    """
    _check_mapping(data)
    check_text(data)
    return _validated(data, max_trials)


def _check_mapping(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise SpecError([SpecIssue("", f"a sweep spec is a mapping, got {type(data).__name__}")])


def _validated(data: Mapping[str, Any], max_trials: int | None) -> SweepSpec:
    """``data`` as a ``SweepSpec``, refused when it runs more than ``max_trials`` trials
    (the message gives the count's formula). Raises SpecError."""
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as error:
        raise SpecError.from_validation_error(error) from None
    count = trial_count(spec)
    if max_trials is not None and count > max_trials:
        rule = f"{count} trials ({_count_formula(spec)}) exceed the cap of {max_trials}"
        raise SpecError([SpecIssue("", rule)])
    return spec


def get_preset(name: str) -> SweepSpec:
    """The preset ``name`` resolved into a spec (its ``extends`` applied).

    Raises:
        UnknownPresetError: no such preset; the message lists the valid names.
    """
    if name not in shared_presets():
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


def _count_factors(spec: SweepSpec) -> dict[str, int]:
    """The factors of the trial count (of stage 2's with ``tune``)."""
    seeds = len(spec.seed_list)
    if spec.search.algorithm != "grid":
        return {"samples": spec.search.num_samples or 1, "seeds": seeds}
    return {
        "losses": sum(entry.grid_size() for entry in spec.search_space.losses),
        "datasets": len(spec.task.dataset),
        "variants": len(spec.task.variant),
        "seeds": seeds,
    }


def _count_formula(spec: SweepSpec) -> str:
    factors = _count_factors(spec)
    formula = f"{' × '.join(factors)} = {' × '.join(str(n) for n in factors.values())}"
    if spec.tune is None:
        return formula
    points, budget = factors["losses"], spec.tune.trials_per_loss
    return f"losses × trials_per_loss + {formula.replace(' = ', f' = {points} × {budget} + ')}"


def stage_counts(spec: SweepSpec) -> dict[Stage, int]:
    """How many trials each stage runs: ``{"final": n}`` without ``tune``; with it,
    stage 1 is ``losses × trials_per_loss`` (the losses: every loss grid point)."""
    final = math.prod(_count_factors(spec).values())
    if spec.tune is None:
        return {"final": final}
    points = sum(entry.grid_size() for entry in spec.search_space.losses)
    return {"tune": points * spec.tune.trials_per_loss, "final": final}


def trial_count(spec: SweepSpec) -> int:
    """How many trials the sweep runs, both stages with ``tune`` (see the module
    docstring for the formula)."""
    return sum(stage_counts(spec).values())


def derived_description(spec: SweepSpec) -> str:
    """``"ce, focal and dsc on my_ner (ner), tiny-bert, 1 seed (3 trials)"``; a
    two-stage sweep counts both stages: ``"... 1 seed (8 trials: 6 in stage 1 + 2 in
    stage 2)"``; seeds until decided name the rule and count at most ``max``: ``"...,
    seeds until decided (looks 3, 5; alpha 0.05; delta_min 1) (at most 10 trials)"``."""
    losses = list(dict.fromkeys(entry.name for entry in spec.search_space.losses))
    datasets = ", ".join(dataset_label(dataset) for dataset in spec.task.dataset)
    kind = f" ({spec.task.kind})" if spec.task.kind else ""
    seeds, trials, stages = len(spec.seed_list), trial_count(spec), stage_counts(spec)
    counts = counted(trials, "trial")
    if "tune" in stages:
        counts += f": {stages['tune']} in stage 1 + {stages['final']} in stage 2"
    seeded = counted(seeds, "seed")
    if spec.seeds_until is not None:
        rule = spec.seeds_until.describe().removeprefix("until decided: ")
        seeded, counts = f"seeds until decided ({rule})", f"at most {counts}"
    return f"{_listed(losses)} on {datasets}{kind}, {spec.model}, {seeded} ({counts})"


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def check_text(data: Any, path: str = "") -> None:
    """Refuse text that is not valid Unicode anywhere in ``data`` (keys included): a
    lone surrogate such as ``"\\ud800"``, which JSON may carry but no UTF-8 store, log
    or response can hold, or a NUL, which PostgreSQL cannot. The message names the
    field, never the text.

    Raises:
        SpecError: one issue per such string.
    """
    issues = list(_bad_text(data, path))
    if issues:
        raise SpecError(issues)


def _bad_text(data: Any, path: str) -> Iterator[SpecIssue]:
    rule = (
        "text must be valid Unicode without NUL: a lone surrogate (e.g. \\ud800) or "
        "\\u0000 cannot be stored"
    )
    if isinstance(data, str):
        if not _encodable(data):
            yield SpecIssue(path, rule)
    elif isinstance(data, Mapping):
        for key, value in data.items():
            name = str(key) if _encodable(str(key)) else ascii(key)
            child = f"{path}.{name}" if path else name
            if name != str(key):
                yield SpecIssue(child, rule)
            yield from _bad_text(value, child)
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            yield from _bad_text(value, f"{path}[{index}]")


def _encodable(text: str) -> bool:
    """Whether every store can hold ``text``: UTF-8 encodable, and no NUL (PostgreSQL's
    text and jsonb refuse it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text
