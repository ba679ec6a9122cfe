"""Response bodies rendered from the output serializers: every member the shape declares, in
its order, read from the domain's object, and nothing else."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from rest_framework import serializers as drf

from services.api import serializers
from services.api.rendering import render, render_many
from services.grants import GrantSpec
from services.masking import Secret
from services.models import AuditOutcome

MOMENT = datetime(2026, 11, 21, 9, 30, 12, 345678, tzinfo=UTC)


def test_a_grant_shows_base_only_where_it_names_one() -> None:
    whole = render(serializers.GrantSerializer, GrantSpec.given("github"))
    assert list(whole) == ["service", "access", "methods", "paths", "graphql"]
    assert whole["methods"] == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    router = render(serializers.GrantSerializer, GrantSpec.given("huggingface", base="router"))
    assert list(router)[-1] == "base"
    assert router["base"] == "router"


def test_times_nulls_and_a_shown_member() -> None:
    event = SimpleNamespace(
        seq=7,
        occurred_at=MOMENT,
        token_prefix="cva_abcdefgh",
        agent_name="",
        action="proxy_call",
        service="github",
        target="",
        outcome=AuditOutcome.SENT,
        status=200,
        request_id="r1",
        method="GET",
        path="/user",
        upstream_status=None,
        via="",
        sent_path="/user",
    )
    body = render(serializers.AuditPageSerializer, ([event], 7))
    assert body["next"] == "7"
    shown = body["events"][0]
    assert list(shown) == list(serializers.AuditEventSerializer().fields)
    assert shown["time"] == "2026-11-21T09:30:12.345678Z"
    # An empty text is null; a call still `sent` has no status yet.
    assert (shown["agent"], shown["target"], shown["via"], shown["status"]) == (
        None,
        None,
        None,
        None,
    )
    assert render(serializers.AuditPageSerializer, ([], None)) == {"events": [], "next": None}


def test_an_opened_set_is_revealed_to_its_agent_only_in_the_body() -> None:
    read = SimpleNamespace(
        service="github",
        key_type="api_key",
        connected_at=MOMENT,
        fields=[("api_key", Secret("ghp_x"))],
    )
    body = render(serializers.AgentCredentialsSerializer, read)
    assert body["credentials"] == [{"keyName": "api_key", "value": "ghp_x"}]


def test_optional_times_and_nested_sources() -> None:
    token = SimpleNamespace(
        prefix="cva_abcdefgh",
        created_at=MOMENT,
        last_used_at=None,
        expires_at=MOMENT,
        revoked_at=None,
    )
    [info] = render_many(serializers.AgentTokenInfoSerializer, [token])
    assert info["lastUsedAt"] is None
    assert info["expiresAt"] == "2026-11-21T09:30:12.345678Z"
    issued = SimpleNamespace(plaintext="cva_token", token=token)
    assert render(serializers.AgentTokenSerializer, issued) == {
        "token": "cva_token",
        "prefix": "cva_abcdefgh",
        "expiresAt": "2026-11-21T09:30:12.345678Z",
    }


OUTPUT_SHAPES = [
    shape
    for _, shape in inspect.getmembers(serializers, inspect.isclass)
    if issubclass(shape, drf.Serializer)
    and shape.__module__ == serializers.__name__
    and "Input" not in shape.__name__
    and shape is not serializers.ProblemSerializer  # rendered by services.api.errors
]


@pytest.mark.parametrize("shape", OUTPUT_SHAPES, ids=lambda shape: shape.__name__)
def test_every_output_shape_compiles(shape: type[drf.Serializer]) -> None:
    render_many(shape, [])


def test_a_source_that_is_not_an_attribute_path_is_refused() -> None:
    class Odd(drf.Serializer):
        name = drf.CharField(source="name()")

    with pytest.raises(ValueError, match="attribute path"):
        render(Odd, SimpleNamespace(name="x"))
