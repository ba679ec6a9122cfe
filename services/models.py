"""Accounts, their API tokens, connected services and encrypted credential fields.

No model holds plaintext: tokens are stored as SHA-256 digests, credential values as
AES-256-GCM ciphertext (format in `services/crypto.py`). `str()` and `repr()` show names,
prefixes and ids only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class KeyType(models.TextChoices):
    API_KEY = "api_key", "API key"
    OAUTH = "oauth", "OAuth"


class Account(models.Model):
    name = models.CharField(max_length=64, unique=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Account {self.pk}: {self.name}>"

    @property
    def is_authenticated(self) -> bool:
        """An account that a token resolved to is authenticated (REST framework asks)."""
        return True


class ApiToken(models.Model):
    """An account API token: its digest and display prefix, never the token."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["account_id", "created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return self.prefix

    def __repr__(self) -> str:
        return f"<ApiToken {self.pk}: {self.prefix}>"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now=None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class ConnectedService(models.Model):
    """A service connected to an account: the current set of credential fields.

    `generation` rises with every store; it is part of each field's associated data, so a
    field of an earlier set cannot be put back.
    """

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="services")
    service = models.CharField(max_length=64)
    key_type = models.CharField(max_length=16, choices=KeyType.choices)
    connected_at = models.DateTimeField()
    generation = models.PositiveBigIntegerField(default=1)

    class Meta:
        ordering = ["account_id", "service"]
        constraints = [
            # Also the index of every lookup: by account and service, and by account in order.
            models.UniqueConstraint(fields=["account", "service"], name="uniq_service_per_account"),
            models.CheckConstraint(
                condition=Q(key_type__in=KeyType.values), name="connected_service_key_type"
            ),
            models.CheckConstraint(condition=Q(generation__gte=1), name="generation_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.account_id}/{self.service}"

    def __repr__(self) -> str:
        return f"<ConnectedService {self.pk}: account {self.account_id}, {self.service}>"


class CredentialField(models.Model):
    """One sealed credential value. `ciphertext` is never shown anywhere."""

    connected_service = models.ForeignKey(
        ConnectedService, on_delete=models.CASCADE, related_name="fields"
    )
    key_name = models.CharField(max_length=64)
    key_id = models.CharField(max_length=32, db_index=True)
    ciphertext = models.BinaryField()

    class Meta:
        ordering = ["connected_service_id", "key_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["connected_service", "key_name"], name="uniq_key_name_per_service"
            ),
        ]

    def __str__(self) -> str:
        return self.key_name

    def __repr__(self) -> str:
        return f"<CredentialField {self.pk}: service {self.connected_service_id}, {self.key_name}>"
