"""The shapes of the API's bodies, one declaration each: drf-spectacular writes the OpenAPI
document from them, `parsing` compiles the input ones into a strict reader (exact members, JSON
types, lengths, patterns: DRF's own validation coerces and trims), `rendering` the output ones
into response builders (a field's `source`, or a serializer's `show_<name>`). A serializer's
docstring is its component's description. The document states the input as sent, not as
normalized: a service identifier has no pattern there.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.utils.functional import lazy
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from providers.catalog import CATEGORIES
from providers.graphql_operations import MAX_NAME_CHARS, NAME_PATTERN
from providers.identifiers import (
    KEY_NAME_RULE,
    KEY_NAME_SCHEMA_PATTERN,
    NORMALIZATION_RULE,
    OAUTH_MARKERS_TEXT,
    SERVICE_RULE,
)
from providers.listing import shapes_text
from providers.verification import Reason
from services.bearer_tokens import MAX_LIFETIME_DAYS
from services.consent.access import MAX_REASON_CHARS, MAX_VALID_MINUTES, grants_of
from services.consent.approvals import MAX_ALLOW_MINUTES, approval_url
from services.exceptions import FieldErrorCode, problem_code_choices
from services.grants import (
    GRANT_PATH_PATTERN,
    GRANT_PATH_RULE,
    GRAPHQL_NAME_RULE,
    MAX_APPROVE_RULES,
    MAX_GRANT_MUTATIONS,
    MAX_GRANT_PATH_CHARS,
    MAX_GRANT_PATHS,
    MAX_GRANTS,
    GrantSpec,
)
from services.models import (
    PROXY_METHODS,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    AuditAction,
    AuditEvent,
    AuditOutcome,
    GrantAccess,
    KeyType,
    ServiceStatus,
)
from services.webhooks.events import EVENT_TYPES

MAX_CREDENTIALS = 20
MAX_VALUE_CHARS = 16_384
# Any text without NUL: the escape reads the same in Python's re and in ECMA-262 (JSON Schema).
NO_NUL_PATTERN = r"^[^\u0000]*$"

# The closed sets, as (value, description) choices. ENUM_NAME_OVERRIDES (settings) names each
# after its choices, so that each is one named enum in the document.
REASON_CHOICES = [
    (Reason.ACCEPTED.value, "the provider accepted the set at its own endpoint (ok, verified)"),
    (Reason.REJECTED.value, "the provider refused it (not ok)"),
    (
        Reason.PROVIDER_UNAVAILABLE.value,
        "a timeout, a connection error, a redirect, 429, 5xx or another answer (not ok)",
    ),
    (
        Reason.NO_VERIFIER.value,
        "a custom service, or no check for the shape: nothing was asked (ok, not verified)",
    ),
]
PROBLEM_CODES = problem_code_choices()
FIELD_ERROR_CODES = [(code.value, code.value) for code in FieldErrorCode]
CATEGORY_CHOICES = [(category, category) for category in CATEGORIES]

SERVICE_INPUT = (
    f"Any text that normalizes to a service identifier. {NORMALIZATION_RULE}; the result must "
    f"be {SERVICE_RULE}. For example ` GitHub ` and fullwidth "
    "`\uff27\uff49\uff54\uff28\uff55\uff42` become `github`, `Google Drive` becomes "
    "`google-drive`; `../etc` is refused (400 invalid_service)."
)


def _credentials_text() -> str:
    return (
        f"1 to {MAX_CREDENTIALS} entries. Each keyName at most once: a repeated keyName is "
        "400 with the field error `duplicate` (uniqueItems cannot say this of one member). "
        f"The keyType follows: `oauth` when the set holds {OAUTH_MARKERS_TEXT}, "
        "else `api_key`. A service of the catalog takes only one of its shapes below "
        "(required keyNames, + optional ones; anything else is 400 naming the missing or "
        "unexpected keyName; GET /api/v1/providers gives the same as data). Any other "
        "service takes any keyNames.\n\n" + shapes_text()
    )


class ServiceIdentifierField(serializers.CharField):
    """A service identifier or agent name as sent, normalized (or refused) by the domain; no
    maximum length, as surrounding whitespace may make an accepted one as long as the body."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("help_text", SERVICE_INPUT)
        super().__init__(min_length=1, trim_whitespace=False, **kwargs)


