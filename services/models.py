"""Accounts, their API tokens, connected services and encrypted credential fields.

No model holds plaintext: tokens are stored as SHA-256 digests, credential values as
AES-256-GCM ciphertext (format in `services/crypto.py`). `str()` says what an object is by
name (an account's name, a service identifier, an agent's name, a token's display prefix), which
the admin uses as its title; `repr()` adds the database id. Neither ever shows secret material.
"""

from __future__ import annotations

import secrets
from typing import ClassVar, Self

from django.db import models
from django.db.models import Q
from django.utils import timezone

from providers import identifiers

# A request id: the caller's X-Request-ID when it fits (services/api/context.py), a staff
# user's `admin:NAME` cut to fit, or a new one.
REQUEST_ID_MAX_LENGTH = 64


class KeyType(models.TextChoices):
    API_KEY = identifiers.API_KEY, "API key"
    OAUTH = identifiers.OAUTH, "OAuth"


class Account(models.Model):
    name = models.CharField(max_length=64, unique=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The head of the account's audit chain: its last sequence number and digest. Kept here so
    # that an event cut from the end of the chain is detected too (services/audit.py).
    audit_seq = models.PositiveBigIntegerField(default=0)
    audit_head = models.CharField(max_length=64, default="0" * 64)
    # Set by `delete_account`: the row stays for its audit chain, everything else is gone.
    deleted_at = models.DateTimeField(null=True, blank=True, default=None)

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


class BearerToken(models.Model):
    """What every bearer token stores: its SHA-256 digest and display prefix, never itself."""

    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # For the type checker: each kind declares its own relation to its account.
    objects: ClassVar[models.Manager[Self]]
    account: Account
    account_id: int

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.prefix

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.pk}: {self.prefix}>"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now=None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class ApiToken(BearerToken):
    """An account API token (`cvt_`)."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="tokens")

    class Meta:
        ordering = ["account_id", "created_at"]
        verbose_name = "API token"


class ServiceStatus(models.TextChoices):
    """Whether a connected service can be used: an OAuth set whose refresh the
    provider refused waits for the person to connect it again."""

    CONNECTED = "connected", "connected"
    REAUTHORIZATION_REQUIRED = "reauthorization_required", "reauthorization required"


class ConnectedService(models.Model):
    """A service connected to an account: the current set of credential fields.

    `generation` rises with every store; it is part of each field's associated data, so a
    field of an earlier set cannot be put back.
    """

    # Its lookups use the unique (account, service) index below, which starts with it.
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="services", db_index=False
    )
    service = models.CharField(max_length=64)
    key_type = models.CharField(max_length=16, choices=KeyType.choices)
    connected_at = models.DateTimeField()
    generation = models.PositiveBigIntegerField(
        default=1,
        help_text=(
            "Rises by one with every store of this service. It is bound into the associated "
            "data of each stored value, so a value of an earlier set, copied back, fails to open."
        ),
    )

    status = models.CharField(
        max_length=32, choices=ServiceStatus.choices, default=ServiceStatus.CONNECTED
    )
    # The catalog provider an OAuth connect stored this set for (its refresh goes there); empty
    # for a set stored by hand, whose service identifier names the provider, if any.
    oauth_provider = models.CharField(max_length=64, blank=True, default="")
    # While a worker refreshes this OAuth set (services/oauth/refresh.py), until when its claim
    # holds: one refresh per service at a time, across workers and hosts.
    refreshing_until = models.DateTimeField(null=True, blank=True, default=None)
    # After its token URL was unavailable, until when the set's refreshes pause: its uses
    # answer 503 at once, with no request, on every worker and host.
    refresh_paused_until = models.DateTimeField(null=True, blank=True, default=None)
    # When a refresh was last asked for by a 401 (the provider refused the access token): such
    # a refresh runs at most once a minute per service.
    forced_refresh_at = models.DateTimeField(null=True, blank=True, default=None)
    # The set's access token expiry where it holds a refresh token (else null), kept in step
    # with every store: the cron finds the sets due without opening any. The time is no secret.
    refresh_by = models.DateTimeField(null=True, blank=True, default=None)

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
        return f"{self.account.name}/{self.service}"

    def __repr__(self) -> str:
        return f"<ConnectedService {self.pk}: account {self.account_id}, {self.service}>"


class CredentialField(models.Model):
    """One sealed credential value. `ciphertext` is never shown anywhere."""

    # Its lookups use the unique (connected_service, key_name) index below, which starts
    # with it: every index is one more write per stored field.
    connected_service = models.ForeignKey(
        ConnectedService, on_delete=models.CASCADE, related_name="fields", db_index=False
    )
    key_name = models.CharField(max_length=64)
    key_id = models.CharField(max_length=32)
    ciphertext = models.BinaryField()

    class Meta:
        ordering = ["connected_service_id", "key_name"]
        # The values of a key id (readiness, re-encryption). Declared here rather than with
        # db_index, which on PostgreSQL adds a second index for LIKE that nothing uses.
        indexes = [models.Index(fields=["key_id"], name="credentialfield_key_id")]
        constraints = [
            models.UniqueConstraint(
                fields=["connected_service", "key_name"], name="uniq_key_name_per_service"
            ),
        ]

    def __str__(self) -> str:
        return self.key_name

    def __repr__(self) -> str:
        return f"<CredentialField {self.pk}: service {self.connected_service_id}, {self.key_name}>"


class Agent(models.Model):
    """An AI agent of an account; it reads the credentials of the services it is granted."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["account_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["account", "name"], name="uniq_agent_per_account"),
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Agent {self.pk}: account {self.account_id}, {self.name}>"


