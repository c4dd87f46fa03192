"""The API's one error table: every refusal has a code, every code one HTTP status.

Store errors carry their code (``StoreError.code``); ``ApiError`` carries one of the
codes below; the few outside exceptions the routes let through map to a code in
``CODE_BY_EXCEPTION``. Every error body reads ``{"detail": ..., "code": ...}``:
``detail`` is a message, or for invalid input a list of
``{"loc": [...], "msg": ..., "type": ...}`` naming each field and the rule it breaks.

Quotas answer 429, as the store documents for ``quota_exceeded``: the concurrency
quota frees up as sweeps finish; the per-sweep quotas (trials, GPUs per trial) never
do for the same spec, and the message says which quota and which limits apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from search_spaces.errors import SpecError, SpecIssue
from search_spaces.resolve import UnknownPresetError
from sweep_service.results import SweepNotFoundError
from sweep_service.store import StoreError
from sweep_service.tables import GridQueryError, NoResultsError

STATUS_BY_CODE: Final[dict[str, int]] = {
    # The store's codes (sweep_service.store.errors).
    "not_found": 404,
    "conflict": 409,
    "idempotency_mismatch": 422,  # an Idempotency-Key reused with another body
    "invalid_transition": 409,  # e.g. cancelling a finished sweep
    "resubmission_limit": 409,
    "quota_exceeded": 429,
    "too_many_failures": 429,  # wrong API keys from one client, too many in a window
    "authentication_failed": 401,
    "forbidden": 403,  # a route for the operator's owners only (GET /metrics)
    "invalid_argument": 400,  # e.g. a page token no earlier page gave
    # The API's own.
    "invalid_spec": 422,  # the sweep spec, its data sets or its model path
    "invalid_request": 422,  # a body, query or header of the wrong shape
    "unreadable_body": 400,  # not UTF-8, or JSON nested too deeply to parse
    "unknown_preset": 404,
    "no_results": 409,  # a grid asked of a sweep without finished trials
    "method_not_allowed": 405,
    "request_too_large": 413,
    "spec_too_large": 413,  # a resolved spec over DICESWEEP_MAX_SPEC_BYTES
    "runner_unavailable": 503,  # the cluster did not take a stop request
    "tracking_unavailable": 503,  # MLflow did not answer
    "renderer_busy": 503,  # too many plots waiting to be drawn
    "store_unavailable": 503,
    "internal_error": 500,  # a failure of the service itself, logged
}

CODE_BY_EXCEPTION: Final[tuple[tuple[type[Exception], str], ...]] = (
    (SpecError, "invalid_spec"),
    (UnknownPresetError, "unknown_preset"),
    (SweepNotFoundError, "no_results"),
    (NoResultsError, "no_results"),
    (GridQueryError, "invalid_request"),
)

# Codes for the framework's own refusals (an unknown path or method).
_CODE_BY_FRAMEWORK_STATUS: Final[dict[int, str]] = {404: "not_found", 405: "method_not_allowed"}
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class Issue(BaseModel):
    """One field and the rule it breaks."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error's body: a message, or for invalid input each field and rule."""

    detail: str | list[Issue]
    code: str


# What every /v1 route may answer besides its own: the OpenAPI document lists them.
COMMON_ERRORS: Final[dict[int, str]] = {
    400: "an unreadable body (not UTF-8, nested too deeply) or a page token no page gave",
    401: "no API key, or a wrong or revoked one",
    429: "too many wrong API keys from this client lately (or a quota): retry later",
    422: "a body, query or header of the wrong shape: each field and the rule it breaks",
    503: "the store or MLflow does not answer; retry",
}


