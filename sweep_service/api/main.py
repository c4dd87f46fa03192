"""The API's routers and their prefixes: every resource under ``/v1``; health and metrics
beside; the pages and the offline API docs at the root. ``create_app`` includes each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute

from sweep_service.api.routes import API_PREFIX, grids, health, search_spaces, sweeps
from sweep_service.web import docs, pages

ROUTERS: tuple[tuple[str, APIRouter], ...] = (
    (API_PREFIX, sweeps.router),
    (API_PREFIX, grids.router),
    (API_PREFIX, search_spaces.router),
    ("", health.router),
    ("", pages.router),
    ("", docs.router),
)


def route_templates() -> dict[Callable[..., Any], str]:
    """Each endpoint's path template as served, e.g. ``/v1/sweeps/{sweep_id}``: what
    metrics are labelled with (never the concrete path, whose ids are unbounded). The
    matched route in a request's scope knows its path within its router only."""
    return {
        route.endpoint: prefix + route.path
        for prefix, router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
    }