class GrantAccess(models.TextChoices):
    """What a grant lets its agent do with the service."""

    PROXY = "proxy", "proxy: brokered calls only"
    READ = "read", "read: brokered calls and the plaintext read"


# The methods a brokered call may use, in the order grants list them; and a grant's defaults.
PROXY_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
WHOLE_API = "/"


def every_method() -> list[str]:
    return list(PROXY_METHODS)


def the_whole_api() -> list[str]:
    return [WHOLE_API]


class Grant(models.Model):
    """Lets an agent use the credentials of one service identifier (connected or not): through
    brokered calls with `methods` under `paths` (on one `base` of the service where it names
    one, else on every base), and with access `read` the plaintext too. A GraphQL mutation that
    creates, reveals or widens a credential is allowed only when `graphql` names it."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="grants")
    service = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    access = models.CharField(max_length=8, choices=GrantAccess.choices, default=GrantAccess.PROXY)
    methods = models.JSONField(default=every_method, help_text="HTTP methods allowed through.")
    paths = models.JSONField(default=the_whole_api, help_text="Path prefixes allowed.")
    base = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="The one base of the service allowed (router, host); empty: every base.",
    )
    graphql = models.JSONField(
        default=list,
        blank=True,
        help_text="Sensitive GraphQL mutations allowed by name (none by default).",
    )
    # Past it the grant refuses as if it were absent; null: the grant does not expire.
    expires_at = models.DateTimeField(null=True, blank=True, default=None)
    # Rules `{"methods"?: [...], "paths"?: [...]}`: a brokered call that matches one needs a
    # person's approval (services/consent/).
    approve = models.JSONField(
        default=list,
        blank=True,
        help_text="Calls that need a member's approval: rules of methods and path prefixes.",
    )

    class Meta:
        ordering = ["agent_id", "service"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "service"], name="uniq_grant_per_agent"),
        ]

    def __str__(self) -> str:
        return self.service

    def __repr__(self) -> str:
        return f"<Grant {self.pk}: agent {self.agent_id}, {self.service}>"


class AgentToken(BearerToken):
    """An agent token (`cva_`). It outlives its agent (`agent` becomes null, `agent_name` keeps
    who it was), so that a request with it after the agent's deletion is refused and still
    audited to the account."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="agent_tokens")
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="tokens"
    )
    agent_name = models.CharField(max_length=64)

    class Meta:
        ordering = ["account_id", "created_at"]
        verbose_name = "agent token"


