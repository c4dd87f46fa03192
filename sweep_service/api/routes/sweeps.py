"""``/v1/sweeps``: submit, list, inspect and cancel sweeps; their trials and tables."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response, status
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from search_spaces.reports.budget import stage_one_is_random
from search_spaces.resolve import list_presets
from sweep_service.api.deps import (
    MetricsDep,
    OwnerDep,
    RunnerDep,
    ServicesDep,
    SessionDep,
    SettingsDep,
    SweepDep,
    TrackingDep,
)
from sweep_service.api.errors import COMMON_ERRORS, ApiError, documented
from sweep_service.api.grid import GridQueryDep, grid_response, table_responses
from sweep_service.api.operations import cancel_sweep, validate_submission
from sweep_service.api.routes import API_PREFIX
from sweep_service.api.schemas import (
    SweepCreate,
    SweepDetail,
    SweepLinks,
    SweepPublic,
    SweepsPublic,
    TrialsPublic,
)
from sweep_service.api.trials import (
    MlflowLinks,
    best_trial,
    experiment_base,
    mlflow_links,
    sweep_trials,
    trial_counts,
    trial_page,
)
from sweep_service.runner import job_id
from sweep_service.store import Sweep, list_sweeps
from sweep_service.store import create_sweep as store_sweep
from sweep_service.store.models import IDEMPOTENCY_KEY_LENGTH
from sweep_service.store.pages import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

router = APIRouter(prefix="/sweeps", tags=["sweeps"], responses=documented(COMMON_ERRORS))
NOT_FOUND = {404: "no such sweep, or another owner's"}

# One example request per preset in the OpenAPI page: each runs as it stands.
PRESET_EXAMPLES: dict[str, Any] = {
    preset.name: {"summary": preset.description, "value": {"extends": preset.name}}
    for preset in list_presets()
}
SpecBody = Annotated[SweepCreate, Body(openapi_examples=PRESET_EXAMPLES)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=IDEMPOTENCY_KEY_LENGTH,
        description="a retry with the same key and body returns the first sweep (200)",
    ),
]
LimitQuery = Annotated[
    int,
    Query(ge=1, description=f"page size; more than {MAX_PAGE_SIZE} is served as {MAX_PAGE_SIZE}"),
]
TokenQuery = Annotated[str | None, Query(description="next_page_token of the page before")]


def sweep_links(sweep: Sweep, mlflow: MlflowLinks | None = None) -> SweepLinks:
    """The API's links for ``sweep``, and the MLflow UI's when known."""
    mlflow = mlflow or MlflowLinks()
    base = f"{API_PREFIX}{router.prefix}/{sweep.id}"
    return SweepLinks(
        sweep=base,
        page=f"/sweeps/{sweep.id}",
        trials=f"{base}/trials",
        grid=f"{base}/grid",
        cancel=f"{base}/cancel",
        log=f"{base}/log",
        mlflow_experiment=mlflow.experiment,
        mlflow_run=mlflow.run,
        mlflow_charts=mlflow.charts,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": SweepPublic, "description": "a retry: the sweep of the first request"},
        **documented(
            {
                413: "a body over DICESWEEP_MAX_REQUEST_BYTES, or a resolved spec over "
                "DICESWEEP_MAX_SPEC_BYTES",
                422: "an invalid spec (each field and rule; an unknown preset in extends "
                "among them), or a reused Idempotency-Key",
                429: "a quota (trials per sweep, GPUs per trial, concurrent sweeps)",
            }
        ),
    },
)
def create_sweep(
    spec: SpecBody,
    owner: OwnerDep,
    session: SessionDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    runner: RunnerDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> SweepPublic:
    """Store a sweep as ``pending``; the service submits it to the cluster afterwards."""
    draft = validate_submission(settings, spec.root, owner.name, runner)
    sweep, created = store_sweep(session, owner.id, draft, idempotency_key=idempotency_key)
    if created:
        metrics.sweeps_submitted.inc()
    else:
        response.status_code = status.HTTP_200_OK
    return SweepPublic.of(sweep, sweep_links(sweep))


@router.get("")
def read_sweeps(
    session: SessionDep,
    owner: OwnerDep,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    page_token: TokenQuery = None,
) -> SweepsPublic:
    """The owner's sweeps, newest first, one page at a time."""
    page = list_sweeps(session, owner.id, limit=limit, page_token=page_token)
    # Read: end the transaction. FastAPI checks a sync route's answer on the thread pool,
    # and a request waiting there for a thread must not hold a store connection
    # (``deps.get_session``).
    session.commit()
    data = [SweepPublic.of(sweep, sweep_links(sweep)) for sweep in page.items]
    return SweepsPublic(data=data, count=page.total, next_page_token=page.next_page_token)


