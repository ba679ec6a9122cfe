"""Bearer authentication with account tokens (CONTRACT 6).

A token whose shape or checksum is wrong is refused before any query. A well-formed one is
looked up by its SHA-256 digest: one indexed query joined to its account. `last_used_at` is
written at most once a minute per token. Every refusal has the same body and challenge.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from services import tokens
from services.models import Account, ApiToken

REALM = 'Bearer realm="credvault"'
LAST_USED_RESOLUTION = timedelta(minutes=1)


class InvalidToken(AuthenticationFailed):
    default_code = "invalid_token"
    default_detail = "The token is malformed, unknown, revoked or expired."


def _bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer` header, '' when malformed, None when absent."""
    header = get_authorization_header(request)
    if not header:
        return None
    parts = header.split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        return ""
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        return ""


def touch_last_used(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    # The condition keeps two workers from both writing within the same minute.
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    token.last_used_at = now


class AccountTokenAuthentication(BaseAuthentication):
    """`request.user` is the Account, `request.auth` the ApiToken."""

    def authenticate(self, request: Request) -> tuple[Account, ApiToken] | None:
        raw = _bearer_token(request)
        if raw is None:
            return None
        if not tokens.is_well_formed(raw, tokens.ACCOUNT_KIND):
            raise InvalidToken()
        token = ApiToken.objects.select_related("account").filter(digest=tokens.digest(raw)).first()
        now = timezone.now()
        if (
            token is None
            or token.is_revoked
            or token.is_expired(now)
            or not token.account.is_active
        ):
            raise InvalidToken()
        touch_last_used(token)
        # Read by the access log: the display prefix of a token that was accepted.
        request._request.credvault_token_prefix = token.prefix
        return token.account, token

    def authenticate_header(self, request: Request) -> str:
        return REALM
