"""``/v1/grid``: several sweeps' finished trials merged into one table, e.g. Table 10
run as one sweep per data set, or Table 8 on MRPC and on QQP."""

from __future__ import annotations

from typing import Annotated

import pandas as pd
from fastapi import APIRouter, Query, Response
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from search_spaces.reports.budget import stage_one_is_random
from sweep_service.api.auth import Caller
from sweep_service.api.deps import OwnerDep, ServicesDep, SessionDep, TrackingDep
from sweep_service.api.errors import COMMON_ERRORS, ApiError, documented
from sweep_service.api.grid import (
    MAX_MERGED_SWEEPS,
    GridQuery,
    GridQueryDep,
    grid_response,
    table_responses,
)
from sweep_service.api.trials import sweep_trials
from sweep_service.store import get_sweep

router = APIRouter(prefix="/grid", tags=["sweeps"], responses=documented(COMMON_ERRORS))

IdsQuery = Annotated[
    list[str],
    Query(description="sweep ids: repeat ids=, or one comma-separated value", min_length=1),
]


@router.get(
    "",
    response_class=Response,
    responses=table_responses(
        {
            404: "an id that is no sweep of the caller's (named)",
            409: "none of the sweeps has a finished trial yet",
            422: f"more than {MAX_MERGED_SWEEPS} ids; an unknown rows, cols, metric",
        }
    ),
)
async def read_merged_grid(
    ids: IdsQuery,
    session: SessionDep,
    owner: OwnerDep,
    tracking: TrackingDep,
    services: ServicesDep,
    query: GridQueryDep,
) -> Response:
    """One table over the finished trials of every sweep in ``ids`` (each the
    caller's), in the paper's layout unless ``rows``/``cols`` are given; the rows
    carry a ``sweep`` column, so ``rows=sweep`` compares the sweeps themselves;
    ``paper=1``: the paper's Δ beside ours."""
    # Async: a PNG is awaited from the API's one renderer without holding a request
    # thread; the store and MLflow are read on the thread pool.
    table = await run_in_threadpool(merged_table, ids, session, owner, tracking, query)
    return await grid_response(table, query.fmt, services.png, str(owner.id))


def merged_table(
    ids: list[str],
    session: Session,
    owner: Caller,
    tracking: MlflowClient,
    query: GridQuery,
) -> pd.DataFrame:
    """The merged table of the caller's sweeps ``ids`` (``read_merged_grid``).

    Raises:
        ApiError: ``invalid_request`` for no ids or too many; what ``grid_of`` raises.
        NotFoundError: an id that is no sweep of the caller's.
    """
    wanted = list(dict.fromkeys(p.strip() for value in ids for p in value.split(",") if p.strip()))
    if not wanted or len(wanted) > MAX_MERGED_SWEEPS:
        message = f"give 1 to {MAX_MERGED_SWEEPS} sweep ids; got {len(wanted)}"
        raise ApiError(
            "invalid_request", [{"loc": ["query", "ids"], "msg": message, "type": "value_error"}]
        )
    sweeps = [get_sweep(session, owner.id, sweep_id) for sweep_id in wanted]
    session.commit()  # the store is not held while MLflow is read
    frames = [sweep_trials(tracking, sweep).assign(sweep=sweep.id) for sweep in sweeps]
    trials = pd.concat(frames, ignore_index=True)
    subject = "sweeps " + ", ".join(repr(sweep.id) for sweep in sweeps)
    title = " + ".join(dict.fromkeys(sweep.name for sweep in sweeps))
    random_sampling = all(stage_one_is_random(sweep.resolved_spec) for sweep in sweeps)
    return query.table(trials, subject, title, random_sampling)
