"""An owner's sweeps, newest first, one page at a time.

Pages are keyset pages: the opaque token names the last sweep of the page before
(its creation time and id), so sweeps submitted while a client pages through shift
nothing, and a page costs the same however deep it is.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from sweep_service.store.errors import InvalidArgumentError
from sweep_service.store.models import Sweep

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100  # a larger limit is served as this many


@dataclass(frozen=True)
class SweepPage:
    """One page of an owner's sweeps."""

    items: list[Sweep]
    total: int  # the owner's sweeps in all, not only on this page
    next_page_token: str | None  # None on the last page


def list_sweeps(
    session: Session,
    owner_id: int,
    *,
    limit: int = DEFAULT_PAGE_SIZE,
    page_token: str | None = None,
) -> SweepPage:
    """The page of owner ``owner_id``'s sweeps after ``page_token`` (from the start
    without one), newest first, at most ``min(limit, MAX_PAGE_SIZE)`` long.

    Raises:
        InvalidArgumentError: ``limit`` below 1, or a token no earlier page gave.
    """
    if limit < 1:
        raise InvalidArgumentError(f"limit must be at least 1, got {limit}")
    limit = min(limit, MAX_PAGE_SIZE)
    query = select(Sweep).where(Sweep.owner_id == owner_id)
    if page_token is not None:
        created_at, sweep_id = decode_page_token(page_token)
        query = query.where(
            or_(
                Sweep.created_at < created_at,
                and_(Sweep.created_at == created_at, Sweep.id < sweep_id),
            )
        )
    # One row more than the page tells whether another page follows.
    query = query.order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(limit + 1)
    rows = list(session.scalars(query))
    items = rows[:limit]
    count = select(func.count()).select_from(Sweep).where(Sweep.owner_id == owner_id)
    return SweepPage(
        items=items,
        total=session.scalar(count) or 0,
        next_page_token=encode_page_token(items[-1]) if len(rows) > limit else None,
    )


def encode_page_token(last: Sweep) -> str:
    """The token of the page that follows ``last`` (URL-safe base64 of JSON)."""
    raw = json.dumps([last.created_at.isoformat(), last.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> tuple[datetime, str]:
    """The creation time and id of the sweep ``token`` follows.

    Raises:
        InvalidArgumentError: ``token`` is not one ``encode_page_token`` made.
    """
    refused = InvalidArgumentError("page_token: not a token from an earlier page")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        created, sweep_id = json.loads(raw)
        # In UTC, as stored: a time at the edge of the calendar (year 1 at +14:00)
        # overflows here rather than in the store's driver.
        parsed = datetime.fromisoformat(created)
        if parsed.tzinfo is None:
            raise refused
        created_at = parsed.astimezone(UTC)
    except (ValueError, TypeError, OverflowError) as error:
        raise refused from error
    if not isinstance(sweep_id, str) or "\x00" in sweep_id:  # PostgreSQL refuses a NUL
        raise refused
    return created_at, sweep_id
