"""What the API reads and answers: ``SweepCreate`` in, ``SweepPublic`` and friends out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, RootModel

from search_spaces.presets import preset_names
from search_spaces.spec import SweepSpec
from sweep_service.store import Sweep, SweepStatus

ParamValue = bool | int | float | str


def submission_schema() -> dict[str, Any]:
    """``SweepSpec``'s JSON schema as a submission reads: a spec merged over the preset
    it ``extends``, so no field of a merged mapping is required (a list, a loss entry
    among them, replaces the preset's whole and keeps its required fields). Its
    definitions are written in place, so the schema stands alone in the OpenAPI
    document."""
    schema = SweepSpec.model_json_schema()
    definitions = schema.pop("$defs")

    def inline(node: Any, merged: bool) -> Any:
        if isinstance(node, list):
            return [inline(item, False) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = definitions[node["$ref"].rsplit("/", 1)[-1]]
            return inline({**target, **{k: v for k, v in node.items() if k != "$ref"}}, merged)
        out = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {name: inline(field, merged) for name, field in value.items()}
            elif key == "required" and merged:
                continue
            else:
                out[key] = inline(value, False)
        return out

    submission: dict[str, Any] = inline(schema, True)
    submission["title"] = "SweepCreate"
    submission["properties"]["extends"] = {
        "type": "string",
        "enum": preset_names(),
        "description": "the preset this spec is merged over (GET /v1/search-spaces)",
    }
    # Without a preset to merge over, the spec must be whole.
    submission["anyOf"] = [{"required": ["extends"]}, {"required": schema["required"]}]
    return submission


SUBMISSION = submission_schema()


class SweepCreate(RootModel[dict[str, Any]]):
    """A sweep spec: the same shape as a YAML spec file, e.g. ``{"extends": "smoke"}``,
    its fields merged over the preset it ``extends``. The schema describes each field
    and its bounds; the rules across fields (a grid's size, a metric the task reports,
    data sets and models that exist) are checked by
    ``search_spaces.resolve.resolve_spec`` and the submission checks, each refusal a
    422 naming the field."""

    model_config = ConfigDict(json_schema_extra=lambda schema, _: schema.update(SUBMISSION))


class SweepLinks(BaseModel):
    """Where to look next. The MLflow links (http(s), into the MLflow UI at
    ``DICESWEEP_MLFLOW_UI_URL``) are absent until the sweep's driver has created its
    parent run; ``page`` is the service's own page of the sweep."""

    sweep: str
    page: str
    trials: str
    grid: str
    cancel: str
    log: str  # the driver's log (text), whose reason the sweep's message gives
    mlflow_experiment: str | None = None
    mlflow_run: str | None = None
    # The sweep's runs in MLflow's chart view, the trials' charts before the parents'
    mlflow_charts: str | None = None


class SweepPublic(BaseModel):
    """A sweep as an owner sees it."""

    id: str
    name: str
    status: SweepStatus
    preset: str | None
    trial_count: int
    gpus_per_trial: float
    message: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    links: SweepLinks

    @classmethod
    def of(cls, sweep: Sweep, links: SweepLinks, **extra: Any) -> Self:
        """The view of ``sweep``; ``extra`` fills the fields a subclass adds."""
        stored = {name: getattr(sweep, name) for name in _STORED_FIELDS}
        return cls(**stored, links=links, **extra)


_STORED_FIELDS = tuple(name for name in SweepPublic.model_fields if name != "links")


class SweepsPublic(BaseModel):
    """One page of an owner's sweeps, newest first; ``count`` is all of them."""

    data: list[SweepPublic]
    count: int
    next_page_token: str | None


class TrialCounts(BaseModel):
    """Trials by state, from their MLflow runs: ``done`` FINISHED, ``failed`` FAILED,
    ``stopped`` KILLED (stopped by a cancel), ``running`` RUNNING; ``pending`` the rest
    of the sweep's trial count (not started, or not tracked yet). The pages count the
    same way (``trials.trial_counts``)."""

    pending: int
    running: int
    done: int
    failed: int
    stopped: int = 0


class BestTrial(BaseModel):
    """The trial with the highest ``eval_f1`` so far."""

    run_id: str
    loss: str  # the loss label, e.g. "dsc(alpha=0.1)"
    seed: int
    dataset: str
    variant: str
    eval_f1: float  # in percent, as the trials report it


class TuningPublic(BaseModel):
    """A two-stage sweep's tuning: the stage that runs (``tune``: stage 1, each loss's
    settings tried on the tuning split; ``final``: every seed at each loss's chosen
    settings, trained on the whole training file, reported on dev) and, once stage 2
    has started, each loss's chosen settings by its label: ``{"ce": {"learning_rate":
    3e-05}}``; ``constant`` names the losses whose every stage-1 trial was constant
    (one prediction for ≥ 99% of the tuning split), chosen at the best of them."""

    stage: Literal["tune", "final"]
    chosen: dict[str, dict[str, float | int]]
    constant: list[str] = Field(default_factory=list)


class SweepDetail(SweepPublic):
    """A sweep with its trials' progress and best trial so far, as read from MLflow
    at ``trials_as_of`` (None: not read yet); ``tuning`` for a sweep with ``tune``
    (None otherwise, and before its first trial). The best trial is a stage-2 one."""

    trials: TrialCounts
    best_trial: BestTrial | None
    tuning: TuningPublic | None = None
    trials_as_of: datetime | None


class TrialPublic(BaseModel):
    """One trial: its MLflow run, loss, data, seed, loss parameters and metrics."""

    run_id: str
    status: str  # the MLflow run status: RUNNING, FINISHED, FAILED, KILLED
    loss: str
    loss_name: str
    dataset: str
    variant: str
    seed: int
    # A two-stage sweep's: "tune" (stage 1, scored on the tuning split) or "final".
    stage: Literal["tune", "final"] = "final"
    tuned: dict[str, float] = {}  # with tune: the settings it trained at, {"learning_rate": 3e-05}
    params: dict[str, ParamValue]  # the loss's parameters, e.g. {"alpha": 0.1}
    metrics: dict[str, float]  # the latest value of each, e.g. {"eval_f1": 84.2}
    # What its number came from (search_spaces.setup), e.g. {"formulation": "mrc", ...}.
    setup: dict[str, str] = {}
    failure_reason: str | None = None  # FAILED, or RUNNING a retry: e.g. "diverged at step 12 ..."
    # Its latest dev predictions are constant, it learned nothing: e.g. "predicts
    # positive for 99.3% of pairs" (search_spaces.flags.degenerate_reason); never the best.
    degenerate_reason: str | None = None
    # Not constant, but at or under the no-skill rule: "eval_f1 46.07 ≤ no-skill 48.04"
    # (search_spaces.flags.below_no_skill_reason); in the tables' statistics, marked.
    below_no_skill_reason: str | None = None
    # FINISHED only: why it stopped: epochs, max_steps, early_stopping or scheduler
    stop_reason: str | None = None
    # A scheduler's stop: the rung it reached, named by its evaluations (halving's at
    # 1, 3, 9, ...): the trial ran that many evaluations and was stopped there.
    stop_rung: int | None = None
    mlflow_run: str | None = None  # the run in the MLflow UI (DICESWEEP_MLFLOW_UI_URL)


class TrialsPublic(BaseModel):
    """One page of a sweep's trials, ordered by loss, data set, variant, seed, run id."""

    data: list[TrialPublic]
    count: int
    next_page_token: str | None


class SearchSpacePublic(BaseModel):
    """A preset: its name, what it runs and how many trials that is."""

    name: str
    description: str
    trial_count: int


class SearchSpacesPublic(BaseModel):
    """Every preset, by name."""

    data: list[SearchSpacePublic]
    count: int


class SearchSpaceDetail(SearchSpacePublic):
    """A preset with its whole resolved spec (its ``extends`` applied)."""

    spec: dict[str, Any] = Field(description="the resolved sweep spec")


class HealthPublic(BaseModel):
    """The service answers and its store does too."""

    status: Literal["ok"]
