"""Accounts and their API tokens: create, (de)activate; issue, revoke and expire tokens.
(Deleting an account is services/account_deletion.py.)

The changes an operator makes (with a command or in the admin) are audited to the account
they touch, with the actor `cli` or `admin` (services/audit.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from services import audit, bearer_tokens
from services.audit import Actor, Operation
from services.exceptions import AccountError
from services.identifiers import account_name
from services.models import Account, AgentToken, ApiToken, BearerToken
from services.storage.transactions import account_transaction


@dataclass(frozen=True)
class IssuedToken:
    """The one place a token's plaintext exists: returned once by `issue_token`."""

    token: BearerToken
    plaintext: str

    def __repr__(self) -> str:
        return f"IssuedToken(prefix={self.token.prefix!r})"


def create_account(*, name: str) -> Account:
    normalized = account_name(name)
    try:
        with transaction.atomic():
            return Account.objects.create(name=normalized)
    except IntegrityError:
        existing = Account.objects.filter(name=normalized).first()
        if existing is not None and existing.deleted_at is not None:
            raise AccountError(
                f"account {normalized!r} exists already: it was deleted on "
                f"{deleted_on(existing)} and its name stays taken by its audit chain"
            ) from None
        raise AccountError(f"account {normalized!r} exists already") from None


def get_account(*, name: str) -> Account:
    account = Account.objects.filter(name=account_name(name)).first()
    if account is None:
        raise AccountError(f"no account named {name!r}")
    return account


def named_or_all(name: str | None) -> list[Account]:
    """The account named `name`, or every account by name when none is named (the audit
    commands' ACCOUNT argument)."""
    return [get_account(name=name)] if name else list(Account.objects.order_by("name"))


def expires_at(expires_in: timedelta | None) -> datetime | None:
    """The moment a token issued now for `expires_in` expires; None for no expiry."""
    if expires_in is None:
        return None
    if expires_in <= timedelta(0):
        raise AccountError("the expiry must be in the future")
    return timezone.now() + expires_in


def create_token(model: type[BearerToken], kind: str, **fields: object) -> IssuedToken:
    """Draw a token of `kind` and store its digest and prefix in a new `model` row."""
    for _ in range(3):
        new = bearer_tokens.generate(kind)
        try:
            with transaction.atomic():
                token = model.objects.create(prefix=new.prefix, digest=new.digest, **fields)
        except IntegrityError:
            continue  # a display-prefix collision (1 in 2^47): draw again
        return IssuedToken(token=token, plaintext=new.plaintext)
    raise AccountError("could not draw a unique token; try again")


def deleted_on(account: Account) -> str:
    return f"{account.deleted_at:%Y-%m-%d %H:%M:%S} UTC"


def refuse_if_deleted(account: Account) -> None:
    """A deleted account gets nothing new: no token, agent, member or value."""
    if account.deleted_at is not None:
        raise AccountError(
            f"account {account.name!r} was deleted on {deleted_on(account)}; "
            "only its audit chain is left"
        )


def refuse_if_deactivated(account: Account) -> None:
    """A deactivated account gets no new token, of either kind: it could not be used."""
    refuse_if_deleted(account)
    if not account.is_active:
        raise AccountError(f"account {account.name!r} is deactivated; reactivate it first")


def issue_token(
    *,
    account: Account,
    name: str = "",
    expires_in: timedelta | None = None,
    staff: str = "",
) -> IssuedToken:
    """Create an account token, audited to the account (actor `cli`, or the staff user); its
    plaintext is in the result and nowhere else. A deactivated account gets none."""
    refuse_if_deactivated(account)
    actor = Actor.command(account.pk, staff=staff)
    with account_transaction(account.pk):
        issued = create_token(
            ApiToken,
            bearer_tokens.ACCOUNT_KIND,
            account=account,
            name=name,
            expires_at=expires_at(expires_in),
        )
        audit.record(actor, Operation.ISSUE_TOKEN, target=issued.token.prefix)
    return issued


def find_token(*, prefix: str) -> BearerToken:
    """The token of this display prefix, or of this whole token (by its digest). An error
    names what was given as far as a display prefix goes (12 characters), never more of it."""
    given = prefix
    model = AgentToken if given.startswith(f"{bearer_tokens.AGENT_KIND}_") else ApiToken
    if bearer_tokens.is_well_formed(given, given.partition("_")[0]):
        found = model.objects.filter(digest=bearer_tokens.digest(given))
    else:
        found = model.objects.filter(prefix=given)
    token = found.select_related("account").first()
    if token is None:
        shown = given[: bearer_tokens.PREFIX_LENGTH]
        kind, _, rest = shown.partition("_")
        if (
            kind in (bearer_tokens.ACCOUNT_KIND, bearer_tokens.AGENT_KIND)
            and len(rest) == bearer_tokens.PREFIX_RANDOM_LENGTH
        ):
            raise AccountError(f"no token with prefix {shown!r}")
        raise AccountError(
            f"no token with prefix {shown!r}: a prefix is cvt_ or cva_ and 8 characters, "
            "as list_tokens and list_agent_tokens show"
        )
    return token


def revoked_at(token: BearerToken) -> str:
    return f"{token.revoked_at:%Y-%m-%d %H:%M:%S} UTC"


def revoke_token(*, prefix: str, staff: str = "") -> BearerToken:
    """Revoke the account token (`cvt_`) or agent token (`cva_`) with this display prefix, or
    this whole token; effective on its next request. Audited to its account. A token revoked
    already is left as it was (and not audited again)."""
    token = find_token(prefix=prefix)
    if token.revoked_at is None:
        with account_transaction(token.account_id):
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            actor = Actor.command(token.account_id, staff=staff)
            audit.record(actor, Operation.REVOKE_TOKEN, target=token.prefix)
    return token


def expire_token(*, prefix: str, expires_in: timedelta, staff: str = "") -> BearerToken:
    """Make the token expire `expires_in` from now (zero: now). Audited to its account. A
    revoked token is refused: it stays refused whatever its expiry, so nothing is changed."""
    token = find_token(prefix=prefix)
    if token.revoked_at is not None:
        raise AccountError(
            f"{token.prefix} of {token.account.name} was revoked at {revoked_at(token)}; "
            "a revoked token stays refused, so its expiry is left as it was"
        )
    with account_transaction(token.account_id):
        token.expires_at = timezone.now() + expires_in
        token.save(update_fields=["expires_at"])
        actor = Actor.command(token.account_id, staff=staff)
        audit.record(actor, Operation.EXPIRE_TOKEN, target=token.prefix)
    return token


def set_account_active(*, account: Account, active: bool, staff: str = "") -> bool:
    """Deactivate an account (every token of it is refused from its next request) or
    reactivate it. Audited when it changes anything; whether it did. A deleted account is
    not reactivated (AccountError): it has nothing left to use."""
    with account_transaction(account.pk):
        if active:
            account.refresh_from_db(fields=["deleted_at"])
            if account.deleted_at is not None:
                raise AccountError(
                    f"account {account.name!r} was deleted on {deleted_on(account)}; "
                    "a deleted account cannot be reactivated"
                )
        changed = Account.objects.filter(pk=account.pk, is_active=not active).update(
            is_active=active
        )
        if changed:
            operation = Operation.REACTIVATE_ACCOUNT if active else Operation.DEACTIVATE_ACCOUNT
            audit.record(Actor.command(account.pk, staff=staff), operation)
    account.is_active = active
    return bool(changed)
