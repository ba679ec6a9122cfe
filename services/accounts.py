"""Accounts and their API tokens: create, issue, revoke."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from services import tokens
from services.identifiers import InvalidIdentifier, normalize_service
from services.models import Account, AgentToken, ApiToken, BearerToken


class AccountError(ValueError):
    """A refused account or token operation; the message is safe to print."""


@dataclass(frozen=True)
class IssuedToken:
    """The one place a token's plaintext exists: returned once by `issue_token`."""

    token: BearerToken
    plaintext: str

    def __repr__(self) -> str:
        return f"IssuedToken(prefix={self.token.prefix!r})"


def account_name(raw: str) -> str:
    """Account names follow the service-identifier rules (`demo`, `acme-corp`)."""
    try:
        return normalize_service(raw)
    except InvalidIdentifier:
        raise AccountError(
            "an account name is 1 to 64 characters of a-z, 0-9, '.' and '-'"
        ) from None


def create_account(*, name: str) -> Account:
    normalized = account_name(name)
    try:
        with transaction.atomic():
            return Account.objects.create(name=normalized)
    except IntegrityError:
        raise AccountError(f"account {normalized!r} exists already") from None


def get_account(*, name: str) -> Account:
    account = Account.objects.filter(name=account_name(name)).first()
    if account is None:
        raise AccountError(f"no account named {name!r}")
    return account


def expiry(expires_in: timedelta | None) -> datetime | None:
    if expires_in is None:
        return None
    if expires_in <= timedelta(0):
        raise AccountError("the expiry must be in the future")
    return timezone.now() + expires_in


def create_token(model: type[BearerToken], kind: str, **fields: object) -> IssuedToken:
    """Draw a token of `kind` and store its digest and prefix in a new `model` row."""
    for _ in range(3):
        new = tokens.generate(kind)
        try:
            with transaction.atomic():
                token = model.objects.create(prefix=new.prefix, digest=new.digest, **fields)
        except IntegrityError:
            continue  # a display-prefix collision (1 in 2^47): draw again
        return IssuedToken(token=token, plaintext=new.plaintext)
    raise AccountError("could not draw a unique token; try again")


def issue_token(
    *, account: Account, name: str = "", expires_in: timedelta | None = None
) -> IssuedToken:
    """Create an account token; its plaintext is in the result and nowhere else."""
    return create_token(
        ApiToken, tokens.ACCOUNT_KIND, account=account, name=name, expires_at=expiry(expires_in)
    )


def revoke_token(*, prefix: str) -> BearerToken:
    """Revoke the account token (`cvt_`) or agent token (`cva_`) with this display prefix;
    effective on its next request."""
    model = AgentToken if prefix.startswith(f"{tokens.AGENT_KIND}_") else ApiToken
    token = model.objects.select_related("account").filter(prefix=prefix).first()
    if token is None:
        raise AccountError(f"no token with prefix {prefix!r}")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token
