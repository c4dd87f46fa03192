"""Who is asking: the owner of the presented API key, or the built-in local owner.

A key comes as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Without one,
a service bound to a loopback address whose store has never had an API key acts for
the owner ``local`` (created on first use); anywhere else a key is required
(docs/DESIGN.md). Every refusal is a 401 with ``WWW-Authenticate: Bearer``.
"""

from __future__ import annotations

from fastapi import Request
from sqlalchemy.orm import Session

from sweep_service.api.errors import ApiError
from sweep_service.settings import ServiceSettings
from sweep_service.store import (
    ConflictError,
    NotFoundError,
    Owner,
    api_keys_exist,
    authenticate,
    create_owner,
    get_owner_by_name,
)

LOCAL_OWNER = "local"
_KEY_REQUIRED = "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"


def presented_key(request: Request) -> str | None:
    """The API key of ``request``, or None when it presents none.

    Raises:
        ApiError: an ``Authorization`` header that is not ``Bearer <key>``.
    """
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise ApiError("authentication_failed", "Authorization must read 'Bearer <API key>'")
        return credentials.strip()
    return request.headers.get("x-api-key") or None


def request_owner(request: Request, session: Session, settings: ServiceSettings) -> Owner:
    """The owner ``request`` acts for.

    Raises:
        AuthenticationError: a wrong, unknown or revoked key.
        ApiError: no key where one is required, or a malformed ``Authorization``.
    """
    key = presented_key(request)
    if key is not None:
        return authenticate(session, key).owner
    if settings.loopback and not api_keys_exist(session):
        return local_owner(session)
    raise ApiError("authentication_failed", _KEY_REQUIRED)


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