class RevealedField(serializers.CharField):
    """A secret's value, revealed in the output (an opened set's value to its agent)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)


class ConnectedServiceSerializer(serializers.Serializer):
    service = serializers.CharField(help_text="Normalized service identifier.")
    connectedAt = serializers.DateTimeField(
        help_text="RFC 3339 UTC time of the most recent successful store, e.g. "
        "2026-11-21T09:30:12.345678Z.",
    )
    keyType = serializers.ChoiceField(choices=KeyType.choices)


class ListedServiceSerializer(ConnectedServiceSerializer):
    status = serializers.ChoiceField(
        choices=ServiceStatus.choices,
        help_text="`reauthorization_required` when the provider refused to refresh an OAuth "
        "set: the person connects the service again.",
    )


class CredentialEntrySerializer(serializers.Serializer):
    keyName = serializers.RegexField(
        KEY_NAME_SCHEMA_PATTERN,
        help_text="Lowercase snake case; `api_key` for an API key.",
        error_messages={"invalid": KEY_NAME_RULE},
    )
    value = serializers.CharField(
        min_length=1,
        max_length=MAX_VALUE_CHARS,
        trim_whitespace=False,
        validators=[RegexValidator(NO_NUL_PATTERN)],
        error_messages={"invalid": "Must not contain NUL."},
        help_text=f"The secret: 1 to {MAX_VALUE_CHARS} characters, no NUL, kept byte for byte; "
        "never returned by the account API.",
    )


class CredentialInputSerializer(serializers.Serializer):
    """A credential set to test or store: exactly these two members."""

    service = ServiceIdentifierField()
    # many=True passes these to DRF's ListSerializer; the stubs type the child's arguments.
    credentials = CredentialEntrySerializer(  # type: ignore[call-arg]
        many=True,
        min_length=1,
        max_length=MAX_CREDENTIALS,
        help_text=lazy(_credentials_text, str)(),
    )
    # Members of the entries that must differ between entries (`parsing.shape_errors`).
    unique_items = {"credentials": "keyName"}


class VerificationResultSerializer(serializers.Serializer):
    """The verdict of a test; nothing is stored."""

    ok = serializers.BooleanField()
    verified = serializers.BooleanField()
    reason = serializers.ChoiceField(choices=REASON_CHOICES)


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="Where, e.g. credentials[1].keyName.")
    code = serializers.ChoiceField(choices=FIELD_ERROR_CODES)
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details; 422 verification_failed adds `reason`."""

    type = serializers.CharField(default="about:blank")
    title = serializers.CharField(help_text="The HTTP reason phrase.")
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.ChoiceField(choices=PROBLEM_CODES, help_text="Machine-readable code.")
    # DRF's metaclass takes declared fields out of the class: no clash with Serializer.errors.
    errors = FieldErrorSerializer(many=True, required=False)  # type: ignore[assignment]
    reason = serializers.ChoiceField(
        choices=REASON_CHOICES,
        required=False,
        help_text="With 422 verification_failed: why the provider did not accept the set "
        "(never `accepted`).",
    )


class ProviderShapeSerializer(serializers.Serializer):
    keyType = serializers.ChoiceField(choices=KeyType.choices)
    # As `errors` above: a declared field, not Field.required.
    required = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]
    optional = serializers.ListField(child=serializers.CharField())
    verifiable = serializers.BooleanField(
        help_text="Whether a set of this shape is checked at the provider (else no_verifier)."
    )


class ProviderSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The service identifier to store credentials under.")
    name = serializers.CharField()
    category = serializers.ChoiceField(choices=CATEGORY_CHOICES)
    shapes = ProviderShapeSerializer(many=True)


def _grant_paths(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(
            max_length=MAX_GRANT_PATH_CHARS,
            validators=[RegexValidator(GRANT_PATH_PATTERN, GRANT_PATH_RULE)],
        ),
        min_length=1,
        max_length=MAX_GRANT_PATHS,
        required=False,
        **kwargs,
    )


