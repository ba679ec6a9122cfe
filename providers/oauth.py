"""The provider's side of OAuth: the authorization URL a person consents at, and the two token
requests (a code exchange, a refresh) through the strict outbound client. Knows nothing of
accounts: services/oauth/ keeps the clients, the states and the sets.

A token request that gives no token is one of three failures, kept apart because each is
repaired by someone else: `Refused` (the grant: the person authorizes again), `Misconfigured`
(the client, whatever the status: CLIENT_ERRORS; the account's owner fixes it) and
`Unavailable` (no usable answer: nothing is decided, nothing changes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from django.conf import settings

from providers.catalog import OAuth, Provider
from providers.http.client import Answer, send
from providers.http.destinations import Destination
from providers.http.failures import OutboundError

USER_AGENT = "credvault"
MAX_TOKEN_ANSWER = 64 * 1024
# The longest lifetime a token answer's `expires_in` may state: longer says nothing usable.
MAX_LIFETIME_SECONDS = 365 * 24 * 3600
# What an origin's host and port may be written with, in a Content-Security-Policy source.
ORIGIN_CHARACTERS = frozenset(string.ascii_letters + string.digits + ".-:[]")
# A token URL's `error` that refuses the client itself, not the person's grant.
CLIENT_ERRORS = frozenset(
    {
        # RFC 6749 5.2.
        "invalid_client",
        "unauthorized_client",
        # Salesforce: an unknown consumer key
        # (https://developer.salesforce.com/docs/platform/sf-connect-dev-guide/guide/sf-connect-xorg-troubleshooting.html).
        "invalid_client_id",
        # Slack, with HTTP 200 and `ok: false`: `invalid_client_id` and `bad_client_secret`
        # (https://docs.slack.dev/reference/methods/oauth.v2.access).
        "bad_client_secret",
        # GitHub, with HTTP 200: "The client_id and/or client_secret passed are incorrect"
        # (https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors).
        "incorrect_client_credentials",
    }
)


class OAuthUrlError(ValueError):
    """CREDVAULT_PROVIDER_OAUTH_URLS is invalid; the message names the entry."""


class TokenError(Exception):
    """A token request that gave no token. `code` is the provider's `error` when it sent one
    (a short code from a fixed vocabulary, never a value)."""

    def __init__(self, code: str = "") -> None:
        super().__init__(code or type(self).__name__)
        self.code = code


class Refused(TokenError):
    pass


class Misconfigured(TokenError):
    pass


class Unavailable(TokenError):
    pass


@dataclass(frozen=True)
class Endpoints:
    authorize_url: str
    token_url: str
    # Named by the server's own configuration (CREDVAULT_PROVIDER_OAUTH_URLS): its host may be
    # a private one, as for CREDVAULT_PROVIDER_BASE_URLS.
    configured: bool
    # Where refreshes go: the token URL but for a provider with a refresh endpoint of its own.
    refresh_url: str = ""

    @property
    def refresh(self) -> str:
        return self.refresh_url or self.token_url


@dataclass(frozen=True)
class Client:
    client_id: str
    client_secret: str

    def __repr__(self) -> str:
        return f"Client(client_id={self.client_id!r})"


@dataclass(frozen=True)
class TokenAnswer:
    """A token URL's answer: the access token, and what came with it."""

    access_token: str
    refresh_token: str | None
    # Seconds, from 0 to MAX_LIFETIME_SECONDS; None when the answer states no usable lifetime.
    expires_in: int | None
    scope: str | None
    token_type: str | None
    # The connection's own API host as the answer names it, for a provider whose catalog entry
    # has an `api_host_field` (Salesforce's `instance_url`); not yet checked against its
    # patterns.
    api_host: str | None = None

    def __repr__(self) -> str:
        return f"TokenAnswer(expires_in={self.expires_in!r}, scope={self.scope!r})"


