"""The store's one root exception and its kinds, each with a stable ``code``.

The HTTP layer maps a code to a status in one table; the intended statuses are
``not_found`` 404, ``conflict`` 409, ``idempotency_mismatch`` 422,
``invalid_transition`` 409, ``resubmission_limit`` 409, ``quota_exceeded`` 429,
``authentication_failed`` 401 and ``invalid_argument`` 400.
"""

from __future__ import annotations

from typing import ClassVar


class StoreError(Exception):
    """Any refusal by the store; ``code`` names the kind, the message says why."""

    code: ClassVar[str] = "store_error"


class NotFoundError(StoreError):
    """No such row, or one the caller may not see (another owner's sweep reads as absent)."""

    code = "not_found"


class ConflictError(StoreError):
    """A unique rule refused the write (a taken name, key or id); nothing was written."""

    code = "conflict"


class IdempotencyMismatchError(ConflictError):
    """An ``Idempotency-Key`` already used by this owner, with a different spec."""

    code = "idempotency_mismatch"


class InvalidTransitionError(ConflictError):
    """A status change the sweep lifecycle does not allow (finished sweeps never change)."""

    code = "invalid_transition"


class ResubmissionLimitError(InvalidTransitionError):
    """The sweep's driver has already been resubmitted as often as allowed."""

    code = "resubmission_limit"


class QuotaExceededError(StoreError):
    """The owner's quota (concurrent sweeps, trials per sweep, GPUs per trial) is used up."""

    code = "quota_exceeded"


class AuthenticationError(StoreError):
    """A presented API key that is malformed, unknown, wrong or revoked (never says which)."""

    code = "authentication_failed"


class InvalidArgumentError(StoreError):
    """An argument the store cannot use, such as a page token it did not issue."""

    code = "invalid_argument"
