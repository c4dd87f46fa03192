"""API keys: issued once in plain text, kept only as a hash, checked on every request.

A key reads ``ds_<prefix>_<secret>``: ``prefix`` is 12 hex characters, stored in the
clear to find the key's row and to tell keys apart in listings; ``secret`` is 32
random bytes (URL-safe base64). The row keeps the SHA-256 of the whole key.

Why SHA-256 and not a password hash (scrypt, PBKDF2, argon2): a slow, salted hash
protects low-entropy secrets that people choose, by making each guess expensive.
A 256-bit random secret cannot be guessed at any hashing speed, so a fast hash loses
nothing if the table leaks, while a slow one would cost its delay on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.orm import Session, joinedload

from sweep_service.store.database import committing
from sweep_service.store.errors import AuthenticationError, NotFoundError
from sweep_service.store.models import ApiKey, Owner, utc_now

KEY_SCHEME = "ds"
PREFIX_BYTES = 6  # 12 hex characters
SECRET_BYTES = 32  # 256 bits from the OS's CSPRNG
_KEY_PATTERN = re.compile(r"ds_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
# How fresh ``last_used_at`` is kept: it answers "is this key still used?", not "when
# exactly", and a finer one would make every request a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
_REFUSED = "invalid API key"  # one message for every refusal: never say which check failed


@dataclass(frozen=True)
class IssuedKey:
    """A new key's row and the plain key, which exists only here and is shown once."""

    api_key: ApiKey
    plain_key: str


def hash_key(plain_key: str) -> str:
    """The hex SHA-256 of ``plain_key`` (see the module docstring for why SHA-256)."""
    return hashlib.sha256(plain_key.encode()).hexdigest()


def create_api_key(session: Session, owner_id: int, *, now: datetime | None = None) -> IssuedKey:
    """A new key for owner ``owner_id``, committed; only its hash is stored.

    Raises:
        NotFoundError: no owner has that id.
        ConflictError: the random prefix is taken (about one chance in 2**48 per key
            already issued); nothing was written, and asking again succeeds.
    """
    if session.get(Owner, owner_id) is None:
        raise NotFoundError(f"no owner with id {owner_id}")
    prefix = secrets.token_hex(PREFIX_BYTES)
    plain_key = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    api_key = ApiKey(
        owner_id=owner_id,
        prefix=prefix,
        secret_hash=hash_key(plain_key),
        created_at=now or utc_now(),
    )
    with committing(session, conflict=f"an API key with prefix {prefix} exists; create another"):
        session.add(api_key)
    return IssuedKey(api_key, plain_key)


def authenticate(session: Session, plain_key: str, *, now: datetime | None = None) -> ApiKey:
    """The live key ``plain_key`` (its ``owner`` loaded). Its ``last_used_at`` is set to
    ``now`` and committed when the stored one is older than ``LAST_USED_RESOLUTION``,
    so that a client polling many times a second costs reads, not a write each. The
    hash is compared in constant time.

    Raises:
        AuthenticationError: a malformed, unknown, wrong or revoked key, all alike.
    """
    match = _KEY_PATTERN.fullmatch(plain_key)
    if match is None:
        raise AuthenticationError(_REFUSED)
    query = select(ApiKey).options(joinedload(ApiKey.owner)).where(ApiKey.prefix == match[1])
    api_key = session.scalars(query).one_or_none()
    if api_key is None or not hmac.compare_digest(api_key.secret_hash, hash_key(plain_key)):
        raise AuthenticationError(_REFUSED)
    if api_key.revoked_at is not None:
        raise AuthenticationError(_REFUSED)
    now = now or utc_now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_RESOLUTION:
        with committing(session):
            api_key.last_used_at = now
    return api_key


def revoke_api_key(session: Session, prefix: str, *, now: datetime | None = None) -> ApiKey:
    """Revoke the key with ``prefix``, committed; a revoked key keeps its first
    ``revoked_at``, so revoking twice is harmless.

    Raises:
        NotFoundError: no key has that prefix.
    """
    api_key = session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).one_or_none()
    if api_key is None:
        raise NotFoundError(f"no API key with prefix {prefix!r}")
    if api_key.revoked_at is None:
        with committing(session):
            api_key.revoked_at = now or utc_now()
    return api_key


def list_api_keys(session: Session, owner_id: int | None = None) -> list[ApiKey]:
    """Owner ``owner_id``'s keys, or every owner's when it is None, revoked ones
    included, oldest first, each with its ``owner`` loaded."""
    query = select(ApiKey).options(joinedload(ApiKey.owner)).order_by(ApiKey.id)
    if owner_id is not None:
        query = query.where(ApiKey.owner_id == owner_id)
    return list(session.scalars(query))


def api_keys_exist(session: Session) -> bool:
    """Whether any key was ever created; the service may run without auth only on a
    loopback address with none (docs/service.md), and revoking keys does not undo that."""
    return bool(session.scalar(select(exists().select_from(ApiKey))))