@router.get("/{sweep_id}", responses=documented(NOT_FOUND))
def read_sweep(sweep: SweepDep, settings: SettingsDep) -> SweepDetail:
    """A sweep with its trials by state and its best trial so far, as the service last
    read them from MLflow (``trials_as_of``; every few seconds while it runs)."""
    return SweepDetail.of(
        sweep,
        sweep_links(sweep, mlflow_links(settings.mlflow_ui, sweep)),
        trials=trial_counts(sweep),
        best_trial=best_trial(sweep),
        tuning=sweep.tuning,
        trials_as_of=sweep.trials_synced_at,
    )


@router.get("/{sweep_id}/trials", responses=documented(NOT_FOUND))
def read_trials(
    sweep: SweepDep,
    tracking: TrackingDep,
    settings: SettingsDep,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    page_token: TokenQuery = None,
) -> TrialsPublic:
    """The sweep's trials as MLflow holds them, one page at a time, each with its link
    into the MLflow UI."""
    rows = sweep_trials(tracking, sweep)
    experiment = experiment_base(settings.mlflow_ui, sweep)
    data, next_token = trial_page(rows, min(limit, MAX_PAGE_SIZE), page_token, experiment)
    return TrialsPublic(data=data, count=len(rows), next_page_token=next_token)


@router.get(
    "/{sweep_id}/grid",
    response_class=Response,
    responses=table_responses(
        {
            **NOT_FOUND,
            409: "no finished trials yet",
            422: "an unknown rows, cols or metric (the valid ones are listed)",
        }
    ),
)
async def read_grid(
    sweep: SweepDep, tracking: TrackingDep, services: ServicesDep, query: GridQueryDep
) -> Response:
    """The sweep's table over its finished trials: mean ± std over seeds per cell, the
    delta against ``ce`` with its 95% interval, marked where the Holm-adjusted paired
    test finds it significant, the best per column in bold; the paper's layout unless
    ``rows``/``cols`` are given; ``paper=1``: the paper's Δ beside ours."""
    # Async: a PNG is awaited without holding a request thread (PngRenderer).
    trials = await run_in_threadpool(sweep_trials, tracking, sweep)
    random_sampling = stage_one_is_random(sweep.resolved_spec)
    table = await run_in_threadpool(
        query.table, trials, f"sweep {sweep.id!r}", sweep.name, random_sampling
    )
    return await grid_response(table, query.fmt, services.png, str(sweep.owner_id))


@router.get(
    "/{sweep_id}/log",
    response_class=Response,  # the errors stay JSON in the OpenAPI document
    responses={
        200: {"content": {"text/plain": {}}},
        **documented({**NOT_FOUND, 503: "the cluster did not answer; retry"}),
    },
)
def read_log(sweep: SweepDep, runner: RunnerDep) -> PlainTextResponse:
    """The end of the log of the sweep's current driver job (its last
    ``MAX_LOG_CHARS`` characters): the whole story behind the sweep's one-line
    ``message``, for its owner only; empty before the job started."""
    job = job_id(sweep.id, sweep.resubmissions)
    try:
        text = runner.logs(job)
    except Exception as error:  # the runner's client raises what its transport raises
        detail = f"the cluster did not give job {job}'s log ({type(error).__name__}); retry"
        raise ApiError("runner_unavailable", detail) from error
    return PlainTextResponse(text)


@router.post(
    "/{sweep_id}/cancel",
    responses=documented(
        {
            **NOT_FOUND,
            409: "the sweep has finished",
            503: "the store or the cluster did not answer (the stop request); retry",
        }
    ),
)
def cancel(sweep: SweepDep, session: SessionDep, runner: RunnerDep) -> SweepPublic:
    """Ask the sweep to stop: ``cancelling`` until its job has stopped, or straight to
    ``cancelled`` when it was never submitted."""
    cancelled = cancel_sweep(session, runner, sweep)
    return SweepPublic.of(cancelled, sweep_links(cancelled))