class AuditAction(models.TextChoices):
    # Labelled by their values: the admin shows `tokens.revoke`, as the API and the docs
    # write it, not a generated "Tokens Revoke".
    SERVICES_LIST = "services.list", "services.list"
    SERVICES_TEST = "services.test", "services.test"
    SERVICES_STORE = "services.store", "services.store"
    SERVICES_REMOVE = "services.remove", "services.remove"
    PROVIDERS_LIST = "providers.list", "providers.list"
    AGENTS_LIST = "agents.list", "agents.list"
    AGENTS_PUT = "agents.put", "agents.put"
    AGENTS_DELETE = "agents.delete", "agents.delete"
    AGENT_TOKENS_ISSUE = "agents.issue_token", "agents.issue_token"
    AGENT_TOKENS_LIST = "agents.list_tokens", "agents.list_tokens"
    AGENT_TOKENS_REVOKE = "agents.revoke_token", "agents.revoke_token"
    AUDIT_LIST = "audit.list", "audit.list"
    AGENT_READ = "agent.read_credentials", "agent.read_credentials"
    AGENT_PROXY = "agent.proxy", "agent.proxy"
    # Made with a management command or in the admin.
    TOKENS_ISSUE = "tokens.issue", "tokens.issue"
    TOKENS_REVOKE = "tokens.revoke", "tokens.revoke"
    TOKENS_EXPIRE = "tokens.expire", "tokens.expire"
    ACCOUNTS_DEACTIVATE = "accounts.deactivate", "accounts.deactivate"
    ACCOUNTS_REACTIVATE = "accounts.reactivate", "accounts.reactivate"
    ACCOUNTS_DELETE = "accounts.delete", "accounts.delete"
    KEYS_REENCRYPT = "keys.reencrypt", "keys.reencrypt"
    # OAuth.
    OAUTH_CLIENTS_PUT = "oauth_clients.put", "oauth_clients.put"
    OAUTH_CLIENTS_LIST = "oauth_clients.list", "oauth_clients.list"
    OAUTH_CLIENTS_DELETE = "oauth_clients.delete", "oauth_clients.delete"
    OAUTH_CONNECT = "oauth.connect", "oauth.connect"
    OAUTH_CALLBACK = "oauth.callback", "oauth.callback"
    OAUTH_REFRESH = "oauth.refresh", "oauth.refresh"
    # Consent: approvals of calls and agents' access requests (services/consent/).
    APPROVAL_REQUESTED = "approval.requested", "approval.requested"
    APPROVAL_APPROVED = "approval.approved", "approval.approved"
    APPROVAL_DENIED = "approval.denied", "approval.denied"
    APPROVAL_EXPIRED = "approval.expired", "approval.expired"
    APPROVAL_USED = "approval.used", "approval.used"
    ACCESS_REQUEST_CREATED = "access_request.created", "access_request.created"
    ACCESS_REQUEST_APPROVED = "access_request.approved", "access_request.approved"
    ACCESS_REQUEST_DENIED = "access_request.denied", "access_request.denied"
    ACCESS_REQUEST_EXPIRED = "access_request.expired", "access_request.expired"
    APPROVALS_LIST = "approvals.list", "approvals.list"
    ACCESS_REQUEST_READ = "access_request.read", "access_request.read"
    # Members of an account (the people who sign in to decide).
    MEMBERS_CREATE = "members.create", "members.create"
    MEMBERS_REMOVE = "members.remove", "members.remove"
    MEMBERS_SIGN_IN = "members.sign_in", "members.sign_in"
    # Webhook endpoints (services/webhooks/).
    WEBHOOKS_CREATE = "webhooks.create", "webhooks.create"
    WEBHOOKS_UPDATE = "webhooks.update", "webhooks.update"
    WEBHOOKS_ROTATE_SECRET = "webhooks.rotate_secret", "webhooks.rotate_secret"
    WEBHOOKS_DELETE = "webhooks.delete", "webhooks.delete"