def parse_oauth_urls(raw: str) -> dict[str, dict[str, str]]:
    """Parse CREDVAULT_PROVIDER_OAUTH_URLS: provider id to {"authorize": URL, "token": URL},
    and optionally "refresh": URL for a provider that refreshes elsewhere."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        raise OAuthUrlError("CREDVAULT_PROVIDER_OAUTH_URLS is not valid JSON") from None
    if not isinstance(data, dict):
        raise OAuthUrlError("CREDVAULT_PROVIDER_OAUTH_URLS must be a JSON object")
    for provider_id, urls in data.items():
        where = f"CREDVAULT_PROVIDER_OAUTH_URLS[{provider_id!r}]"
        if not isinstance(urls, dict) or not {"authorize", "token"} <= set(urls) <= {
            "authorize",
            "token",
            "refresh",
        }:
            raise OAuthUrlError(
                f"{where} must be an object with `authorize` and `token` (and `refresh`)"
            )
        for name, url in urls.items():
            parts = urlsplit(url) if isinstance(url, str) else None
            if not parts or parts.scheme not in ("http", "https") or not parts.hostname:
                raise OAuthUrlError(f"{where}.{name} must be an http(s) URL")
            if parts.username or parts.fragment or (name != "authorize" and parts.query):
                raise OAuthUrlError(f"{where}.{name} must hold no user info, fragment or query")
    return data


def endpoints(provider: Provider) -> Endpoints:
    """The provider's authorization and token URLs: the server-side replacement, else the
    catalog's. Only a provider with an `oauth` block has any."""
    assert provider.oauth is not None
    configured = parse_oauth_urls(settings.CREDVAULT_PROVIDER_OAUTH_URLS).get(provider.id)
    if configured:
        return Endpoints(
            configured["authorize"],
            configured["token"],
            configured=True,
            refresh_url=configured.get("refresh", ""),
        )
    return Endpoints(
        provider.oauth.authorize_url,
        provider.oauth.token_url,
        configured=False,
        refresh_url=provider.oauth.refresh_url,
    )


def authorize_origin(provider: Provider) -> str:
    """The origin (`scheme://host[:port]`) of the provider's authorization URL, as a
    Content-Security-Policy source: the one place a page may send a form on to. Empty when the
    URL's host is not a plain name or address."""
    parts = urlsplit(endpoints(provider).authorize_url)
    if not parts.netloc or not set(parts.netloc) <= ORIGIN_CHARACTERS:
        return ""
    return f"{parts.scheme}://{parts.netloc}"