class ApproveRuleSerializer(serializers.Serializer):
    """Calls of a grant that need a person's approval: those of these methods under these
    path prefixes. Without `methods` the rule covers every method, without `paths` every
    path: `{}` covers every call of the grant."""

    methods = serializers.ListField(
        child=serializers.ChoiceField(choices=PROXY_METHODS),
        min_length=1,
        max_length=len(PROXY_METHODS),
        required=False,
        help_text="Some of the grant's own methods, upper case; absent: every method.",
    )
    paths = _grant_paths(
        help_text="Path prefixes, matched by whole segments as a grant's are; absent: every "
        "path. A sensitive endpoint named here is open to approved calls only."
    )


APPROVE_TEXT = (
    "Calls that need a person's approval: a brokered call that matches one of these rules is "
    "answered 403 approval_required (with the approval's page) until a member of the account "
    f"allows it. At most {MAX_APPROVE_RULES} rules; a call goes under the first it matches."
)


class GrantSerializer(serializers.Serializer):
    """One grant of an agent: a service and what the agent may do with it. `expiresAt` and
    `approve` appear only when set."""

    service = serializers.CharField(help_text="Normalized service identifier.")
    access = serializers.ChoiceField(choices=GrantAccess.choices)
    methods = serializers.ListField(
        child=serializers.ChoiceField(choices=PROXY_METHODS),
        help_text="HTTP methods allowed through the proxy.",
    )
    paths = serializers.ListField(
        child=serializers.CharField(), help_text="Path prefixes allowed through the proxy."
    )
    graphql = serializers.ListField(
        child=serializers.CharField(),
        help_text="The sensitive GraphQL mutations of the service allowed by name (none by "
        "default).",
    )
    base = serializers.CharField(
        required=False,
        help_text="The one base of the service the grant covers (`router`: "
        "`/proxy/huggingface~router/...`; `host`: `/proxy/pinecone~host/{host}/...`); absent "
        "when it covers every base.",
    )
    expiresAt = serializers.DateTimeField(
        required=False,
        help_text="When the grant expires: past it, it refuses as if absent (403 not_granted, "
        "the detail saying it expired); absent when it does not expire.",
    )
    approve = serializers.ListField(
        child=ApproveRuleSerializer(),
        required=False,
        help_text=APPROVE_TEXT + " Absent when no call needs one.",
    )

    @staticmethod
    def show_approve(grant: GrantSpec) -> list[dict[str, list[str]]]:
        return [rule.as_json() for rule in grant.approve]


class GrantInputSerializer(serializers.Serializer):
    """A grant with its options; each option left out takes its default."""

    service = ServiceIdentifierField()
    access = serializers.ChoiceField(
        choices=GrantAccess.choices,
        required=False,
        help_text="proxy (the default): brokered calls only; read: also the plaintext read.",
    )
    methods = serializers.ListField(
        child=serializers.ChoiceField(choices=PROXY_METHODS),
        min_length=1,
        max_length=len(PROXY_METHODS),
        required=False,
        help_text="HTTP methods allowed through the proxy, upper case; default all six.",
    )
    paths = _grant_paths(
        help_text="Path prefixes allowed through the proxy, matched by whole segments; "
        "default ['/']."
    )
    base = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=32,
        help_text="Only this base of the service: a name of its other bases (`router`, "
        "reached at `/proxy/huggingface~router/...`), or `host` for the hosts of its host "
        "pattern (`/proxy/pinecone~host/{host}/...`); the API base and every other base are "
        "then refused. Default: every base.",
    )
    graphql = serializers.ListField(
        child=serializers.CharField(
            max_length=MAX_NAME_CHARS,
            validators=[RegexValidator(NAME_PATTERN, GRAPHQL_NAME_RULE)],
        ),
        max_length=MAX_GRANT_MUTATIONS,
        required=False,
        help_text="Sensitive GraphQL mutations of the service (those its catalog entry lists: "
        "API keys, OAuth clients, webhooks, members, invitations) allowed by name; default "
        "none, so that every other operation passes and these are refused (403 "
        "sensitive_endpoint).",
    )
    expiresAt = serializers.DateTimeField(
        required=False,
        help_text="When the grant expires, RFC 3339 with its offset "
        "(`2026-12-01T09:00:00Z`), in the future; past it, the grant refuses as if absent. "
        "Default: never.",
    )
    approve = serializers.ListField(
        child=ApproveRuleSerializer(),
        max_length=MAX_APPROVE_RULES,
        required=False,
        help_text=APPROVE_TEXT + " Default: none.",
    )