class AuditOutcome(models.TextChoices):
    SUCCESS = "success"
    REFUSED = "refused"
    ERROR = "error"
    # A brokered call whose answer was streamed: credvault cut the body before its end, or the
    # agent went away before it (services/broker/streams.py).
    CUT = "cut"
    ABANDONED = "abandoned"
    # A brokered call whose event was written before its request left and never completed:
    # its worker ended (killed, timed out) while the provider held it (services/audit.py).
    SENT = "sent"


class AuditEvent(models.Model):
    """One audited request, hash-chained per account (format in services/audit.py).

    Never holds a value or a token: the actor is a token's display prefix and an agent name.
    """

    # No index of its own: the unique (account, seq) index below starts with the account and
    # serves every lookup by account; a second index would be one more page per event written.
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="audit_events", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    occurred_at = models.DateTimeField()
    token_prefix = models.CharField(max_length=12)
    agent_name = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    service = models.CharField(max_length=64, blank=True)
    # What an operation acts on besides a service: an agent's name (agents.put, agents.delete,
    # agents.issue_token), or a token's display prefix (tokens.*, agents.revoke_token).
    target = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=16, choices=AuditOutcome.choices)
    status = models.PositiveSmallIntegerField()
    request_id = models.CharField(max_length=REQUEST_ID_MAX_LENGTH)
    # A brokered call's (agent.proxy): its method, the path as the agent spelled it (no query)
    # and the provider's status.
    method = models.CharField(max_length=7, blank=True, default="")
    path = models.CharField(max_length=2048, blank=True, default="")
    upstream_status = models.PositiveSmallIntegerField(null=True, blank=True, default=None)
    # "mcp" for a call made by the MCP server's call_api; canonical only when set.
    via = models.CharField(max_length=8, blank=True, default="")
    # The path as sent to the provider, injected values redacted (docs/agents.md#brokered-access);
    # canonical only when set.
    sent_path = models.CharField(max_length=8192, blank=True, default="")
    # `KEY_ID:HMAC` over the digest and the completion of a call's event, which is written
    # outside the chained form once the call ends (services/audit.py).
    completion_mac = models.CharField(max_length=100, blank=True, default="")
    # The member (their email) who acted, where a person signed in to credvault's pages made
    # the change (a decision on an approval); canonical only when set.
    member = models.CharField(max_length=254, blank=True, default="")
    prev_digest = models.CharField(max_length=64)
    digest = models.CharField(max_length=64)

    class Meta:
        ordering = ["account_id", "-seq"]
        constraints = [
            # Also the index of the listing: the account's events by sequence, newest first.
            models.UniqueConstraint(fields=["account", "seq"], name="uniq_audit_seq_per_account"),
        ]

    def __str__(self) -> str:
        return f"{self.account.name} #{self.seq} {self.action} {self.outcome}"

    def __repr__(self) -> str:
        return f"<AuditEvent {self.pk}: account {self.account_id}, seq {self.seq}>"


class AuditCheckpoint(models.Model):
    """A signed statement of an account's audit chain at one moment (format in
    services/checkpoints.py): its seq and digest there, and an HMAC-SHA256 over them and the
    previous checkpoint's MAC, under a key of CREDVAULT_AUDIT_KEYS that is not in the
    database. A writer of the database alone can rewrite events, but not a checkpoint."""

    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="audit_checkpoints", db_index=False
    )
    # The chain's seq and digest at the checkpoint: the event `seq` has `digest`.
    seq = models.PositiveBigIntegerField()
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    # The account's previous checkpoint's MAC ("0" * 64 for the first): checkpoints chain.
    prev_mac = models.CharField(max_length=64)
    key_id = models.CharField(max_length=32, help_text="The CREDVAULT_AUDIT_KEYS key that signed.")
    mac = models.CharField(max_length=64)

    class Meta:
        ordering = ["account_id", "-seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "seq"], name="uniq_audit_checkpoint_seq_per_account"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.account.name} checkpoint at #{self.seq}"

    def __repr__(self) -> str:
        return f"<AuditCheckpoint {self.pk}: account {self.account_id}, seq {self.seq}>"


class OAuthClient(models.Model):
    """An account's OAuth client of one provider. The client secret is sealed
    like a credential value and never shown."""

    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="oauth_clients", db_index=False
    )
    provider = models.CharField(max_length=64)
    client_id = models.CharField(max_length=512)
    key_id = models.CharField(max_length=32)
    secret_ciphertext = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["account_id", "provider"]
        verbose_name = "OAuth client"
        constraints = [
            models.UniqueConstraint(
                fields=["account", "provider"], name="uniq_oauth_client_per_account"
            ),
        ]

    def __str__(self) -> str:
        return self.provider

    def __repr__(self) -> str:
        return f"<OAuthClient {self.pk}: account {self.account_id}, {self.provider}>"


