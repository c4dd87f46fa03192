"""``create_app``: the FastAPI application, built from what it is given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from anyio import to_thread
from fastapi import FastAPI
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.api.auth import OwnerCache
from sweep_service.api.deps import Services
from sweep_service.api.errors import install_error_handlers
from sweep_service.api.grid import PngRenderer
from sweep_service.api.hardening import FailureLimit, InternalErrors, SecurityHeaders
from sweep_service.api.limits import BodySizeLimit
from sweep_service.api.main import ROUTERS, route_templates
from sweep_service.api.methods import RouteMethods
from sweep_service.api.metrics import ApiMetrics, MetricsMiddleware
from sweep_service.runner import Runner
from sweep_service.settings import ServiceSettings
from sweep_service.web.docs import mount_assets
from sweep_service.web.pages import SignInRequired, to_sign_in

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
        # Sync handlers run on AnyIO's thread pool (40 threads by default); the API's
        # one concurrency setting caps it (docs/benchmarks.md shows why).
        to_thread.current_default_thread_limiter().total_tokens = settings.api_threads
        yield

    app = FastAPI(
        title="dicesweep",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served offline by sweep_service.web.docs
        redoc_url=None,
        # No redirect from a path with a trailing slash: Starlette builds its Location
        # from the Host header, which the client names. The routers join this one.
        redirect_slashes=False,
    )
    metrics = ApiMetrics()
    app.state.services = Services(
        settings=settings,
        session_factory=session_factory,
        runner=runner,
        tracking=tracking or MlflowClient(tracking_uri=str(settings.mlflow_tracking_uri)),
        metrics=metrics,
        owners=OwnerCache(settings.auth_cache_s),
        failures=FailureLimit(settings.sign_in_failures, settings.sign_in_window_s),
        png=PngRenderer(),
    )
    install_error_handlers(app)
    app.add_exception_handler(SignInRequired, to_sign_in)
    # The last added runs first: metrics see every answer, 413s and 500s included.
    app.add_middleware(RouteMethods, routes=app.router.routes)  # the list routers join
    app.add_middleware(InternalErrors)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics, templates=route_templates())
    app.add_middleware(SecurityHeaders)
    for prefix, router in ROUTERS:
        app.include_router(router, prefix=prefix)
    mount_assets(app)
    return app