class GrantEntryField(serializers.Field):
    """A grant as sent: a service identifier or a grant object (`oneOf` in the document)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ServiceIdentifierField()
        self.grant = GrantInputSerializer()


class AgentSerializer(serializers.Serializer):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField()
    services = GrantSerializer(many=True, help_text="The agent's grants, sorted by service.")


class AgentInputSerializer(serializers.Serializer):
    """An agent's grants: exactly this one member."""

    services = serializers.ListField(
        child=GrantEntryField(),
        max_length=MAX_GRANTS,
        help_text=f"The complete set of grants, at most {MAX_GRANTS}; replaces the earlier "
        "grants. Each is a service identifier (brokered access, every method, every path) or "
        "an object with options. Two grants of one service (after normalization) are refused.",
    )


class AgentTokenInputSerializer(serializers.Serializer):
    """Options of a new agent token; the body may be left out."""

    expiresInDays = serializers.IntegerField(
        min_value=1,
        max_value=MAX_LIFETIME_DAYS,
        required=False,
        help_text=f"1 to {MAX_LIFETIME_DAYS} days; no expiry when absent.",
    )


class AgentTokenSerializer(serializers.Serializer):
    token = serializers.CharField(
        source="plaintext", help_text="cva_ token, shown only in this response."
    )
    prefix = serializers.CharField(source="token.prefix")
    expiresAt = serializers.DateTimeField(allow_null=True, source="token.expires_at")


class AgentTokenInfoSerializer(serializers.Serializer):
    prefix = serializers.CharField(help_text="The display prefix: cva_ and 8 characters.")
    createdAt = serializers.DateTimeField()
    lastUsedAt = serializers.DateTimeField(allow_null=True)
    expiresAt = serializers.DateTimeField(allow_null=True)
    revokedAt = serializers.DateTimeField(allow_null=True)


# Rendered from an opened set's (keyName, value) pairs.
class AgentCredentialSerializer(serializers.Serializer):
    keyName = serializers.CharField(source="0")
    value = RevealedField(source="1")


class AgentCredentialsSerializer(serializers.Serializer):
    service = serializers.CharField()
    keyType = serializers.ChoiceField(choices=KeyType.choices)
    connectedAt = serializers.DateTimeField()
    credentials = AgentCredentialSerializer(many=True, source="fields")


class AuditEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="Position in the account's chain, from 1.")
    time = serializers.DateTimeField(source="occurred_at")
    tokenPrefix = serializers.CharField()
    agent = serializers.CharField(allow_null=True, source="agent_name")
    action = serializers.ChoiceField(choices=AuditAction.choices)
    service = serializers.CharField(allow_null=True)
    target = serializers.CharField(allow_null=True, help_text="The agent acted on, if any.")
    outcome = serializers.ChoiceField(choices=AuditOutcome.choices)
    status = serializers.IntegerField(
        allow_null=True,
        help_text="The status the request was answered with; null for a brokered call that "
        "left credvault and whose end was never recorded (outcome `sent`: its worker ended "
        "while the provider held it).",
    )
    requestId = serializers.CharField()
    method = serializers.CharField(allow_null=True, help_text="A brokered call's method.")
    path = serializers.CharField(
        allow_null=True,
        help_text="A brokered call's path as the agent spelled it (after the service), without "
        "its query.",
    )
    upstreamStatus = serializers.IntegerField(
        allow_null=True,
        help_text="A brokered call's status from the provider, if it answered.",
    )
    via = serializers.CharField(
        allow_null=True,
        help_text="`mcp` for a brokered call made through the MCP server's call_api; else null.",
    )
    sentPath = serializers.CharField(
        allow_null=True,
        help_text="A brokered call's path as it was sent to the provider (the API base's "
        "path, the credential's path prefix with every injected value redacted, the agent's "
        "path encoded again; no query), beside `path`, the agent's spelling; null for a call "
        "that was never sent and for other events.",
    )

    @staticmethod
    def show_status(event: AuditEvent) -> int | None:
        # A call whose completion was never written (`sent`) has no status yet.
        return None if event.outcome == AuditOutcome.SENT else event.status