def challenge_for(verifier: str) -> str:
    """The PKCE S256 challenge of `verifier` (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorize_url(
    provider: Provider,
    *,
    client_id: str,
    redirect_uri: str,
    state: str,
    verifier: str,
    scopes: tuple[str, ...],
) -> str:
    """Where the person's browser goes to consent. The PKCE challenge (S256) goes to a
    provider whose catalog entry says it takes PKCE, and never to another."""
    oauth = provider.oauth
    assert oauth is not None
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
    }
    if oauth.pkce:
        params["code_challenge"] = challenge_for(verifier)
        params["code_challenge_method"] = "S256"
    if scopes:
        params["scope"] = oauth.scope_separator.join(scopes)
    params.update(oauth.authorize_params)
    base = endpoints(provider).authorize_url
    return f"{base}{'&' if urlsplit(base).query else '?'}{urlencode(params, quote_via=quote)}"


def exchange_code(
    provider: Provider, *, client: Client, code: str, verifier: str, redirect_uri: str
) -> TokenAnswer:
    """The authorization code exchanged for a set; the PKCE verifier goes with it only to a
    provider that takes PKCE (it was sent the challenge). Raises a TokenError."""
    oauth: OAuth = provider.oauth  # type: ignore[assignment]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri}
    if oauth.pkce:
        form["code_verifier"] = verifier
    where = endpoints(provider)
    return _token_request(provider, client, form, url=where.token_url, where=where)


def refresh(provider: Provider, *, client: Client, refresh_token: str) -> TokenAnswer:
    """A new access token for the refresh token, asked at the provider's refresh URL (its
    token URL unless it has one of its own). Raises a TokenError."""
    where = endpoints(provider)
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    return _token_request(provider, client, form, url=where.refresh, where=where)


def _token_request(
    provider: Provider, client: Client, form: dict[str, str], *, url: str, where: Endpoints
) -> TokenAnswer:
    oauth: OAuth = provider.oauth  # type: ignore[assignment]
    parts = urlsplit(url)
    destination = Destination.from_base_url(
        f"{parts.scheme}://{parts.netloc}", configured=where.configured
    )
    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    if oauth.client_auth == "client_secret_basic":
        # RFC 6749 2.3.1: each part form-encoded, then joined and base64-encoded.
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    else:
        form = {**form, "client_id": client.client_id, "client_secret": client.client_secret}
    try:
        answer = send(
            destination=destination,
            method="POST",
            target=parts.path or "/",
            headers=headers,
            body=urlencode(form).encode("ascii"),
            # A token URL's own deadline: a provider that rotates the refresh token and then
            # answers slowly must still be heard, or the rotated token is lost.
            timeout=settings.CREDVAULT_OAUTH_TIMEOUT,
            max_answer=MAX_TOKEN_ANSWER,
        )
    except OutboundError:
        raise Unavailable() from None
    document = _document(answer)
    error = document.get("error")
    error = error if isinstance(error, str) and error.isascii() and len(error) <= 64 else ""
    if answer.status == 200 and not error:
        return _token_answer(
            document, api_host_field=provider.api_host.field if provider.api_host else ""
        )
    if error in CLIENT_ERRORS:
        raise Misconfigured(error)
    if answer.status in (400, 401) or (answer.status == 200 and error):
        raise Refused(error or f"status_{answer.status}")
    raise Unavailable()


def _document(answer: Answer) -> Mapping[str, object]:
    """The token URL's answer as a mapping: JSON, or a form-encoded body (GitHub's default)."""
    content_type = next(
        (value for name, value in answer.headers if name.lower() == "content-type"), ""
    )
    text = answer.body.decode("utf-8", "replace")
    if "form-urlencoded" in content_type:
        return dict(parse_qsl(text))
    try:
        document = json.loads(text)
    except ValueError:
        return dict(parse_qsl(text)) if "=" in text else {}
    return document if isinstance(document, dict) else {}


def _token_answer(document: Mapping[str, object], *, api_host_field: str) -> TokenAnswer:
    access_token = document.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise Unavailable()
    refresh_token = document.get("refresh_token")
    scope = document.get("scope")
    token_type = document.get("token_type")
    api_host = document.get(api_host_field) if api_host_field else None
    return TokenAnswer(
        access_token=access_token,
        refresh_token=refresh_token if isinstance(refresh_token, str) and refresh_token else None,
        expires_in=lifetime(document.get("expires_in")),
        scope=scope if isinstance(scope, str) else None,
        token_type=token_type if isinstance(token_type, str) else None,
        api_host=api_host if isinstance(api_host, str) and api_host else None,
    )


def lifetime(expires_in: object) -> int | None:
    """A token answer's `expires_in` as whole seconds, or None when it states no usable
    lifetime: not a number (a JSON number, or a string of one as form-encoded answers hold),
    not finite, negative, or over MAX_LIFETIME_SECONDS. Never raises: the answer it comes with
    may hold a refresh token the provider has already rotated, which must be stored."""
    if isinstance(expires_in, bool):
        return None
    if isinstance(expires_in, int):
        return expires_in if 0 <= expires_in <= MAX_LIFETIME_SECONDS else None
    if isinstance(expires_in, str):
        text = expires_in.strip()
        if not text or len(text) > 32:
            return None
        try:
            expires_in = float(text)
        except ValueError:
            return None
    if not isinstance(expires_in, float) or not math.isfinite(expires_in):
        return None
    return int(expires_in) if 0 <= expires_in <= MAX_LIFETIME_SECONDS else None
