"""``/healthz`` (no key needed) and ``/metrics`` (Prometheus, for the operator's owners),
outside ``/v1``."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from sweep_service.api.auth import LOCAL_OWNER
from sweep_service.api.deps import MetricsDep, OwnerDep, SessionDep, SettingsDep
from sweep_service.api.errors import COMMON_ERRORS, ApiError, documented
from sweep_service.api.schemas import HealthPublic

router = APIRouter(tags=["operations"])


@router.get("/healthz", responses=documented({503: "the store does not answer"}))
def healthz(session: SessionDep) -> HealthPublic:
    """Whether the service and its store answer (a trivial query)."""
    try:
        session.execute(text("SELECT 1"))
        session.commit()  # no connection held while the answer waits for a thread
    except SQLAlchemyError as error:
        raise ApiError("store_unavailable", "the store does not answer") from error
    return HealthPublic(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses=documented(
        {
            **{code: COMMON_ERRORS[code] for code in (401, 429, 503)},
            403: "an owner DICESWEEP_METRICS_OWNERS does not name",
        }
    ),
)
def metrics(owner: OwnerDep, collected: MetricsDep, settings: SettingsDep) -> Response:
    """Request counts and latencies by route template and status, sweeps submitted: every
    owner's together, so only for the owners ``metrics_owners`` names (and ``local``)."""
    if owner.name != LOCAL_OWNER and owner.name not in settings.metrics_owners:
        raise ApiError(
            "forbidden", "GET /metrics answers only the owners DICESWEEP_METRICS_OWNERS names"
        )
    return Response(collected.render(), media_type=CONTENT_TYPE_LATEST)
