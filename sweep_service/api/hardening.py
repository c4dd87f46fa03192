"""What every answer carries and what repeated failures cost: security headers, the
sign-in form's origin check, and a per-client limit on wrong API keys.

The headers: ``nosniff``, no framing, no referrer to other sites, ``Cache-Control:
no-store`` on everything but the static assets (answers hold an owner's sweeps and
the sign-in form's cookie), and a Content Security Policy: the pages load their own
script and style only (the progress bars' widths are inline ``style`` attributes);
the offline Swagger UI and ReDoc pages run FastAPI's inline bootstrap and styles.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sweep_service.api.errors import error_response

log = logging.getLogger(__name__)

PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "style-src-attr 'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
STATIC_PREFIX = "/assets/"


class HttpMiddleware(ABC):
    """An ASGI middleware over ``app`` that acts on HTTP requests (``handle``) and passes
    every other scope (the lifespan's) through as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.handle(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @abstractmethod
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer, or pass on to ``self.app``, one HTTP request."""


class SecurityHeaders(HttpMiddleware):
    """Adds the headers above to every answer; no library sets them (Starlette has no
    middleware for security headers)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
                headers["X-Frame-Options"] = "DENY"
                headers["Referrer-Policy"] = "same-origin"
                policy = DOCS_POLICY if path in DOCS_PATHS else PAGE_POLICY
                headers["Content-Security-Policy"] = policy
                if not path.startswith(STATIC_PREFIX):
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


class InternalErrors(HttpMiddleware):
    """Answers an exception no handler took with the one error body (500
    ``internal_error``, the exception logged, nothing of it quoted) inside the other
    middleware, so the answer still carries the security headers and is counted; no
    library does (Starlette's own 500, even with a handler for ``Exception``, is
    answered outside every middleware)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception:
            if started:  # too late for another answer: the server closes the connection
                raise
            log.exception("%s %s failed", scope["method"], scope["path"])
            detail = "the service failed to answer this request; it has been logged"
            await error_response("internal_error", detail)(scope, receive, send)


def same_origin(request: Request) -> bool:
    """Whether a form post comes from a page of this service: its ``Origin`` (else its
    ``Referer``) names this host. A post with neither (a script, curl) passes: a
    browser sends one, and the check is against other sites' pages signing a browser
    in to an account of theirs."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return True
    host = request.headers.get("host", "")
    return urlsplit(sent).netloc.lower() == host.lower()


class FailureLimit:
    """At most ``limit`` failed key checks per client (its address) in ``window_s``
    seconds; more are refused without checking, until the window has passed. Thread-safe;
    forgets the oldest clients past ``max_clients``."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._max_clients = max_clients
        self._clock = clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> float | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        with self._lock:
            recent = self._recent(client)
            if len(recent) < self._limit:
                return None
            return max(0.0, recent[0] + self._window_s - self._clock())

    def failed(self, client: str) -> None:
        with self._lock:
            if client not in self._failures and len(self._failures) >= self._max_clients:
                self._failures.pop(next(iter(self._failures)))
            self._failures[client] = [*self._recent(client), self._clock()]

    def _recent(self, client: str) -> list[float]:
        since = self._clock() - self._window_s
        return [t for t in self._failures.get(client, []) if t > since]


def client_of(request: Request) -> str:
    """The client's address (the proxy's forwarded one when the proxy is trusted)."""
    return request.client.host if request.client else "unknown"