class OAuthState(models.Model):
    """A connect in progress, single-use and expiring: the digests of its start page's id, of
    its state and of the nonce in the cookie of the browser that continued it, bound to the
    account, the provider and the service it will store (services/oauth/connect.py). The PKCE
    verifier is derived from the state and SECRET_KEY, so it is stored nowhere."""

    start_digest = models.CharField(max_length=64, unique=True)
    digest = models.CharField(max_length=64, unique=True)
    browser_digest = models.CharField(max_length=64, blank=True, default="")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="oauth_states")
    provider = models.CharField(max_length=64)
    service = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["expires_at"]
        verbose_name = "OAuth state"

    def __str__(self) -> str:
        return f"{self.provider} connect"

    def __repr__(self) -> str:
        return f"<OAuthState {self.pk}: account {self.account_id}, {self.provider}>"


class Member(models.Model):
    """A person who signs in to credvault's pages for one account, to decide what its agents
    ask for: a Django user (its email is its username) tied to the account. Staff users are
    not members unless made so."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="members")
    user = models.OneToOneField(
        "auth.User", on_delete=models.CASCADE, related_name="credvault_member"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["account_id", "created_at"]

    def __str__(self) -> str:
        return self.user.email

    def __repr__(self) -> str:
        return f"<Member {self.pk}: account {self.account_id}>"


class SignInLink(models.Model):
    """A one-time link at which a member sets their password: only the SHA-256 digest of its
    secret is stored; it is used once and expires."""

    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="sign_in_links")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["member_id", "-created_at"]
        verbose_name = "sign-in link"

    def __str__(self) -> str:
        return "sign-in link"

    def __repr__(self) -> str:
        return f"<SignInLink {self.pk}: member {self.member_id}>"


class ApprovalKind(models.TextChoices):
    CALL = "call", "a brokered call"
    ACCESS = "access", "an access request"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    DENIED = "denied", "denied"
    EXPIRED = "expired", "expired"


APPROVAL_ID_PREFIX = "apv_"


def new_approval_id() -> str:
    """An approval's id: `apv_` and 128 random bits, unguessable (it names the approval page)."""
    return APPROVAL_ID_PREFIX + secrets.token_urlsafe(16)


