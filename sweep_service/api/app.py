"""``create_app``: the FastAPI application, built from what it is given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sweep_service.api.auth import OwnerCache
from sweep_service.api.deps import Services
from sweep_service.api.errors import install_error_handlers
from sweep_service.api.limits import BodySizeLimit
from sweep_service.api.main import ROUTERS, route_templates
from sweep_service.api.metrics import ApiMetrics, MetricsMiddleware
from sweep_service.api.submissions import SubmissionWriter
from sweep_service.runner import Runner
from sweep_service.settings import ServiceSettings
from sweep_service.store import StatementReader

DESCRIPTION = """Loss-function ablation sweeps ("Dice Loss for Data-imbalanced NLP Tasks")
run as Ray Tune studies and tracked in MLflow.

Send an API key as `Authorization: Bearer <key>` or `X-API-Key: <key>`; a service on a
loopback address with no keys created needs none. Errors read
`{"detail": ..., "code": ...}`; quotas answer 429."""


def create_app(
    settings: ServiceSettings,
    *,
    session_factory: Callable[[], Session],
    runner: Runner,
    tracking: MlflowClient | None = None,
) -> FastAPI:
    """The API over the store sessions of ``session_factory``, stopping jobs through
    ``runner`` and reading trials from ``tracking`` (default: a client of
    ``settings.mlflow_tracking_uri``). Nothing is started or connected here; the
    store must already be migrated (``sweep_service.store.upgrade``)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Plain ``def`` routes and dependencies run on this many threads. Their work
        # holds the GIL but for short store reads: a few threads keep both cores busy,
        # while dozens only queue on the GIL and multiply each request's CPU time.
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = settings.api_threads
        try:
            yield
        finally:
            services.submissions.close()
            services.reader.close()

    app = FastAPI(title="dicesweep", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    metrics = ApiMetrics()
    bind = _engine_of(session_factory)
    services = app.state.services = Services(
        settings=settings,
        session_factory=session_factory,
        runner=runner,
        tracking=tracking or MlflowClient(tracking_uri=str(settings.mlflow_tracking_uri)),
        metrics=metrics,
        owners=OwnerCache(settings.auth_cache_s),
        submissions=SubmissionWriter(session_factory),
        reader=StatementReader(bind),
        inline_reads=bind.dialect.name == "sqlite",
    )
    install_error_handlers(app)
    # The last added runs first: metrics see every answer, 413s included.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics, templates=route_templates())
    for prefix, router in ROUTERS:
        app.include_router(router, prefix=prefix)
    return app


def _engine_of(session_factory: Callable[[], Session]) -> Engine:
    """The engine ``session_factory``'s sessions are bound to."""
    with session_factory() as session:
        bind = session.get_bind()
    if not isinstance(bind, Engine):
        raise TypeError("create_app needs sessions bound to an Engine")
    return bind
