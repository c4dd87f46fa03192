"""Prometheus metrics of one app: requests by route template and status, latencies,
and sweeps submitted. Each app has its own registry, so two apps in one process (as
in tests) never share counts."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sweep_service.api.hardening import HttpMiddleware

UNMATCHED_ROUTE = "unmatched"  # one label for every unknown path: bounded cardinality


class ApiMetrics:
    """The app's collectors and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "dicesweep_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "dicesweep_http_request_duration_seconds",
            "Time to answer an HTTP request, in seconds, by method and route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.sweeps_submitted = Counter(
            "dicesweep_sweeps_submitted",
            "Sweeps stored by POST /v1/sweeps (idempotent retries not counted).",
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency in seconds."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every collector."""
        return generate_latest(self.registry)


class MetricsMiddleware(HttpMiddleware):
    """Times every HTTP request and counts it under its route template
    (``/v1/sweeps/{sweep_id}``, never the concrete path); ``templates`` maps each
    endpoint function to its template; no library here does (``prometheus_client``
    collects and serves metrics, it does not instrument an app)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics, templates: Mapping[Any, str]) -> None:
        super().__init__(app)
        self.metrics = metrics
        self.templates = templates

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500  # what the server answers if the app raises before responding

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            # The router records the matched endpoint in the scope it was given.
            route = self.templates.get(scope.get("endpoint"), UNMATCHED_ROUTE)
            elapsed = time.perf_counter() - started
            self.metrics.observe(scope["method"], route, status, elapsed)
