"""The request-size limit: bodies over the configured number of bytes get 413.

A declared ``Content-Length`` over the limit is refused before the app runs; a body
without one (chunked) is counted as it streams in and refused once it passes the
limit, so nothing over the limit is ever held in memory whole.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sweep_service.api.errors import ApiError, error_response
from sweep_service.api.hardening import HttpMiddleware


def too_large(max_bytes: int) -> ApiError:
    """The refusal of a body over ``max_bytes`` bytes."""
    return ApiError("request_too_large", f"the request body exceeds the limit of {max_bytes} bytes")


class BodySizeLimit(HttpMiddleware):
    """Refuses HTTP request bodies over ``max_bytes`` bytes with 413; no library does
    (neither Starlette nor uvicorn caps a body's size)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _declared_length(scope) > self.max_bytes:
            refusal = too_large(self.max_bytes)
            await error_response(refusal.code, refusal.body)(scope, receive, send)
            return
        received = 0

        async def receive_counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Raised inside FastAPI's body reading, which lets HTTP exceptions
                    # through to the app's handlers.
                    raise too_large(self.max_bytes)
            return message

        await self.app(scope, receive_counted, send)


def _declared_length(scope: Scope) -> int:
    """The request's ``Content-Length`` in bytes; 0 when absent or not a number."""
    value = Headers(scope=scope).get("content-length", "")
    return int(value) if value.isdigit() else 0
