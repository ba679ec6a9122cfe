"""Bearer authentication with account tokens (`cvt_`) and agent tokens (`cva_`).

A token whose shape or checksum is wrong is refused before any query; a well-formed one is
looked up by its SHA-256 digest, one indexed query joined to its account (and agent).
`last_used_at` is written at most once a minute per token. Every refusal has the same body and
challenge; a valid token of the other kind is 403 `insufficient_scope`.

The account API reads `Authorization: Bearer` only. The agent API reads an agent token wherever
a provider's SDK puts its key (docs/agents.md#brokered-access): `Authorization` Bearer or
`token`, either part of a Basic pair, the header of the service's placement, or the path
segment of a credential placed in the path (`path_token`). Two different tokens are 400
`ambiguous_credentials`. The headers that carried it are noted in the request's context, so
none is sent on. An accepted token becomes the request's `Principal`; a known token refused as
revoked or expired leaves its principal in the context, so the refusal is audited to its account.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import cast
from urllib.parse import unquote

from django.db.models import Q
from django.utils import timezone
from rest_framework import HTTP_HEADER_ENCODING
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from providers import catalog
from providers.identifiers import split_base
from services import bearer_tokens
from services.api.context import ApiRequest, Principal
from services.exceptions import REALM, AmbiguousCredentials, InsufficientScope, InvalidIdentifier
from services.identifiers import service_identifier
from services.models import AgentToken, ApiToken
from services.storage import queries
from services.storage.queries import ACCOUNT_TOKEN, AGENT_TOKEN, StoredToken

LAST_USED_RESOLUTION = timedelta(minutes=1)
_MODELS = {ACCOUNT_TOKEN: ApiToken, AGENT_TOKEN: AgentToken}
_TOKEN_KINDS = {ACCOUNT_TOKEN: bearer_tokens.ACCOUNT_KIND, AGENT_TOKEN: bearer_tokens.AGENT_KIND}


class InvalidToken(AuthenticationFailed):
    """A refused token, rendered as `exceptions.TokenRefused` (services/api/errors.py): the
    same body and challenge for every kind of refusal."""


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer` header, '' when malformed, None when absent.
    Read from the WSGI environment, as Latin-1 bytes like the REST framework reads it."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    parts = header.encode(HTTP_HEADER_ENCODING, errors="replace").split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        return ""
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        return ""


def _header(request: Request, name: str) -> str:
    return request.META.get("HTTP_" + name.upper().replace("-", "_"), "")


# How a credvault token begins (`cva_`, `cvt_`): what tells it from the other part of a Basic
# pair, and from a provider's own path segment where a credential goes in the path.
_TOKEN_HEADS = tuple(f"{kind}_" for kind in bearer_tokens.KINDS)


def _from_basic(credentials: bytes) -> set[str]:
    """The tokens of a Basic pair: its user name or its password, or both, each that begins as
    a credvault token does; the other part, whatever it holds (an SDK's account id or e-mail
    address beside its key, empty, `x`), is no token. Empty when neither part is one or the
    pair does not decode."""
    try:
        user, _, password = base64.b64decode(credentials, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return set()
    return {part for part in (user, password) if part.startswith(_TOKEN_HEADS)}


def _provider(service: str) -> catalog.Provider | None:
    """The catalog's provider of a brokered call's service as the path names it (`github`,
    `huggingface~router`: its base set apart), None for a custom or malformed one."""
    service, _ = split_base(service)
    try:
        return catalog.get(service_identifier(service))
    except InvalidIdentifier:
        return None


def path_token(service: str, path: str) -> tuple[str, str] | None:
    """For a service whose credential goes in the path (the catalog's auth type `url`:
    Telegram's `/bot{bot_token}/getMe`), the token an SDK put where the credential goes
    (`/bot<token>/getMe`, the segment percent-decoded), and the path after that segment
    (`/getMe`); None when there is none. Only a value that begins as credvault's tokens do
    (`cva_`, `cvt_`) is read as one: any other path is the provider's, as it is."""
    provider = _provider(service)
    if provider is None:
        return None
    for shape in provider.shapes:
        auth = shape.check.auth if shape.check is not None else None
        if shape.check is None or auth is None or auth.type != "url":
            continue
        head = shape.check.path.partition("{" + auth.field + "}")[0]
        if not path.startswith(head):
            continue
        segment, slash, rest = path[len(head) :].partition("/")
        token = unquote(segment)
        if token.startswith(_TOKEN_HEADS):
            return token, slash + rest
    return None


def agent_token(
    request: Request,
    *,
    placement_headers: Iterable[tuple[str, str]] = (),
    in_path: str | None = None,
) -> tuple[str | None, frozenset[str]]:
    """The agent token a request carries, and the lower-case names of the headers that carried
    it: the token, '' when a header was malformed, None when there is none. Raises
    AmbiguousCredentials for two different tokens. `placement_headers` are (name, prefix)
    pairs of a brokered call's credential placement; `in_path` the token of its path
    (`path_token`)."""
    found: dict[str, set[str]] = {}
    if in_path:
        found[in_path] = set()
    malformed = False
    parts = _header(request, "Authorization").encode(HTTP_HEADER_ENCODING, "replace").split()
    scheme = parts[0].lower() if parts else b""
    if scheme in (b"bearer", b"token", b"basic"):
        tokens: set[str] = set()
        if len(parts) == 2:
            try:
                tokens = _from_basic(parts[1]) if scheme == b"basic" else {parts[1].decode("ascii")}
            except UnicodeDecodeError:
                tokens = set()
        for token in tokens:
            found.setdefault(token, set()).add("authorization")
        malformed = not tokens
    for name, prefix in placement_headers:
        if name.lower() == "authorization" and scheme in (b"bearer", b"token", b"basic"):
            continue  # read above, by its scheme
        value = _header(request, name)
        if not value or not value.lower().startswith(prefix.lower()):
            continue
        token = value[len(prefix) :].strip()
        if token:
            found.setdefault(token, set()).add(name.lower())
    if len(found) > 1:
        raise AmbiguousCredentials()
    if found:
        [(token, carriers)] = found.items()
        return token, frozenset(carriers)
    return ("" if malformed else None), frozenset()


def find_token(raw: str) -> StoredToken | None:
    """The stored token for a well-formed `raw`, None when unknown; no query when malformed."""
    for kind, prefix in _TOKEN_KINDS.items():
        if bearer_tokens.is_well_formed(raw, prefix):
            return queries.find_token(kind=kind, digest=bearer_tokens.digest(raw))
    return None


def is_refused(token: StoredToken, now: datetime) -> bool:
    if token.revoked_at is not None or not token.account_active:
        return True
    if token.expires_at is not None and token.expires_at <= now:
        return True
    return token.kind == AGENT_TOKEN and token.agent_id is None  # its agent was deleted


def touch_last_used(token: StoredToken, now: datetime) -> None:
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    # The condition keeps two workers from both writing within the same minute.
    _MODELS[token.kind].objects.filter(pk=token.id).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)