class Approval(models.Model):
    """What an agent asks a person for: one brokered call (`call`, bound to the agent and the
    digest of its service, method, path, query and body) or more access (`access`, the grants
    asked with a reason). Decided once by a member or the account's token; pending ones live
    here, so that a restart loses none. Holds no value: the body shown is redacted of the
    account's stored values and cut, and the digest is of the request, not of a credential."""

    id = models.CharField(primary_key=True, max_length=32, default=new_approval_id)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="approvals")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="approvals")
    kind = models.CharField(max_length=8, choices=ApprovalKind.choices)
    status = models.CharField(
        max_length=8, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    created_at = models.DateTimeField(default=timezone.now)
    # Pending: until when a decision is awaited. Approved once: until when its one use may come.
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True, default=None)
    # The member's email, or the account token's display prefix, that decided.
    decided_by = models.CharField(max_length=254, blank=True, default="")
    # A call: what was asked.
    service = models.CharField(max_length=64, blank=True, default="")
    method = models.CharField(max_length=7, blank=True, default="")
    path = models.CharField(max_length=2048, blank=True, default="")
    query = models.TextField(blank=True, default="")
    body_shown = models.TextField(blank=True, default="")
    body_cut = models.BooleanField(default=False)
    digest = models.CharField(max_length=64, blank=True, default="")
    # The `approve` rule of the grant that the call matched: "allow for N minutes" lets the
    # agent's calls that match the same rule of the same service through until `allowed_until`.
    rule = models.JSONField(default=dict, blank=True)
    allowed_until = models.DateTimeField(null=True, blank=True, default=None)
    # Allowed once: when its one call used it.
    used_at = models.DateTimeField(null=True, blank=True, default=None)
    # An access request: the grants asked (as in PUT /agents), why, for how long; and what the
    # decision granted (equal to or narrower than asked).
    services = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    valid_for_minutes = models.PositiveIntegerField(null=True, blank=True, default=None)
    granted = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["account_id", "-created_at"]
        indexes = [
            models.Index(fields=["agent", "status"], name="approval_agent_status"),
            models.Index(fields=["account", "created_at"], name="approval_account_created"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=ApprovalKind.values), name="approval_kind"),
            models.CheckConstraint(
                condition=Q(status__in=ApprovalStatus.values), name="approval_status"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"<Approval {self.id}: account {self.account_id}, {self.kind} {self.status}>"


# Events: signed webhooks sent from an outbox (services/webhooks/).

WEBHOOK_ID_PREFIX = "wh_"
EVENT_ID_PREFIX = "evt_"


def new_webhook_id() -> str:
    """An endpoint's id: `wh_` and 96 random bits."""
    return WEBHOOK_ID_PREFIX + secrets.token_urlsafe(12)


def new_event_id() -> str:
    """An event's id, its `webhook-id` on every attempt: `evt_` and 128 random bits."""
    return EVENT_ID_PREFIX + secrets.token_urlsafe(16)


class WebhookEndpoint(models.Model):
    """Where an account's events are sent: an https URL (or a host the operator allows), the
    event types it takes (empty: all), and whether it is enabled. Its signing secrets are
    `WebhookSecret` rows. `lease_until` and `lease_owner` say which worker sends its
    deliveries now (services/webhooks/worker.py); `failing_since` is the first failure after
    its last success."""

    id = models.CharField(primary_key=True, max_length=32, default=new_webhook_id)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list, blank=True)
    description = models.CharField(max_length=500, blank=True, default="")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    failing_since = models.DateTimeField(null=True, blank=True, default=None)
    lease_until = models.DateTimeField(null=True, blank=True, default=None)
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["account_id", "created_at"]
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"<WebhookEndpoint {self.id}: account {self.account_id}>"