# Rendered from `audit.page`'s (events, the seq of the next page's cursor).
class AuditPageSerializer(serializers.Serializer):
    events = AuditEventSerializer(many=True, source="0")
    next = serializers.CharField(
        allow_null=True,
        source="1",
        help_text="Pass as `before` for the next page; null on the last.",
    )


# --- OAuth -----------------------------------------------------------------------

MAX_OAUTH_SCOPES = 50


class OAuthClientInputSerializer(serializers.Serializer):
    clientId = serializers.CharField(
        min_length=1, max_length=512, trim_whitespace=False, help_text="The OAuth app's client id."
    )
    clientSecret = serializers.CharField(
        min_length=1,
        max_length=MAX_VALUE_CHARS,
        trim_whitespace=False,
        help_text="The OAuth app's client secret: sealed, never returned.",
    )


class OAuthClientSerializer(serializers.Serializer):
    provider = serializers.CharField(help_text="Catalog provider id.")
    clientId = serializers.CharField()
    createdAt = serializers.DateTimeField(help_text="RFC 3339 UTC time it was stored.")


class ConnectInputSerializer(serializers.Serializer):
    """Options of a connect; the body may be left out."""

    scopes = serializers.ListField(
        child=serializers.CharField(min_length=1, max_length=256, trim_whitespace=False),
        max_length=MAX_OAUTH_SCOPES,
        required=False,
        help_text="The scopes to ask for; the catalog's defaults when absent.",
    )
    service = ServiceIdentifierField(
        required=False,
        help_text="The service identifier the set is stored as; the provider's id when absent.",
    )


class ConnectSerializer(serializers.Serializer):
    authorizeUrl = serializers.CharField(help_text="Where to send the person's browser.")
    expiresAt = serializers.DateTimeField(help_text="When the link stops working (10 minutes).")


# --- Consent: approvals and access requests ---------------------------------------------------


class AccessRequestInputSerializer(serializers.Serializer):
    """An agent's request for more access: the grants it asks for, why, and for how long."""

    services = serializers.ListField(
        child=GrantEntryField(),
        min_length=1,
        max_length=MAX_GRANTS,
        help_text="The grants asked for, as PUT /api/v1/agents/{name} takes them; each "
        "replaces the agent's grant of its service when approved (its `approve` rules kept).",
    )
    reason = serializers.CharField(
        min_length=1,
        max_length=MAX_REASON_CHARS,
        trim_whitespace=False,
        validators=[RegexValidator(NO_NUL_PATTERN)],
        error_messages={"invalid": "Must not contain NUL."},
        help_text=f"Why, for the person who decides: 1 to {MAX_REASON_CHARS} characters.",
    )
    validForMinutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_VALID_MINUTES,
        required=False,
        help_text=f"For how long, 1 to {MAX_VALID_MINUTES} minutes (a year); for good when absent.",
    )


class ApproveInputSerializer(serializers.Serializer):
    """A decision to approve; the body may be left out (a call: allowed once; an access
    request: as asked). A call takes only `allowForMinutes`, an access request only
    `services` and `validForMinutes` (the other kind's member is 400)."""

    allowForMinutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_ALLOW_MINUTES,
        required=False,
        help_text=f"A call: allow the agent's calls that match the same `approve` rule for 1 to "
        f"{MAX_ALLOW_MINUTES} minutes; absent: allow this one call once.",
    )
    services = serializers.ListField(
        child=GrantEntryField(),
        min_length=1,
        max_length=MAX_GRANTS,
        required=False,
        help_text="An access request: the grants given, equal to or narrower than those asked "
        "(each service asked, methods, paths, GraphQL mutations and base within the asked "
        "ones, `read` only if asked; wider is 400 `wider_than_asked`); absent: as asked.",
    )
    validForMinutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_VALID_MINUTES,
        required=False,
        help_text="An access request: the grants expire after this many minutes, at most as "
        "many as asked; absent: as asked (for good when the agent asked for no limit).",
    )


def _approval_link(approval: Approval) -> str:
    return approval_url(approval.id)


def _asked(approval: Approval) -> list[GrantSpec]:
    return grants_of(approval.services)


