"""The credential set of a token answer (the fields docs/oauth.md names); when a set expires
is services/set_expiry.py's."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from services.masking import Secret
from services.sealed import OpenedSet


def token_set(
    answer: provider_oauth.TokenAnswer,
    *,
    previous_refresh: Secret | None,
    scopes: tuple[str, ...],
    provider: catalog.Provider,
) -> OpenedSet:
    """The set of a token answer. Its API host (where the provider names one) is taken only
    when it matches the catalog's patterns: the callback refuses another one first, and a
    refresh keeps the stored one."""
    fields: list[tuple[str, Secret]] = [("access_token", Secret(answer.access_token))]
    api_host = provider.api_host
    if api_host is not None and answer.api_host and api_host.base_url(answer.api_host):
        fields.append((api_host.field, Secret(answer.api_host)))
    refresh_token = Secret(answer.refresh_token) if answer.refresh_token else previous_refresh
    if refresh_token is not None:
        fields.append(("refresh_token", refresh_token))
    if answer.expires_in is not None:
        expires_at = timezone.now() + timedelta(seconds=max(0, answer.expires_in))
        fields.append(("expires_at", Secret(expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    scope = answer.scope if answer.scope is not None else " ".join(scopes)
    if scope:
        fields.append(("scope", Secret(scope)))
    if answer.token_type:
        fields.append(("token_type", Secret(answer.token_type)))
    return OpenedSet(fields)
