"""What routes depend on, as named ``Annotated`` aliases: the injected services, a
store session per request, the authenticated owner and the owner's sweep of the path.

Everything comes from the ``Services`` that ``create_app`` puts on ``app.state``; no
module holds a global. FastAPI runs each plain ``def`` dependency in its thread pool,
one trip each: those that only look something up are ``async def`` (no trip), and
``ReadSweepDep`` does a read-only route's whole store work in one trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.api.auth import OwnerCache, remembered_owner, request_owner
from sweep_service.api.metrics import ApiMetrics
from sweep_service.api.submissions import SubmissionWriter
from sweep_service.runner import Runner
from sweep_service.settings import ServiceSettings
from sweep_service.store import Owner, StatementReader, Sweep, get_sweep

T = TypeVar("T")


@dataclass(frozen=True)
class Services:
    """The side effects an app is built with (see ``create_app``)."""

    settings: ServiceSettings
    session_factory: Callable[[], Session]
    runner: Runner
    tracking: MlflowClient
    metrics: ApiMetrics
    owners: OwnerCache
    submissions: SubmissionWriter
    reader: StatementReader  # for reads of one statement
    # Whether short store reads run on the event loop: on SQLite they take tens of
    # microseconds and never wait for a writer (WAL), less than a trip to a thread.
    inline_reads: bool = False


def services_of(request: Request) -> Services:
    """The services of the app ``request`` came to."""
    services: Services = request.app.state.services
    return services


async def get_services(request: Request) -> Services:
    return services_of(request)


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_settings(services: ServicesDep) -> ServiceSettings:
    return services.settings


async def get_runner(services: ServicesDep) -> Runner:
    return services.runner


async def get_tracking(services: ServicesDep) -> MlflowClient:
    return services.tracking


async def get_metrics(services: ServicesDep) -> ApiMetrics:
    return services.metrics


def get_session(services: ServicesDep) -> Iterator[Session]:
    """One store session per request, closed after the response."""
    with services.session_factory() as session:
        yield session


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
RunnerDep = Annotated[Runner, Depends(get_runner)]
TrackingDep = Annotated[MlflowClient, Depends(get_tracking)]
MetricsDep = Annotated[ApiMetrics, Depends(get_metrics)]
SessionDep = Annotated[Session, Depends(get_session)]


def get_owner(request: Request, session: SessionDep, services: ServicesDep) -> Owner:
    """The authenticated owner (see ``auth``); raises what ``request_owner`` raises."""
    owner = request_owner(request, session, services.settings, services.owners)
    # End the read transaction: on SQLite every transaction holds the database's one
    # write lock, which must not stay taken while a route waits on MLflow or Ray.
    session.commit()
    return owner


OwnerDep = Annotated[Owner, Depends(get_owner)]


def get_owned_sweep(sweep_id: str, session: SessionDep, owner: OwnerDep) -> Sweep:
    """The owner's sweep ``sweep_id`` of the path.

    Raises:
        NotFoundError: no such sweep, or another owner's (404 alike).
    """
    sweep = get_sweep(session, owner.id, sweep_id)
    session.commit()  # as in ``get_owner``: release SQLite's write lock
    return sweep


SweepDep = Annotated[Sweep, Depends(get_owned_sweep)]


async def as_owner(
    request: Request,
    services: Services,
    work: Callable[[Session, Owner], T],
    *,
    read_only: bool,
) -> T:
    """``work(session, owner)`` for the owner ``request`` acts for, in a store session
    of its own, closed before this returns: on the event loop for reads where they
    are that cheap (``Services.inline_reads``), else in one trip to the thread pool
    (writes wait for the store's write lock and for the disk).

    Raises:
        what ``request_owner`` and ``work`` raise.
    """

    def run() -> T:
        with services.session_factory() as session:
            owner = request_owner(request, session, services.settings, services.owners)
            return work(session, owner)

    return await (store_read(services, run) if read_only else run_in_threadpool(run))


async def current_owner(request: Request, services: Services) -> Owner:
    """The owner ``request`` acts for (see ``as_owner``); no store work at all when
    the key's owner is remembered.

    Raises:
        what ``request_owner`` raises.
    """
    owner = remembered_owner(request, services.owners)
    if owner is not None:
        return owner
    return await as_owner(request, services, lambda _, owner: owner, read_only=True)


async def store_read(services: Services, read: Callable[[], T]) -> T:
    """``read()``: on the event loop where store reads are that cheap
    (``Services.inline_reads``), else in a trip to the thread pool."""
    return read() if services.inline_reads else await run_in_threadpool(read)


async def read_owned_sweep(request: Request, sweep_id: str, services: ServicesDep) -> Sweep:
    """The owner's sweep ``sweep_id`` of the path, for routes that only read it.

    Raises:
        what ``request_owner`` raises; NotFoundError: no such sweep, or another owner's.
    """
    return await as_owner(
        request, services, lambda session, owner: get_sweep(session, owner.id, sweep_id),
        read_only=True,
    )  # fmt: skip


ReadSweepDep = Annotated[Sweep, Depends(read_owned_sweep)]