class WebhookSecret(models.Model):
    """An endpoint's signing secret, sealed like a credential value (services/sealed.py). The
    current one has no `expires_at`; after a rotation the previous one signs too until its
    `expires_at` (24 hours)."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="secrets")
    key_id = models.CharField(max_length=32)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["endpoint_id", "-created_at"]
        verbose_name = "webhook secret"

    def __str__(self) -> str:
        return f"secret of {self.endpoint_id}"

    def __repr__(self) -> str:
        return f"<WebhookSecret {self.pk}: endpoint {self.endpoint_id}>"


class WebhookSequence(models.Model):
    """The last event `sequence` of an account, raised in place by the worker that publishes
    its events."""

    account = models.OneToOneField(
        Account, on_delete=models.CASCADE, primary_key=True, related_name="webhook_sequence"
    )
    last = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.account_id}: {self.last}"


class WebhookEvent(models.Model):
    """One event of the outbox, written in the transaction of the change that caused it. Its
    `data` holds no value, token or digest. A worker publishes it: gives it the account's next
    `sequence` and a delivery to each endpoint that takes it."""

    id = models.CharField(primary_key=True, max_length=32, default=new_event_id)
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="webhook_events", db_index=False
    )
    sequence = models.PositiveBigIntegerField(null=True, blank=True, default=None)
    type = models.CharField(max_length=64)
    data = models.JSONField(default=dict)
    occurred_at = models.DateTimeField()

    class Meta:
        ordering = ["account_id", "sequence"]
        verbose_name = "webhook event"
        constraints = [
            models.UniqueConstraint(
                fields=["account", "sequence"], name="uniq_webhook_event_sequence"
            ),
        ]
        indexes = [
            models.Index(
                fields=["occurred_at"],
                name="webhook_event_unpublished",
                condition=Q(sequence__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.sequence}"

    def __repr__(self) -> str:
        return f"<WebhookEvent {self.id}: account {self.account_id}, {self.type}>"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"


class WebhookDelivery(models.Model):
    """One event to one endpoint: pending until a 2xx (delivered) or the last attempt of the
    schedule (failed). `sequence` is the event's, copied for the endpoint's ordering."""

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    sequence = models.PositiveBigIntegerField()
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True, default=None)
    last_error = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["endpoint_id", "sequence"]
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["endpoint", "state", "sequence"], name="webhook_delivery_queue"),
            models.Index(fields=["state", "next_attempt_at"], name="webhook_delivery_due"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "endpoint"], name="uniq_webhook_delivery_per_endpoint"
            ),
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="webhook_delivery_state"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} to {self.endpoint_id}"

    def __repr__(self) -> str:
        return f"<WebhookDelivery {self.pk}: {self.event_id} to {self.endpoint_id}>"


class WebhookAttempt(models.Model):
    """One attempt of a delivery, for the endpoint's deliveries log: the answer's status or
    the failure's kind, how long it took, when the next attempt is due. Never a body."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="attempts", db_index=False
    )
    attempted_at = models.DateTimeField()
    status = models.PositiveSmallIntegerField(null=True, blank=True, default=None)
    error = models.CharField(max_length=200, blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, default=None)

    class Meta:
        ordering = ["endpoint_id", "-id"]
        verbose_name = "webhook attempt"
        indexes = [models.Index(fields=["endpoint", "-id"], name="webhook_attempt_log")]

    def __str__(self) -> str:
        return f"attempt of {self.delivery_id}"

    def __repr__(self) -> str:
        return f"<WebhookAttempt {self.pk}: delivery {self.delivery_id}>"


class DataKey(models.Model):
    """One version of an account's data key (AES-256), stored only wrapped by the
    key-encryption key of a key manager (services/keys/). The account's values name the
    version that sealed them (`key_id` `dk_<id>.<version>`); the newest version seals. The
    canary's key has no account."""

    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, null=True, blank=True, related_name="data_keys"
    )
    key_id = models.CharField(max_length=24)
    version = models.PositiveIntegerField()
    wrapped = models.BinaryField()
    wrapped_by = models.CharField(
        max_length=300, help_text="The key-encryption key that wrapped it: manager:key."
    )
    created_at = models.DateTimeField(default=timezone.now)
    wrapped_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["account_id", "version"]
        verbose_name = "data key"
        constraints = [
            models.UniqueConstraint(fields=["key_id", "version"], name="uniq_data_key_version"),
            models.UniqueConstraint(
                fields=["account", "version"], name="uniq_data_key_version_per_account"
            ),
        ]
        indexes = [models.Index(fields=["wrapped_by"], name="data_key_wrapped_by")]

    def __str__(self) -> str:
        return self.reference

    def __repr__(self) -> str:
        return f"<DataKey {self.reference}: account {self.account_id}>"

    @property
    def reference(self) -> str:
        """What a sealed value's `key_id` holds: the data key's id and version."""
        return f"{self.key_id}.{self.version}"


class KeyCanary(models.Model):
    """A known value sealed by the canary's data key: a worker opens it at start-up, and
    /readyz, to prove the key manager unwraps what the database holds."""

    key_id = models.CharField(max_length=32)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "key canary"

    def __str__(self) -> str:
        return "key canary"

    def __repr__(self) -> str:
        return f"<KeyCanary {self.pk}>"


class Reencryption(models.Model):
    """A run of `reencrypt`: every value sealed before `started_at`'s new data keys is sealed
    again; an interrupted run is finished by the next (`finished_at` still empty)."""

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True, default=None)

    class Meta:
        verbose_name = "re-encryption"

    def __str__(self) -> str:
        return f"re-encryption of {self.started_at:%Y-%m-%d %H:%M}"

    def __repr__(self) -> str:
        return f"<Reencryption {self.pk}>"
