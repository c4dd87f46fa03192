"""The service's store: owners, hashed API keys and sweeps, in SQLite or PostgreSQL.

``upgrade(url)`` migrates the schema; ``create_engine_for(url)`` and
``create_session_factory(engine)`` give sessions; the functions below take a
``Session``, and those that write commit (or roll back and raise a ``StoreError``,
whose ``code`` the HTTP layer maps to a status).
"""

from sweep_service.store.database import (
    committing,
    create_engine_for,
    create_session_factory,
    normalise_url,
)
from sweep_service.store.errors import (
    AuthenticationError,
    ConflictError,
    IdempotencyMismatchError,
    InvalidArgumentError,
    InvalidTransitionError,
    NotFoundError,
    QuotaExceededError,
    ResubmissionLimitError,
    StoreError,
)
from sweep_service.store.keys import (
    IssuedKey,
    api_keys_exist,
    authenticate,
    create_api_key,
    list_api_keys,
    revoke_api_key,
)
from sweep_service.store.lifecycle import (
    TrialProgress,
    list_unsynced_finished_sweeps,
    record_progress,
    record_resubmission,
    transition_sweep,
)
from sweep_service.store.migrate import upgrade
from sweep_service.store.models import ApiKey, Owner, Sweep, SweepStatus, utc_now
from sweep_service.store.owners import (
    QUOTAS,
    check_owner_name,
    create_owner,
    get_owner_by_name,
    set_quotas,
)
from sweep_service.store.pages import SweepPage, list_sweeps
from sweep_service.store.sweeps import (
    Submission,
    SweepDraft,
    count_active_sweeps,
    create_sweep,
    get_sweep,
    list_active_sweeps,
)

__all__ = [
    "QUOTAS",
    "ApiKey",
    "AuthenticationError",
    "ConflictError",
    "IdempotencyMismatchError",
    "InvalidArgumentError",
    "InvalidTransitionError",
    "IssuedKey",
    "NotFoundError",
    "Owner",
    "QuotaExceededError",
    "ResubmissionLimitError",
    "StoreError",
    "Submission",
    "Sweep",
    "SweepDraft",
    "SweepPage",
    "SweepStatus",
    "TrialProgress",
    "api_keys_exist",
    "authenticate",
    "check_owner_name",
    "committing",
    "count_active_sweeps",
    "create_api_key",
    "create_engine_for",
    "create_owner",
    "create_session_factory",
    "create_sweep",
    "get_owner_by_name",
    "get_sweep",
    "list_active_sweeps",
    "list_api_keys",
    "list_sweeps",
    "list_unsynced_finished_sweeps",
    "normalise_url",
    "record_progress",
    "record_resubmission",
    "revoke_api_key",
    "set_quotas",
    "transition_sweep",
    "upgrade",
    "utc_now",
]
