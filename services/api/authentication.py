"""Bearer authentication with account tokens (`cvt_`) and agent tokens (`cva_`) (CONTRACT 6, 10).

A token whose shape or checksum is wrong is refused before any query. A well-formed one is
looked up by its SHA-256 digest: one indexed query joined to its account (and agent).
`last_used_at` is written at most once a minute per token. Every refusal has the same body and
challenge. A valid token of the other kind is 403 `insufficient_scope`.

The request carries what the audit needs: `credvault_audit`, the actor of an accepted token,
or of a known token refused as revoked or expired (so that its refusal is audited too).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q
from django.utils import timezone
from rest_framework import HTTP_HEADER_ENCODING
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from services import sql, tokens
from services.api.middleware import request_id_of
from services.audit import AuditContext
from services.exceptions import REALM, InsufficientScope
from services.models import Account, AgentToken, ApiToken, BearerToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


class InvalidToken(AuthenticationFailed):
    default_code = "invalid_token"
    default_detail = "The token is malformed, unknown, revoked or expired."


def _bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer` header, '' when malformed, None when absent.

    The header's bytes, as the REST framework's `get_authorization_header` gives them; read
    from the WSGI environment, not through `request.headers`, a dict of every header that
    would be built for this alone on each request.
    """
    header = request.META.get("HTTP_AUTHORIZATION", "").encode(HTTP_HEADER_ENCODING)
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


def touch_last_used(token: BearerToken) -> None:
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    # The condition keeps two workers from both writing within the same minute.
    type(token).objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    token.last_used_at = now


# What a request reads of a token and its account (sql.account_token, sql.agent_token), in the
# order of the models' fields, as `from_db` takes them. The other fields are deferred, as
# `.only()` leaves them: read on access, with a query. No request path reads them, as the
# query counts of the hot paths show (tests/test_queries.py).
ACCOUNT_TOKEN_FIELDS = ("id", "prefix", "last_used_at", "expires_at", "revoked_at", "account_id")
AGENT_TOKEN_FIELDS = (*ACCOUNT_TOKEN_FIELDS, "agent_id", "agent_name")
ACCOUNT_FIELDS = ("id", "name", "is_active")


def _lookup(raw: str) -> BearerToken | None:
    """The stored token for a well-formed `raw`, None when unknown; no query when malformed.

    One indexed query joined to the account; it runs on every authenticated request, so it is
    fixed SQL read with a plain cursor (services/sql.py), and its rows are made into
    instances as the ORM makes loaded ones.
    """
    if tokens.is_well_formed(raw, tokens.ACCOUNT_KIND):
        model: type[BearerToken] = ApiToken
        statement, fields = sql.account_token, ACCOUNT_TOKEN_FIELDS
    elif tokens.is_well_formed(raw, tokens.AGENT_KIND):
        model, statement, fields = AgentToken, sql.agent_token, AGENT_TOKEN_FIELDS
    else:
        return None
    rows = sql.fetch(statement, [tokens.digest(raw)])
    if not rows:
        return None
    pk, prefix, last_used, expires, revoked, account_id, *agent, name, active = rows[0]
    token = model.from_db(
        DEFAULT_DB_ALIAS,
        fields,
        (
            pk,
            prefix,
            sql.as_datetime(last_used),
            sql.as_datetime(expires),
            sql.as_datetime(revoked),
            account_id,
            *agent,
        ),
    )
    account = Account.from_db(DEFAULT_DB_ALIAS, ACCOUNT_FIELDS, (account_id, name, bool(active)))
    model.account.field.set_cached_value(token, account)  # as select_related caches it
    return token


def _refusal(token: BearerToken | None, now) -> bool:
    if token is None or token.is_revoked or token.is_expired(now):
        return True
    if not token.account.is_active:
        return True
    return isinstance(token, AgentToken) and token.agent_id is None


def _context(request: Request, token: BearerToken) -> AuditContext:
    return AuditContext(
        account_id=token.account_id,
        token_prefix=token.prefix,
        request_id=request_id_of(request),
        agent_name=token.agent_name if isinstance(token, AgentToken) else "",
    )


class _TokenAuthentication(BaseAuthentication):
    """Accepts the tokens of `model`; a valid token of the other kind is insufficient scope."""

    model: type[BearerToken]

    def authenticate(self, request: Request) -> tuple[Account, BearerToken] | None:
        raw = _bearer_token(request)
        if raw is None:
            return None
        token = _lookup(raw)
        now = timezone.now()
        if _refusal(token, now):
            if token is not None:
                # A known token, refused: its account still learns of the attempt.
                request._request.credvault_audit = _context(request, token)
            raise InvalidToken()
        # Read by the access log and the audit: who acted, never the token.
        request._request.credvault_token_prefix = token.prefix
        request._request.credvault_audit = _context(request, token)
        if not isinstance(token, self.model):
            raise InsufficientScope()
        touch_last_used(token)
        return token.account, token

    def authenticate_header(self, request: Request) -> str:
        return REALM


class AccountTokenAuthentication(_TokenAuthentication):
    """`request.user` is the Account, `request.auth` the ApiToken."""

    model = ApiToken


class AgentTokenAuthentication(_TokenAuthentication):
    """`request.user` is the Account, `request.auth` the AgentToken (with its agent)."""

    model = AgentToken
