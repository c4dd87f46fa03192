"""What routes depend on, as named ``Annotated`` aliases: the injected services, a
store session per request, the authenticated owner and the owner's sweep of the path.

Everything comes from the ``Services`` that ``create_app`` puts on ``app.state``; no
module holds a global.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.api.auth import Caller, OwnerCache, request_owner
from sweep_service.api.grid import PngRenderer
from sweep_service.api.hardening import FailureLimit
from sweep_service.api.metrics import ApiMetrics
from sweep_service.runner import Runner
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep, get_sweep


@dataclass(frozen=True)
class Services:
    """The side effects an app is built with (see ``create_app``)."""

    settings: ServiceSettings
    session_factory: Callable[[], Session]
    runner: Runner
    tracking: MlflowClient
    metrics: ApiMetrics
    owners: OwnerCache
    failures: FailureLimit
    png: PngRenderer


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_settings(services: ServicesDep) -> ServiceSettings:
    return services.settings


def get_runner(services: ServicesDep) -> Runner:
    return services.runner


def get_tracking(services: ServicesDep) -> MlflowClient:
    return services.tracking


def get_metrics(services: ServicesDep) -> ApiMetrics:
    return services.metrics


async def get_session(services: ServicesDep) -> AsyncIterator[Session]:
    """One store session per request, closed after the response. Opened and closed on
    the event loop (it connects only when first used, by a route on the thread pool):
    a request must never wait for a thread while holding a connection, or under load
    the threads wait for connections and the connections for threads. For the same
    reason the dependencies and routes end their transaction once they have read."""
    with services.session_factory() as session:
        yield session


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
RunnerDep = Annotated[Runner, Depends(get_runner)]
TrackingDep = Annotated[MlflowClient, Depends(get_tracking)]
MetricsDep = Annotated[ApiMetrics, Depends(get_metrics)]
SessionDep = Annotated[Session, Depends(get_session)]


def get_owner(request: Request, session: SessionDep, services: ServicesDep) -> Caller:
    """The authenticated owner (see ``auth``); raises what ``request_owner`` raises."""
    owner = request_owner(request, session, services.settings, services.owners, services.failures)
    # End the read transaction before the route waits on MLflow or Ray.
    session.commit()
    return owner


OwnerDep = Annotated[Caller, Depends(get_owner)]


def get_owned_sweep(sweep_id: str, session: SessionDep, owner: OwnerDep) -> Sweep:
    """The owner's sweep ``sweep_id`` of the path.

    Raises:
        NotFoundError: no such sweep, or another owner's (404 alike).
    """
    sweep = get_sweep(session, owner.id, sweep_id)
    session.commit()  # as in ``get_owner``
    return sweep


SweepDep = Annotated[Sweep, Depends(get_owned_sweep)]
