"""The pages: ``/`` (the owner's sweeps), ``/sweeps/{id}`` (one sweep, live), the
sign-in form, and the live parts their script re-renders (``.../live``).

Each page asks for its owner as the API does (``get_owner``); where a key is needed
and none came, it sends the browser to the sign-in form instead of answering 401.
The key given there is checked, then kept in an HTTP-only, same-site cookie that
the API accepts for reads (``auth.KEY_COOKIE``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import pandas as pd
from fastapi import APIRouter, Depends, Form, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from search_spaces.reports.budget import stage_one_is_random
from sweep_service.api.auth import KEY_COOKIE, Caller, checked_key
from sweep_service.api.deps import ServicesDep, SessionDep, get_owner
from sweep_service.api.errors import ApiError
from sweep_service.api.hardening import client_of, same_origin
from sweep_service.api.trials import experiment_base, mlflow_links, sweep_trials
from sweep_service.store import (
    AuthenticationError,
    NotFoundError,
    Sweep,
    get_sweep,
    list_sweeps,
)
from sweep_service.web.views import Progress, grid_html, pending_lines, spec_yaml, trial_lines

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).with_name("templates"))
SWEEPS_SHOWN = 100  # the newest sweeps on the list page
COOKIE_MAX_AGE_S = 30 * 24 * 3600
Html = HTMLResponse


class SignInRequired(Exception):
    """A page was asked for without the key its service requires."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def page_owner(request: Request, session: SessionDep, services: ServicesDep) -> Caller:
    """The owner, as for the API (``get_owner``).

    Raises:
        SignInRequired: no key, or a wrong or revoked one, where a key is required.
    """
    try:
        return get_owner(request, session, services)
    except (ApiError, AuthenticationError) as error:
        if getattr(error, "code", None) != "authentication_failed":
            raise
        raise SignInRequired(request.url.path) from error


PageOwner = Annotated[Caller, Depends(page_owner)]


def to_sign_in(request: Request, error: Exception) -> Response:
    """``SignInRequired``'s answer: the sign-in form, back to the page afterwards."""
    path = error.path if isinstance(error, SignInRequired) else "/"
    target = "/login?" + urlencode({"next": path})
    return RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)


@router.get("/", response_class=Html)
def sweeps_page(request: Request, session: SessionDep, owner: PageOwner) -> Response:
    """The owner's newest sweeps: name, status, progress, best so far, submitted."""
    return _render(request, "sweeps.html", _sweeps(session, owner))


@router.get("/live/sweeps", response_class=Html)
def sweeps_live(request: Request, session: SessionDep, owner: PageOwner) -> Response:
    """The list page's table, re-rendered by its script."""
    return _render(request, "_sweeps.html", _sweeps(session, owner))


def _sweeps(session: Any, owner: Caller) -> dict[str, Any]:
    sweeps = list_sweeps(session, owner.id, limit=SWEEPS_SHOWN).items
    session.commit()
    return {
        "owner": owner,
        "sweeps": [(sweep, Progress.of(sweep)) for sweep in sweeps],
        "final": all(sweep.shows_final_trials for sweep in sweeps),
    }


@router.get("/sweeps/{sweep_id}", response_class=Html)
def sweep_page(
    request: Request, sweep_id: str, session: SessionDep, owner: PageOwner, services: ServicesDep
) -> Response:
    """One sweep: status, progress, running trials, its table and plot, its spec and
    the links into the MLflow UI; re-rendered while it runs."""
    return _sweep_response(request, "sweep.html", sweep_id, session, owner, services)


@router.get("/sweeps/{sweep_id}/live", response_class=Html)
def sweep_live(
    request: Request, sweep_id: str, session: SessionDep, owner: PageOwner, services: ServicesDep
) -> Response:
    """The sweep page's live part, re-rendered by its script."""
    return _sweep_response(request, "_sweep.html", sweep_id, session, owner, services)


def _sweep_response(
    request: Request,
    template: str,
    sweep_id: str,
    session: Any,
    owner: Caller,
    services: Any,
) -> Response:
    try:
        sweep = get_sweep(session, owner.id, sweep_id)
    except NotFoundError:
        context = {"owner": owner, "sweep_id": sweep_id}
        return _render(request, "missing.html", context, status.HTTP_404_NOT_FOUND)
    session.commit()  # the store is not held while MLflow is read
    return _render(request, template, {"owner": owner, **sweep_context(sweep, services)})


