"""HTTP methods answered from the routes' own table: ``HEAD`` wherever ``GET`` is
served (the same headers, no body), ``OPTIONS`` with the methods a path takes, and a
405's ``Allow`` naming every method of the path, not only those of the first route
that matched it (``GET`` and ``POST /v1/sweeps`` are two routes). No library gives
this: FastAPI's routes answer ``HEAD`` and ``OPTIONS`` with 405, and its 405's ``Allow``
names the first matching route's methods only.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sweep_service.api.hardening import HttpMiddleware

PROBED = ("GET", "POST", "PUT", "PATCH", "DELETE")  # the methods a route may serve


def path_methods(routes: list[BaseRoute], scope: Scope) -> set[str]:
    """The methods the routes serve at ``scope``'s path (``HEAD`` with ``GET``,
    ``OPTIONS`` with any); empty for a path no route serves. Each method is asked of
    the routes as a request would be (an included router tells a full match only)."""
    methods = {
        method
        for method in PROBED
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    }
    if "GET" in methods:
        methods.add("HEAD")
    return methods | {"OPTIONS"} if methods else methods


def allow_header(methods: set[str]) -> str:
    return ", ".join(sorted(methods))


class RouteMethods(HttpMiddleware):
    """ASGI middleware over the app's router (``routes``, read at each request so that
    routes added after it are known)."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        super().__init__(app)
        self.routes = routes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method in ("OPTIONS", "HEAD"):
            methods = path_methods(self.routes, scope)
            if method == "OPTIONS" and methods:
                allow = {"Allow": allow_header(methods)}
                await Response(status_code=204, headers=allow)(scope, receive, send)
                return
            if method == "HEAD" and "GET" in methods:
                await self.app({**scope, "method": "GET"}, receive, _without_body(send))
                return

        async def send_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                allow = allow_header(path_methods(self.routes, scope))
                MutableHeaders(scope=message)["Allow"] = allow
            await send(message)

        await self.app(scope, receive, send_allow)


def _without_body(send: Send) -> Send:
    """``send`` passing a GET's status and headers (its ``Content-Length`` included)
    and none of its body, as a HEAD is answered."""
    ended = False

    async def send_head(message: Message) -> None:
        nonlocal ended
        if message["type"] == "http.response.body":
            if ended:
                return
            ended = True
            message = {**message, "body": b"", "more_body": False}
        await send(message)

    return send_head
