"""Read-only admin for staff: names, prefixes, dates and keyNames. Never a value, a ciphertext
or a token digest; the only changes are revoking tokens and (de)activating accounts."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    AuditEvent,
    ConnectedService,
    CredentialField,
    Grant,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = ["name", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    fields = ["name", "is_active", "created_at"]
    actions = ["deactivate", "activate"]

    @admin.action(description="Deactivate the selected accounts (their tokens stop working)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        count = queryset.update(is_active=False)
        self.message_user(request, f"Deactivated {count} account(s).")

    @admin.action(description="Activate the selected accounts")
    def activate(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        count = queryset.update(is_active=True)
        self.message_user(request, f"Activated {count} account(s).")


class TokenAdmin(ReadOnlyAdmin):
    """Tokens by display prefix; the digest is deliberately absent."""

    list_filter = ["revoked_at"]
    list_select_related = ["account"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(ApiToken)
class ApiTokenAdmin(TokenAdmin):
    list_display = [
        "prefix",
        "account",
        "name",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    search_fields = ["prefix", "name", "account__name"]
    fields = ["prefix", "account", "name", "created_at", "last_used_at", "expires_at", "revoked_at"]


@admin.register(AgentToken)
class AgentTokenAdmin(TokenAdmin):
    list_display = [
        "prefix",
        "account",
        "agent_name",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    search_fields = ["prefix", "agent_name", "account__name"]
    fields = [
        "prefix",
        "account",
        "agent_name",
        "agent",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]


class GrantInline(admin.TabularInline):
    model = Grant
    fields = ["service", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = ["name", "account", "created_at", "granted"]
    search_fields = ["name", "account__name"]
    list_select_related = ["account"]
    fields = ["account", "name", "created_at"]
    inlines = [GrantInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return super().get_queryset(request).prefetch_related("grants")

    @admin.display(description="granted services")
    def granted(self, obj: Agent) -> str:
        return ", ".join(grant.service for grant in obj.grants.all())


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = [
        "occurred_at",
        "account",
        "seq",
        "action",
        "outcome",
        "status",
        "service",
        "target",
        "token_prefix",
        "agent_name",
    ]
    list_filter = ["action", "outcome"]
    search_fields = ["account__name", "service", "target", "token_prefix", "request_id"]
    list_select_related = ["account"]
    fields = [
        "account",
        "seq",
        "occurred_at",
        "token_prefix",
        "agent_name",
        "action",
        "service",
        "target",
        "outcome",
        "status",
        "request_id",
        "prev_digest",
        "digest",
    ]


@admin.register(ConnectedService)
class ConnectedServiceAdmin(ReadOnlyAdmin):
    list_display = ["service", "account", "key_type", "connected_at", "key_names"]
    list_filter = ["key_type"]
    search_fields = ["service", "account__name"]
    list_select_related = ["account"]
    # Neither values nor ciphertext: the fields are shown by keyName only.
    fields = ["account", "service", "key_type", "connected_at", "generation", "key_names"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConnectedService]:
        key_names = CredentialField.objects.only("key_name", "connected_service_id")
        return super().get_queryset(request).prefetch_related(Prefetch("fields", key_names))

    @admin.display(description="keyNames")
    def key_names(self, obj: ConnectedService) -> str:
        return ", ".join(sorted(field.key_name for field in obj.fields.all()))
