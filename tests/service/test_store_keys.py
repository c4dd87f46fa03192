"""Owners and API keys: unique names, hashed keys, authentication, revocation."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store import (
    ApiKey,
    AuthenticationError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    Owner,
    api_keys_exist,
    authenticate,
    create_api_key,
    create_owner,
    get_owner_by_name,
    list_api_keys,
    revoke_api_key,
)

T0 = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)


def test_an_owner_gets_default_quotas(session: Session) -> None:
    owner = create_owner(session, "erin")
    assert get_owner_by_name(session, "erin") is owner
    assert owner.max_concurrent_sweeps >= 1
    assert owner.max_trials_per_sweep >= 1
    assert owner.max_gpus_per_trial >= 0


def test_a_taken_owner_name_is_a_conflict_and_the_session_lives_on(
    session: Session, alice: Owner
) -> None:
    with pytest.raises(ConflictError, match="alice") as caught:
        create_owner(session, "alice")
    assert caught.value.code == "conflict"
    assert session.scalars(select(Owner.name)).all() == ["alice"]
    assert create_owner(session, "alicia").id != alice.id


@pytest.mark.parametrize("name", ["", "n" * 101])
def test_empty_or_overlong_owner_names_are_invalid(session: Session, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="name"):
        create_owner(session, name)


@pytest.mark.parametrize(
    "quotas",
    [{"max_concurrent_sweeps": -1}, {"max_trials_per_sweep": -5}, {"max_gpus_per_trial": -0.5}],
)
def test_negative_quotas_are_refused(session: Session, quotas: dict[str, int | float]) -> None:
    with pytest.raises(InvalidArgumentError, match="negative"):
        create_owner(session, "frank", **quotas)


def test_an_unknown_owner_name_is_not_found(session: Session) -> None:
    with pytest.raises(NotFoundError) as caught:
        get_owner_by_name(session, "nobody")
    assert caught.value.code == "not_found"


def test_only_the_hash_of_a_key_is_stored(session: Session, alice: Owner) -> None:
    issued = create_api_key(session, alice.id)
    scheme, prefix, secret = issued.plain_key.split("_", 2)
    assert (scheme, prefix) == ("ds", issued.api_key.prefix)
    assert len(secret) == 43
    row = session.execute(text("SELECT * FROM api_keys")).mappings().one()
    assert row["secret_hash"] == hashlib.sha256(issued.plain_key.encode()).hexdigest()
    stored = " ".join(str(value) for value in row.values())
    assert secret not in stored
    assert issued.plain_key not in stored


def test_the_right_key_authenticates_and_is_marked_used(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    with session_factory() as session:
        issued = create_api_key(session, alice.id, now=T0)
        assert issued.api_key.last_used_at is None
    with session_factory() as session:
        api_key = authenticate(session, issued.plain_key, now=T0 + timedelta(minutes=5))
        assert api_key.owner.name == "alice"
    with session_factory() as session:
        stored = session.get(ApiKey, issued.api_key.id)
        assert stored is not None
        assert stored.last_used_at == T0 + timedelta(minutes=5)


def test_last_used_is_written_at_most_once_a_minute(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    with session_factory() as session:
        issued = create_api_key(session, alice.id, now=T0)
    for seconds in (0, 30, 59):  # polling: reads only, the first use is kept
        with session_factory() as session:
            authenticate(session, issued.plain_key, now=T0 + timedelta(seconds=seconds))
    with session_factory() as session:
        assert session.get(ApiKey, issued.api_key.id).last_used_at == T0  # type: ignore[union-attr]
    with session_factory() as session:
        authenticate(session, issued.plain_key, now=T0 + timedelta(seconds=61))
    with session_factory() as session:
        stored = session.get(ApiKey, issued.api_key.id)
        assert stored is not None
        assert stored.last_used_at == T0 + timedelta(seconds=61)


def _malformed(plain_key: str) -> list[str]:
    prefix = plain_key.split("_")[1]
    return [
        "",
        "ds_",
        f"Bearer {plain_key}",
        plain_key + "x",
        plain_key[:-1],
        plain_key.replace(prefix, "g" * len(prefix)),
        plain_key.replace("ds_", "sk_", 1),
        plain_key + "\n",
    ]


def test_wrong_unknown_and_malformed_keys_are_refused_alike(session: Session, alice: Owner) -> None:
    plain_key = create_api_key(session, alice.id).plain_key
    last = "A" if plain_key[-1] != "A" else "B"
    wrong_secret = plain_key[:-1] + last
    unknown_prefix = "ds_000000000000_" + plain_key.split("_", 2)[2]
    for presented in [wrong_secret, unknown_prefix, *_malformed(plain_key)]:
        with pytest.raises(AuthenticationError) as caught:
            authenticate(session, presented)
        assert caught.value.code == "authentication_failed"
        assert str(caught.value) == "invalid API key"


def test_a_revoked_key_is_refused(session: Session, alice: Owner) -> None:
    issued = create_api_key(session, alice.id)
    other = create_api_key(session, alice.id)
    revoked = revoke_api_key(session, issued.api_key.prefix, now=T0)
    assert revoked.revoked_at == T0
    with pytest.raises(AuthenticationError):
        authenticate(session, issued.plain_key)
    assert authenticate(session, other.plain_key).id == other.api_key.id


def test_revoking_twice_keeps_the_first_time(session: Session, alice: Owner) -> None:
    prefix = create_api_key(session, alice.id).api_key.prefix
    revoke_api_key(session, prefix, now=T0)
    again = revoke_api_key(session, prefix, now=T0 + timedelta(days=1))
    assert again.revoked_at == T0


def test_revoking_an_unknown_key_is_not_found(session: Session) -> None:
    with pytest.raises(NotFoundError):
        revoke_api_key(session, "ffffffffffff")


def test_a_key_for_an_unknown_owner_is_not_found(session: Session) -> None:
    with pytest.raises(NotFoundError):
        create_api_key(session, 424242)
    assert not api_keys_exist(session)


def test_keys_are_listed_per_owner_and_their_existence_is_known(
    session: Session, alice: Owner, bob: Owner
) -> None:
    assert not api_keys_exist(session)
    first = create_api_key(session, alice.id).api_key
    second = create_api_key(session, alice.id).api_key
    create_api_key(session, bob.id)
    assert [key.id for key in list_api_keys(session, alice.id)] == [first.id, second.id]
    revoke_api_key(session, first.prefix)
    revoke_api_key(session, second.prefix)
    assert api_keys_exist(session)
