"""An account's OAuth clients: one per provider, the secret sealed like a credential value and
never returned."""

from __future__ import annotations

from django.utils import timezone

from providers import catalog
from providers import oauth as provider_oauth
from services import audit
from services.audit import Actor, Operation
from services.exceptions import OAuthClientNotFound, OAuthNotSupported
from services.keys import envelope
from services.masking import Secret
from services.models import OAuthClient
from services.sealed import OAUTH_CLIENT_SECRETS, client_secret_place
from services.storage.transactions import account_transaction


def oauth_provider(provider_id: str) -> catalog.Provider:
    """The catalog's provider that connects by OAuth, or OAuthNotSupported (404)."""
    provider = catalog.get(provider_id)
    if provider is None or provider.oauth is None:
        raise OAuthNotSupported()
    return provider


def put_client(
    *, actor: Actor, provider: str, client_id: str, client_secret: Secret
) -> tuple[OAuthClient, int]:
    """Create or replace the account's client of `provider`: it, and the status (201, 200)."""
    oauth_provider(provider)
    key_id, ciphertext = envelope.seal(
        client_secret, client_secret_place(account_id=actor.account_id, provider=provider)
    )
    with account_transaction(actor.account_id):
        client, created = OAuthClient.objects.update_or_create(
            account_id=actor.account_id,
            provider=provider,
            defaults={
                "client_id": client_id,
                "key_id": key_id,
                "secret_ciphertext": ciphertext,
                "created_at": timezone.now(),
            },
        )
        operation = Operation.CREATE_OAUTH_CLIENT if created else Operation.REPLACE_OAUTH_CLIENT
        return client, audit.record(actor, operation, service=provider).status


def list_clients(*, actor: Actor) -> list[OAuthClient]:
    clients = list(OAuthClient.objects.filter(account_id=actor.account_id).order_by("provider"))
    audit.record(actor, Operation.LIST_OAUTH_CLIENTS)
    return clients


def delete_client(*, actor: Actor, provider: str) -> None:
    with account_transaction(actor.account_id):
        deleted, _ = OAuthClient.objects.filter(
            account_id=actor.account_id, provider=provider
        ).delete()
        if not deleted:
            raise OAuthClientNotFound()
        audit.record(actor, Operation.DELETE_OAUTH_CLIENT, service=provider)


def client_of(*, account_id: int, provider: str) -> provider_oauth.Client | None:
    """The account's client of `provider`, its secret opened; None when it has none."""
    row = OAuthClient.objects.filter(account_id=account_id, provider=provider).first()
    if row is None:
        return None
    secret = OAUTH_CLIENT_SECRETS.open(row)
    return provider_oauth.Client(row.client_id, secret.reveal())