def documented(descriptions: Mapping[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error statuses, each with the error body's schema."""
    return {code: {"model": ErrorBody, "description": text} for code, text in descriptions.items()}


class ApiError(StarletteHTTPException):
    """A refusal by the API itself; ``code`` is a key of ``STATUS_BY_CODE``.

    An HTTP exception so that one raised while FastAPI reads a body (the size limit)
    reaches the handlers instead of being turned into a generic 400.

    Raises:
        KeyError: ``code`` is not in ``STATUS_BY_CODE``.
    """

    def __init__(
        self,
        code: str,
        detail: str | list[dict[str, Any]],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        shown = detail if isinstance(detail, str) else None
        super().__init__(STATUS_BY_CODE[code], shown, dict(headers) if headers else None)
        self.code = code
        self.body = detail  # what the error body's ``detail`` holds


def spec_loc(path: str) -> list[str | int]:
    """``"search_space.losses[2].alpha"`` -> ``["body", "search_space", "losses", 2, "alpha"]``."""
    parts: list[str | int] = ["body"]
    for name, index in _PATH_PART.findall(path):
        parts.append(int(index) if index else name)
    return parts


MAX_MESSAGE_CHARS = 1000  # of one issue: a refused value is quoted by a short prefix only
MAX_ISSUES = 20  # reported of one refusal; the rest are counted
MAX_LOC_CHARS = 100  # of one part of a field's location (a key may be any length)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with its length: a rule that quotes a huge
    value whole (a loss name, a list), or a huge unknown key, is never echoed back."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _bounded(message: str) -> str:
    return _cut(message, MAX_MESSAGE_CHARS)


def _bounded_loc(loc: Sequence[Any]) -> list[str | int]:
    """``loc`` with each name cut to ``MAX_LOC_CHARS``: an unknown key is named by it."""
    return [part if isinstance(part, int) else _cut(str(part), MAX_LOC_CHARS) for part in loc]


def _with_count(shown: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """``shown`` (the first issues), then one saying how many more of ``total`` there
    are: an error body stays a few KB however broken the request."""
    if total <= len(shown):
        return shown
    rest = total - len(shown)
    return [*shown, {"loc": ["body"], "msg": f"and {rest} more problems", "type": "more_issues"}]


def issue_details(issues: Sequence[SpecIssue]) -> list[dict[str, Any]]:
    """The first ``MAX_ISSUES`` issues as ``{"loc", "msg", "type"}``, the shape of
    FastAPI's own 422s, and a count of the rest."""
    shown = [
        {"loc": _bounded_loc(spec_loc(i.path)), "msg": _bounded(i.message), "type": "spec_rule"}
        for i in issues[:MAX_ISSUES]
    ]
    return _with_count(shown, len(issues))


def error_response(
    code: str, detail: Any, headers: Mapping[str, str] | None = None, status: int | None = None
) -> JSONResponse:
    """The one error body for ``code``, with the code's status from the table
    (``status`` only for the framework's own refusals outside the table)."""
    headers = dict(headers or {})
    if code == "authentication_failed":
        headers["WWW-Authenticate"] = "Bearer"
    body = {"detail": jsonable_encoder(detail), "code": code}
    return JSONResponse(body, status_code=status or STATUS_BY_CODE[code], headers=headers)


def _code_of(error: Exception) -> str:
    """The table's code for a store error or an outside exception.

    Raises:
        TypeError: an exception the table does not know.
    """
    if isinstance(error, StoreError):
        return error.code
    for kind, code in CODE_BY_EXCEPTION:
        if isinstance(error, kind):
            return code
    raise TypeError(f"no error code for {type(error).__name__}")


async def _handle(request: Request, error: Exception) -> JSONResponse:
    """Every handled refusal, answered from the table."""
    if isinstance(error, SpecError):
        return error_response("invalid_spec", issue_details(error.issues))
    if isinstance(error, OperationalError | InterfaceError):  # the server, not the query
        reason = str(error.orig).strip().splitlines()[0] if error.orig else type(error).__name__
        return error_response("store_unavailable", f"the store does not answer ({reason}); retry")
    if isinstance(error, PoolTimeoutError):
        detail = "every connection to the store is in use (the service is overloaded); retry"
        return error_response("store_unavailable", detail)
    if isinstance(error, ApiError):
        return error_response(error.code, error.body, error.headers)
    if isinstance(error, GridQueryError):  # each query parameter and its rule
        query = [
            Issue(loc=["query", name], msg=msg, type="value_error") for name, msg in error.problems
        ]
        return error_response("invalid_request", query)
    if isinstance(error, RequestValidationError):
        errors = error.errors()
        details = [
            {"loc": _bounded_loc(item["loc"]), "msg": _bounded(item["msg"]), "type": item["type"]}
            for item in errors[:MAX_ISSUES]
        ]
        return error_response("invalid_request", _with_count(details, len(errors)))
    if isinstance(error, StarletteHTTPException) and error.status_code == 400:
        return error_response("unreadable_body", _unreadable(error.__cause__))
    if isinstance(error, StarletteHTTPException):  # the framework's: unknown path, method
        code = _CODE_BY_FRAMEWORK_STATUS.get(error.status_code, "http_error")
        return error_response(code, error.detail, error.headers, status=error.status_code)
    # A lookup error's str() is its repr; its message is the first argument.
    detail = str(error.args[0]) if error.args else str(error)
    return error_response(_code_of(error), detail)


def _unreadable(cause: BaseException | None) -> str:
    """Why FastAPI could not parse a body (it raises a bare 400 from the cause)."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8 text: {cause.reason} at byte {cause.start}"
    if isinstance(cause, RecursionError):
        return "the body's arrays or objects are nested too deeply to parse"
    return "the body could not be parsed as JSON"


def install_error_handlers(app: FastAPI) -> None:
    """Answer every known refusal from the table, in the one error body."""
    kinds = (
        StoreError,
        RequestValidationError,
        StarletteHTTPException,
        OperationalError,
        InterfaceError,
        PoolTimeoutError,
        *dict(CODE_BY_EXCEPTION),
    )
    for kind in kinds:
        app.add_exception_handler(kind, _handle)