def principal_of(token: StoredToken) -> Principal:
    return Principal(
        kind=token.kind,
        token_id=token.id,
        token_prefix=token.prefix,
        account_id=token.account_id,
        account_name=token.account_name,
        agent_id=token.agent_id,
        agent_name=token.agent_name,
    )


class _TokenAuthentication(BaseAuthentication):
    """Accepts the tokens of `kind`; a valid token of the other kind is insufficient scope."""

    kind: str

    def token_of(self, request: Request) -> str | None:
        """The token the request carries: '' when malformed, None when absent."""
        return bearer_token(request)

    def authenticate(self, request: Request) -> tuple[Principal, None] | None:
        raw = self.token_of(request)
        if raw is None:
            return None
        token = find_token(raw)
        if token is None:
            raise InvalidToken()
        context = cast(ApiRequest, request).context
        context.principal = principal_of(token)
        now = timezone.now()
        if is_refused(token, now):
            raise InvalidToken()
        context.authenticated = True
        if token.kind != self.kind:
            raise InsufficientScope()
        touch_last_used(token, now)
        return context.principal, None

    def authenticate_header(self, request: Request) -> str:
        return REALM


class AccountTokenAuthentication(_TokenAuthentication):
    """`request.user` is the Principal of an account token."""

    kind = ACCOUNT_TOKEN


class AgentTokenAuthentication(_TokenAuthentication):
    """`request.user` is the Principal of an agent token (with its agent), read wherever an
    SDK puts its key (`agent_token`)."""

    kind = AGENT_TOKEN

    def token_of(self, request: Request) -> str | None:
        token, carriers = agent_token(
            request,
            placement_headers=self.placement_headers(request),
            in_path=self.in_path(request),
        )
        cast(ApiRequest, request).context.token_headers = carriers
        return token

    @staticmethod
    def _brokered(request: Request) -> dict[str, str] | None:
        """A brokered call's path arguments (a view with `reads_placement_headers`), else
        None."""
        context = request.parser_context or {}
        if not getattr(context.get("view"), "reads_placement_headers", False):
            return None
        return context.get("kwargs", {})

    def placement_headers(self, request: Request) -> Iterable[tuple[str, str]]:
        """On a brokered call, the headers of the service's credential placement; elsewhere
        none."""
        arguments = self._brokered(request)
        provider = _provider(arguments.get("service", "")) if arguments is not None else None
        return provider.placement_headers if provider is not None else ()

    def in_path(self, request: Request) -> str | None:
        """On a brokered call to a service whose credential goes in the path, the token in
        the credential's segment (`path_token`); elsewhere None."""
        arguments = self._brokered(request)
        if arguments is None:
            return None
        found = path_token(arguments.get("service", ""), "/" + arguments.get("path", ""))
        return found[0] if found is not None else None
