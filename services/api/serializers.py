"""Serializers that describe the API in the OpenAPI document.

Input is read by `parsing.py` (strict JSON, exact members, byte-exact values), which the REST
framework's serializers cannot do (they coerce types and trim strings); output is built from
plain dicts. These classes keep the schema true to both.
"""

from __future__ import annotations

from rest_framework import serializers

from services.identifiers import SERVICE_SCHEMA_PATTERN
from services.models import KeyType

NORMALIZATION = (
    "Normalized by NFKC, trimming, lowercasing and turning each run of whitespace or _ into "
    "-; the pattern is that of the normalized form."
)


def service_field(**kwargs) -> serializers.RegexField:
    return serializers.RegexField(
        SERVICE_SCHEMA_PATTERN, min_length=1, max_length=64, help_text=NORMALIZATION, **kwargs
    )


class ConnectedServiceSerializer(serializers.Serializer):
    service = serializers.CharField(help_text="Normalized service identifier.")
    connectedAt = serializers.DateTimeField(
        help_text="RFC 3339 UTC time of the most recent successful store, e.g. "
        "2026-11-21T09:30:12.345678Z."
    )
    keyType = serializers.ChoiceField(choices=KeyType.values)


class CredentialEntrySerializer(serializers.Serializer):
    keyName = serializers.RegexField(
        r"^[a-z][a-z0-9_]{0,63}$", help_text="Lowercase snake case; `api_key` for an API key."
    )
    value = serializers.CharField(
        min_length=1,
        max_length=16384,
        trim_whitespace=False,
        help_text="The secret, kept byte for byte; never returned.",
    )


class CredentialInputSerializer(serializers.Serializer):
    service = service_field()
    credentials = CredentialEntrySerializer(many=True, min_length=1, max_length=20)


class TestResultSerializer(serializers.Serializer):
    __test__ = False  # not a pytest test class
    ok = serializers.BooleanField()
    verified = serializers.BooleanField()
    reason = serializers.ChoiceField(
        choices=["accepted", "rejected", "provider_unavailable", "no_verifier"]
    )


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="Where, e.g. credentials[1].keyName.")
    code = serializers.CharField()
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details; 422 verification_failed adds `reason`."""

    type = serializers.CharField(default="about:blank")
    title = serializers.CharField(help_text="The HTTP reason phrase.")
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Machine-readable problem code.")
    errors = FieldErrorSerializer(many=True, required=False)
    reason = serializers.ChoiceField(
        choices=["rejected", "provider_unavailable", "no_verifier"],
        required=False,
        help_text="With 422 verification_failed: why the provider did not accept the set.",
    )


class ProviderShapeSerializer(serializers.Serializer):
    keyType = serializers.ChoiceField(choices=KeyType.values)
    required = serializers.ListField(child=serializers.CharField())
    optional = serializers.ListField(child=serializers.CharField())
    verifiable = serializers.BooleanField(
        help_text="Whether a set of this shape is checked at the provider (else no_verifier)."
    )


class ProviderSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The service identifier to store credentials under.")
    name = serializers.CharField()
    category = serializers.ChoiceField(
        choices=["ai", "developer", "messaging", "commerce", "identity", "productivity"]
    )
    shapes = ProviderShapeSerializer(many=True)


class AgentSerializer(serializers.Serializer):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField()
    services = serializers.ListField(
        child=serializers.CharField(), help_text="Granted service identifiers, sorted."
    )


class AgentInputSerializer(serializers.Serializer):
    services = serializers.ListField(
        child=service_field(),
        max_length=100,
        help_text="The complete set of granted services; replaces the earlier grants.",
    )


class AgentTokenRequestSerializer(serializers.Serializer):
    expiresInDays = serializers.IntegerField(
        min_value=1, max_value=3650, required=False, help_text="No expiry when absent."
    )


class AgentTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="cva_ token, shown only in this response.")
    prefix = serializers.CharField()
    expiresAt = serializers.DateTimeField(allow_null=True)


class AgentCredentialSerializer(serializers.Serializer):
    keyName = serializers.CharField()
    value = serializers.CharField(trim_whitespace=False)


class AgentCredentialsSerializer(serializers.Serializer):
    service = serializers.CharField()
    keyType = serializers.ChoiceField(choices=KeyType.values)
    connectedAt = serializers.DateTimeField()
    credentials = AgentCredentialSerializer(many=True)


class AuditEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="Position in the account's chain, from 1.")
    time = serializers.DateTimeField()
    tokenPrefix = serializers.CharField()
    agent = serializers.CharField(allow_null=True)
    action = serializers.CharField()
    service = serializers.CharField(allow_null=True)
    target = serializers.CharField(allow_null=True, help_text="The agent acted on, if any.")
    outcome = serializers.ChoiceField(choices=["success", "refused", "error"])
    status = serializers.IntegerField()
    requestId = serializers.CharField()


class AuditPageSerializer(serializers.Serializer):
    events = AuditEventSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="Pass as `before` for the next page; null on the last."
    )
