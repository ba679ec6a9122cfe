"""Read-only admin for staff: names, prefixes, dates, statuses, keyNames and key ids. Never a
value, a ciphertext or a token digest; the only changes are revoking tokens and (de)activating
accounts, both audited (services/accounts.py).

Every list of an account's objects filters by account and searches by the account's name.
Every moment is shown to the second, in UTC (services/formats/en/formats.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from django.contrib import admin
from django.contrib.admin.utils import display_for_value
from django.db.models import Count, IntegerField, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from services.accounts import revoke_token, set_account_active
from services.management.listing import live_tokens, token_status
from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    AuditEvent,
    BearerToken,
    ConnectedService,
    CredentialField,
    Grant,
    Member,
)


def moment(field: str, heading: str) -> Callable[[object], datetime | None]:
    """A list column of the moment `field` under a shorter heading, sortable by it: with
    three moments to the second side by side, "last used at" and the like did not fit."""

    def column(obj: object) -> datetime | None:
        return getattr(obj, field)

    column.__name__ = field  # the cells' class stays field-<field>
    return admin.display(description=heading, ordering=field)(column)


# Django shows whatever a column returns (a datetime, formatted); the stubs say str or bool.
TOKEN_MOMENTS = [
    moment("created_at", "created"),
    moment("last_used_at", "last used"),
    moment("expires_at", "expires"),
]


class ReadOnlyAdmin(admin.ModelAdmin):
    class Media:
        # Keeps the wide lists (tokens, audit events) within 1400 px.
        css = {"all": ["services/admin.css"]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


def _count_per_account(rows: QuerySet) -> Coalesce:
    """The number of `rows` of the outer query's account, as a subquery (0 for none)."""
    counted = (
        rows.filter(account=OuterRef("pk"))
        .order_by()
        .values("account")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def with_overview(accounts: QuerySet[Account], now: datetime) -> QuerySet[Account]:
    """Each account with its counts of connected services, agents and live tokens, and the time
    of its newest audit event: subqueries of the one query of the accounts, never a query per
    account."""
    newest_event = AuditEvent.objects.filter(account=OuterRef("pk")).order_by("-seq")
    return accounts.annotate(
        service_count=_count_per_account(ConnectedService.objects.all()),
        agent_count=_count_per_account(Agent.objects.all()),
        live_token_count=_count_per_account(live_tokens(ApiToken.objects.all(), now)),
        live_agent_token_count=_count_per_account(live_tokens(AgentToken.objects.all(), now)),
        last_activity=Subquery(newest_event.values("occurred_at")[:1]),
    )


ACCOUNT_COLUMNS = (
    "name",
    "is_active",
    "service_count",
    "agent_count",
    "live_token_count",
    "live_agent_token_count",
    "last_activity",
    "created_at",
)


class AccountOverview(Protocol):
    """An account as `with_overview` annotates it (for annotations only)."""

    service_count: int
    agent_count: int
    live_token_count: int
    live_agent_token_count: int
    last_activity: datetime | None


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = ACCOUNT_COLUMNS
    list_filter = ["is_active"]
    search_fields = ["name"]
    fields = ACCOUNT_COLUMNS
    actions = ["deactivate", "activate"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Account]:
        return with_overview(super().get_queryset(request), timezone.now())

    @admin.display(description="services", ordering="service_count")
    def service_count(self, account: AccountOverview) -> int:
        return account.service_count

    @admin.display(description="agents", ordering="agent_count")
    def agent_count(self, account: AccountOverview) -> int:
        return account.agent_count

    @admin.display(description="live API tokens", ordering="live_token_count")
    def live_token_count(self, account: AccountOverview) -> int:
        return account.live_token_count

    @admin.display(description="live agent tokens", ordering="live_agent_token_count")
    def live_agent_token_count(self, account: AccountOverview) -> int:
        return account.live_agent_token_count

    @admin.display(description="last activity", ordering="last_activity")
    def last_activity(self, account: AccountOverview) -> str:
        # Formatted here: a detail page prints what a method returns as it is.
        return display_for_value(account.last_activity, self.get_empty_value_display())

    @admin.action(description="Deactivate the selected accounts (their tokens stop working)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        staff = request.user.get_username()
        count = sum(
            set_account_active(account=account, active=False, staff=staff) for account in queryset
        )
        self.message_user(request, f"Deactivated {count} account(s).")

    @admin.action(description="Activate the selected accounts")
    def activate(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        staff = request.user.get_username()
        # A deleted account is not reactivated: it has nothing left to use.
        deleted = queryset.filter(deleted_at__isnull=False).count()
        count = sum(
            set_account_active(account=account, active=True, staff=staff)
            for account in queryset.filter(deleted_at__isnull=True)
        )
        skipped = f" {deleted} deleted account(s) left as they are." if deleted else ""
        self.message_user(request, f"Activated {count} account(s).{skipped}")


class TokenAdmin(ReadOnlyAdmin):
    """Tokens by display prefix, with their status; the digest is deliberately absent."""

    list_filter = ["account", "revoked_at"]
    list_select_related = ["account"]
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The status reads the account, on the detail page too.
        return super().get_queryset(request).select_related("account")

    @admin.display(description="status")
    def status(self, token: BearerToken) -> str:
        return token_status(token, timezone.now())

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        staff = request.user.get_username()
        live = list(queryset.filter(revoked_at__isnull=True))
        for token in live:
            revoke_token(prefix=token.prefix, staff=staff)
        self.message_user(request, f"Revoked {len(live)} token(s).")


@admin.register(ApiToken)
class ApiTokenAdmin(TokenAdmin):
    list_display = ["prefix", "account", "name", "status", *TOKEN_MOMENTS]  # type: ignore[list-item]
    search_fields = ["prefix", "name", "account__name"]
    fields = [
        "prefix",
        "account",
        "name",
        "status",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]


@admin.register(AgentToken)
class AgentTokenAdmin(TokenAdmin):
    list_display = ["prefix", "account", "agent_name", "status", *TOKEN_MOMENTS]  # type: ignore[list-item]
    search_fields = ["prefix", "agent_name", "account__name"]
    fields = [
        "prefix",
        "account",
        "agent_name",
        "agent",
        "status",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]


def _rule_shown(rule: dict[str, list[str]]) -> str:
    methods = ", ".join(rule["methods"]) if "methods" in rule else "every method"
    paths = f" under {', '.join(rule['paths'])}" if "paths" in rule else ""
    return "every call" if not rule else f"{methods}{paths}"


class GrantInline(admin.TabularInline):
    model = Grant
    fields = (
        "service",
        "access",
        "allowed_methods",
        "allowed_paths",
        "base",
        "allowed_mutations",
        "expires_at",
        "approval_rules",
        "created_at",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    # Django's tabular inline also prints each row's str() above it, which for a grant is its
    # service: every service appeared twice. This one shows the columns alone.
    template = "admin/services/readonly_tabular.html"

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="methods")
    def allowed_methods(self, grant: Grant) -> str:
        return ", ".join(grant.methods)

    @admin.display(description="paths")
    def allowed_paths(self, grant: Grant) -> str:
        return ", ".join(grant.paths)

    @admin.display(description="GraphQL mutations")
    def allowed_mutations(self, grant: Grant) -> str:
        return ", ".join(grant.graphql)

    @admin.display(description="calls that need approval")
    def approval_rules(self, grant: Grant) -> str:
        """Each rule as `POST, DELETE under /repos`; `every call` for a rule of neither."""
        return "; ".join(map(_rule_shown, grant.approve))


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = ["name", "account", "created_at", "granted"]
    list_filter = ["account"]
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
    # Six columns, not ten, so that the list fits 1400 px; the detail page has every field.
    list_display = ["occurred_at", "account", "action", "result", "subject", "actor"]
    # Newest first across accounts (the model's order, by account then sequence, put one
    # account's whole history before the next one's); the primary key's order is the order of
    # appending, and its index serves it.
    ordering = ["-pk"]
    list_filter = ["account", "action", "outcome"]
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
        # A brokered call's (agent.proxy); empty for every other event.
        "method",
        "path",
        "upstream_status",
        "prev_digest",
        "digest",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        # The title (str) names the account, on the detail page too.
        return super().get_queryset(request).select_related("account")

    @admin.display(description="outcome", ordering="outcome")
    def result(self, event: AuditEvent) -> str:
        return f"{event.outcome} {event.status}"

    @admin.display(description="service / target")
    def subject(self, event: AuditEvent) -> str | None:
        return " / ".join(part for part in (event.service, event.target) if part) or None

    @admin.display(description="actor", ordering="token_prefix")
    def actor(self, event: AuditEvent) -> str:
        if event.agent_name:
            return f"{event.token_prefix} ({event.agent_name})"
        return event.token_prefix


@admin.register(ConnectedService)
class ConnectedServiceAdmin(ReadOnlyAdmin):
    list_display = ["service", "account", "key_type", "connected_at", "key_names"]
    list_filter = ["account", "key_type", "status"]
    search_fields = ["service", "account__name"]
    list_select_related = ["account"]
    # Neither values nor ciphertext: the fields are shown by keyName and key id only.
    fields = [
        "account",
        "service",
        "key_type",
        "status",
        "oauth_provider",
        "connected_at",
        "generation",
        "stored_fields",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConnectedService]:
        # Never the ciphertext column: not even loaded.
        stored = CredentialField.objects.only("key_name", "key_id", "connected_service_id")
        return (
            super()
            .get_queryset(request)
            .select_related("account")
            .prefetch_related(Prefetch("fields", stored))
        )

    @admin.display(description="keyNames")
    def key_names(self, obj: ConnectedService) -> str:
        return ", ".join(sorted(field.key_name for field in obj.fields.all()))

    @admin.display(description="stored fields (keyName: key id)")
    def stored_fields(self, obj: ConnectedService) -> str:
        fields = sorted(obj.fields.all(), key=lambda field: field.key_name)
        return format_html_join(
            mark_safe("<br>"),
            "{}: key <code>{}</code>",
            ((field.key_name, field.key_id) for field in fields),
        )


@admin.register(Member)
class MemberAdmin(ReadOnlyAdmin):
    """The people who sign in for an account: made and removed with `create_member` and
    `remove_member` only (their sign-in links are never shown)."""

    list_display = ["email", "account", "created_at"]
    list_filter = ["account"]
    search_fields = ["user__username", "account__name"]
    list_select_related = ["account", "user"]
    fields = ["email", "account", "created_at"]
    readonly_fields = ["email"]

    @admin.display(description="email", ordering="user__username")
    def email(self, obj: Member) -> str:
        return obj.user.username
