"""Who is asking: the owner of the presented API key, or the built-in local owner.

A key comes as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; the sweep pages'
sign-in form keeps it in the ``dicesweep_key`` cookie, which counts for reads only
(GET and HEAD), so another site cannot make a browser submit or cancel. Without one,
a service bound to a loopback address whose store has never had an API key acts for
the owner ``local`` (created on first use); anywhere else a key is required
(docs/service.md, "Auth and quotas"). Every refusal is a 401 with
``WWW-Authenticate: Bearer``.

Who a key (or no key) acts for is remembered for ``DICESWEEP_AUTH_CACHE_S`` seconds
(``OwnerCache``), as plain data (``Caller``: the owner's id and name), never a store
object: a revoked key, or the first key created, takes effect within that time.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.orm import Session

from sweep_service.api.errors import ApiError
from sweep_service.api.hardening import FailureLimit, client_of
from sweep_service.settings import ServiceSettings
from sweep_service.store import (
    ApiKey,
    AuthenticationError,
    ConflictError,
    NotFoundError,
    Owner,
    api_keys_exist,
    authenticate,
    create_owner,
    get_owner_by_name,
)

LOCAL_OWNER = "local"
KEY_COOKIE = "dicesweep_key"
_COOKIE_METHODS = frozenset({"GET", "HEAD"})
_KEY_REQUIRED = "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"


def presented_key(request: Request) -> str | None:
    """The API key of ``request``, or None when it presents none.

    Raises:
        ApiError: an ``Authorization`` header that is not ``Bearer <key>``.
    """
    # Not FastAPI's HTTPBearer: its scheme in the OpenAPI document asks 401 or 403 of
    # every wrong key (the per-client limit answers 429), and with auto_error=False it
    # passes over a malformed header, which is refused here.
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise ApiError("authentication_failed", "Authorization must read 'Bearer <API key>'")
        return credentials.strip()
    key = request.headers.get("x-api-key")
    if not key and request.method in _COOKIE_METHODS:
        key = request.cookies.get(KEY_COOKIE)
    return key or None


@dataclass(frozen=True)
class Caller:
    """The owner a request acts for: plain data, valid whatever happens to the store
    session that read it."""

    id: int
    name: str

    @classmethod
    def of(cls, owner: Owner) -> Caller:
        return cls(id=owner.id, name=owner.name)


class OwnerCache:
    """Callers by the SHA-256 of the key presented (or of none), each for ``ttl_s``
    seconds; refusals are never remembered. Thread-safe; at most ``max_entries``
    (all dropped at once when full: keys are few, polling clients many)."""

    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._entries: dict[bytes, tuple[float, Caller]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _slot(key: str | None) -> bytes:
        return hashlib.sha256(b"\0" if key is None else key.encode()).digest()

    def get(self, key: str | None) -> Caller | None:
        if self._ttl_s <= 0:
            return None
        entry = self._entries.get(self._slot(key))
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: str | None, owner: Caller) -> None:
        if self._ttl_s <= 0:
            return
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[self._slot(key)] = (time.monotonic() + self._ttl_s, owner)


def request_owner(
    request: Request,
    session: Session,
    settings: ServiceSettings,
    cache: OwnerCache | None = None,
    failures: FailureLimit | None = None,
) -> Caller:
    """The owner ``request`` acts for (from ``cache`` when it remembers the key).

    Raises:
        AuthenticationError: a wrong, unknown or revoked key.
        ApiError: no key where one is required, or a malformed ``Authorization``;
            ``too_many_failures`` when this client sent too many wrong keys lately.
    """
    key = presented_key(request)
    if cache is not None and (owner := cache.get(key)) is not None:
        return owner
    if key is not None:
        owner = Caller.of(checked_key(session, key, client_of(request), failures).owner)
    elif settings.loopback and not api_keys_exist(session):
        owner = Caller.of(local_owner(session))
    else:
        raise ApiError("authentication_failed", _KEY_REQUIRED)
    if cache is not None:
        cache.put(key, owner)
    return owner


def checked_key(session: Session, key: str, client: str, failures: FailureLimit | None) -> ApiKey:
    """The stored key ``key`` is. A right key is always accepted: a client held off
    (behind a shared address) is never locked out of its own account; a wrong one from
    a client that sent too many lately is refused as such.

    Raises:
        AuthenticationError: a wrong, unknown or revoked key (counted against ``client``).
        ApiError: ``too_many_failures``, with the seconds to wait, for a wrong key from a
            client held off.
    """
    try:
        return authenticate(session, key)
    except AuthenticationError:
        if failures is None:
            raise
        wait = failures.retry_after(client)
        if wait is None:
            failures.failed(client)
            raise
        raise ApiError(
            "too_many_failures",
            f"too many wrong API keys from this client; retry in {math.ceil(wait)} s",
        ) from None


def local_owner(session: Session) -> Owner:
    """The owner ``local``, created with the default quotas on first use."""
    try:
        return get_owner_by_name(session, LOCAL_OWNER)
    except NotFoundError:
        pass
    try:
        return create_owner(session, LOCAL_OWNER)
    except ConflictError:  # a concurrent first request created it
        return get_owner_by_name(session, LOCAL_OWNER)