def _granted(approval: Approval) -> list[GrantSpec]:
    return grants_of(approval.granted)


class AccessRequestCreatedSerializer(serializers.Serializer):
    """An access request as made: it waits for a member's decision at `approvalUrl`."""

    id = serializers.CharField(help_text="The access request's id (`apv_...`).")
    status = serializers.ChoiceField(choices=ApprovalStatus.choices)
    approvalUrl = serializers.CharField(help_text="The page at which a member decides.")
    expiresAt = serializers.DateTimeField(help_text="Until when it waits for a decision (24 h).")

    show_approvalUrl = staticmethod(_approval_link)


class AccessRequestSerializer(AccessRequestCreatedSerializer):
    """An agent's access request as the agent sees it: what it asked and, once approved, what
    it was granted."""

    services = GrantSerializer(many=True, help_text="The grants asked for.")
    reason = serializers.CharField()
    validForMinutes = serializers.IntegerField(
        required=False, help_text="For how long it asked; absent: for good."
    )
    decidedAt = serializers.DateTimeField(required=False, allow_null=True)
    granted = GrantSerializer(
        many=True, required=False, help_text="Approved: the grants the agent now holds."
    )
    allowedUntil = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="Approved for a time: when the granted grants expire; absent: for good.",
    )

    show_services = staticmethod(_asked)
    show_granted = staticmethod(_granted)


class ApprovalSerializer(serializers.Serializer):
    """An approval of a brokered call (`kind` call: its service, method, path, query and body
    as shown to the person) or an agent's access request (`kind` access: the grants asked, the
    reason, for how long), with its decision once made. A member left out is empty."""

    id = serializers.CharField(help_text="The approval's id (`apv_...`).")
    kind = serializers.ChoiceField(choices=ApprovalKind.choices)
    agent = serializers.CharField(source="agent.name", help_text="The agent that asked.")
    status = serializers.ChoiceField(choices=ApprovalStatus.choices)
    createdAt = serializers.DateTimeField()
    expiresAt = serializers.DateTimeField(
        help_text="Pending: until when it waits for a decision. A call allowed once: until "
        "when its one call may come; for N minutes: when that ends."
    )
    approvalUrl = serializers.CharField(help_text="The page at which a member decides.")
    service = serializers.CharField(required=False, help_text="A call: the service.")
    method = serializers.CharField(required=False, help_text="A call: its method.")
    path = serializers.CharField(
        required=False, help_text="A call: its path as the agent spelled it after the service."
    )
    query = serializers.CharField(
        required=False, help_text="A call: its query string, the account's stored values redacted."
    )
    body = serializers.CharField(
        source="body_shown",
        required=False,
        help_text="A call: its body, the account's stored values redacted, cut at 4 KiB.",
    )
    bodyCut = serializers.BooleanField(required=False, help_text="A call: the body was cut.")
    services = GrantSerializer(
        many=True, required=False, help_text="An access request: the grants asked for."
    )
    reason = serializers.CharField(required=False, help_text="An access request: why.")
    validForMinutes = serializers.IntegerField(
        required=False, help_text="An access request: for how long it asked; absent: for good."
    )
    decidedAt = serializers.DateTimeField(required=False, allow_null=True)
    decidedBy = serializers.CharField(
        required=False, help_text="The member's email, or the account token's prefix."
    )
    allowedUntil = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="A call allowed for N minutes, or an access request approved for a time: "
        "until when.",
    )
    usedAt = serializers.DateTimeField(
        required=False, allow_null=True, help_text="A call allowed once: when its call used it."
    )
    granted = GrantSerializer(
        many=True, required=False, help_text="An access request approved: the grants given."
    )

    show_approvalUrl = staticmethod(_approval_link)
    show_services = staticmethod(_asked)
    show_granted = staticmethod(_granted)


# --- Webhooks ------------------------------------------------------------------------

MAX_WEBHOOK_URL_CHARS = 2048
MAX_WEBHOOK_DESCRIPTION_CHARS = 500
MAX_WEBHOOK_EVENT_TYPES = 50