def sweep_context(sweep: Sweep, services: Any) -> dict[str, Any]:
    """What the sweep page shows. MLflow not answering is shown, not raised: the
    store's view of the sweep is still worth a page."""
    metric = str(sweep.resolved_spec.get("search", {}).get("metric", "eval_f1"))
    mlflow = mlflow_links(services.settings.mlflow_ui, sweep)
    experiment = experiment_base(services.settings.mlflow_ui, sweep)
    tracking_problem = None
    try:
        rows = sweep_trials(services.tracking, sweep)
    except ApiError as error:
        rows, tracking_problem = pd.DataFrame(columns=["status"]), str(error.body)
    grid = grid_html(rows, metric, sweep.name, stage_one_is_random(sweep.resolved_spec))
    trials = trial_lines(rows, metric, experiment)
    return {
        "sweep": sweep,
        "progress": Progress.from_rows(rows, sweep.trial_count),
        "metric": metric,
        "trials": trials + pending_lines(sweep, trials),
        "grid": grid,
        "plot_url": f"/v1/sweeps/{sweep.id}/grid?format=png&metric={metric}" if grid else None,
        "experiment_url": mlflow.experiment,
        "parent_url": mlflow.run,
        "charts_url": mlflow.charts,
        "spec": spec_yaml(sweep),
        "tracking_problem": tracking_problem,
        "final": sweep.shows_final_trials,
    }


@router.get("/login", response_class=Html)
def sign_in_form(request: Request, then: Annotated[str, Query(alias="next")] = "/") -> Response:
    """The sign-in form: an API key (``dicesweep keys create --owner NAME``)."""
    return _render(request, "login.html", {"next": _local(then), "error": None})


@router.post("/login", response_class=Html)
def sign_in(
    request: Request,
    session: SessionDep,
    services: ServicesDep,
    key: Annotated[str, Form(max_length=200)],
    then: Annotated[str, Form(alias="next", max_length=2000)] = "/",
) -> Response:
    """Check the key; keep it in the cookie and go on to ``next`` (a path here). A post
    from another site's page is refused (it would sign the browser in to its key), and
    a wrong key from a client that sent too many lately is held off (429)."""
    if not same_origin(request):
        context = {"next": "/", "error": "Sign in from this service's own page."}
        return _render(request, "login.html", context, status.HTTP_403_FORBIDDEN)
    try:
        checked_key(session, key.strip(), client_of(request), services.failures)
    except AuthenticationError:
        context = {"next": _local(then), "error": "That key is wrong or revoked."}
        return _render(request, "login.html", context, status.HTTP_401_UNAUTHORIZED)
    except ApiError as refused:  # too many wrong keys
        context = {"next": _local(then), "error": str(refused.body)}
        return _render(request, "login.html", context, status.HTTP_429_TOO_MANY_REQUESTS)
    response = RedirectResponse(_local(then), status_code=status.HTTP_303_SEE_OTHER)
    response.set_cookie(
        KEY_COOKIE,
        key.strip(),
        max_age=COOKIE_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=_secure(request, services.settings.public_url),
    )
    return response


def _secure(request: Request, public_url: str | None) -> bool:
    """Whether the cookie is ``Secure``: the browser came over https, as the request
    (a trusted proxy's ``X-Forwarded-Proto`` counted) or the public URL says."""
    return request.url.scheme == "https" or (public_url or "").startswith("https://")


@router.post("/logout")
def sign_out() -> Response:
    """Forget the key the sign-in form kept."""
    response = RedirectResponse("/login", status_code=status.HTTP_303_SEE_OTHER)
    response.delete_cookie(KEY_COOKIE)
    return response


def _local(path: str) -> str:
    """``path`` when it is a path on this service, else ``/``: the form never sends a
    browser to another site."""
    return path if path.startswith("/") and not path.startswith("//") else "/"


def _render(
    request: Request, template: str, context: dict[str, Any], code: int = status.HTTP_200_OK
) -> Response:
    signed_in = KEY_COOKIE in request.cookies
    return templates.TemplateResponse(
        request, template, {**context, "signed_in": signed_in}, status_code=code
    )