@extend_schema_field({"type": "string", "enum": list(EVENT_TYPES)})
class EventTypeField(serializers.CharField):
    """An event type: the document states the enum of `EVENT_TYPES`. As input the strict
    reader checks a text of 1 to 64 characters; one outside the enum is refused by the
    business rule with 400 `unknown_event_type` naming `events`, not as a shape error."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_length=1, max_length=64, trim_whitespace=False, **kwargs)


def _event_types_field(*, required: bool) -> serializers.ListField:
    return serializers.ListField(
        child=EventTypeField(),
        max_length=MAX_WEBHOOK_EVENT_TYPES,
        required=required,
        help_text="The event types sent to it (docs/webhooks.md); empty or absent: every type. "
        "A type outside the list is 400 `unknown_event_type`.",
    )


class WebhookInputSerializer(serializers.Serializer):
    url = serializers.CharField(
        min_length=1,
        max_length=MAX_WEBHOOK_URL_CHARS,
        trim_whitespace=False,
        help_text="An https URL of a public host (or a host CREDVAULT_WEBHOOK_ALLOWED_HOSTS "
        "names).",
    )
    events = _event_types_field(required=False)
    description = serializers.CharField(
        max_length=MAX_WEBHOOK_DESCRIPTION_CHARS, required=False, allow_blank=True
    )


class WebhookChangeSerializer(serializers.Serializer):
    """What a PATCH changes; an absent member stays as it is."""

    url = serializers.CharField(
        min_length=1, max_length=MAX_WEBHOOK_URL_CHARS, trim_whitespace=False, required=False
    )
    events = _event_types_field(required=False)
    description = serializers.CharField(
        max_length=MAX_WEBHOOK_DESCRIPTION_CHARS, required=False, allow_blank=True
    )
    enabled = serializers.BooleanField(
        required=False, help_text="`true` resumes an endpoint that was disabled."
    )


class WebhookSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The endpoint's id, `wh_...`.")
    url = serializers.CharField()
    events = serializers.ListField(
        child=EventTypeField(), help_text="The event types sent to it; empty: every type."
    )
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    disabledReason = serializers.CharField(
        allow_null=True, help_text="Why it was disabled (410, 5 days of failures, or by PATCH)."
    )
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class WebhookCreatedSerializer(serializers.Serializer):
    id = serializers.CharField(source="endpoint.id")
    url = serializers.CharField(source="endpoint.url")
    events = serializers.ListField(
        child=EventTypeField(),
        source="endpoint.events",
        help_text="The event types sent to it; empty: every type.",
    )
    description = serializers.CharField(source="endpoint.description")
    enabled = serializers.BooleanField(source="endpoint.enabled")
    secret = serializers.CharField(
        help_text="The signing secret, `whsec_` and base64: shown once, never again."
    )
    createdAt = serializers.DateTimeField(source="created_at")


class WebhookSecretSerializer(serializers.Serializer):
    id = serializers.CharField(source="endpoint.id")
    secret = serializers.CharField(
        help_text="The new signing secret, shown once; the previous one signs too for 24 hours."
    )
    createdAt = serializers.DateTimeField(source="created_at")


class WebhookTestSerializer(serializers.Serializer):
    eventId = serializers.CharField(source="id", help_text="The test event's id, `evt_...`.")
    type = EventTypeField(help_text="`webhook.test`.")


class WebhookRedeliverySerializer(serializers.Serializer):
    eventId = serializers.CharField(source="0")
    queued = serializers.IntegerField(source="1", help_text="Deliveries queued again.")


class WebhookAttemptSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The attempt's id, a `before` cursor.")
    eventId = serializers.CharField(source="delivery.event_id")
    type = EventTypeField(source="delivery.event.type")
    status = serializers.IntegerField(allow_null=True, help_text="The answer's status.")
    error = serializers.CharField(
        allow_null=True, help_text="Without an answer: timeout, unavailable, address_refused..."
    )
    durationMs = serializers.IntegerField()
    time = serializers.DateTimeField(source="attempted_at")
    nextAttemptAt = serializers.DateTimeField(allow_null=True)


class WebhookAttemptPageSerializer(serializers.Serializer):
    deliveries = WebhookAttemptSerializer(many=True, source="0")
    next = serializers.CharField(
        allow_null=True,
        source="1",
        help_text="Pass as `before` for the next page; null on the last.",
    )
