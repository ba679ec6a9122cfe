"""An identifier in a path is normalized exactly like the body's, whatever it
holds: a newline or CR/LF (percent-encoded) in `{service}` or `{name}` names the same service
or agent as in a body, on every route that takes one."""

from __future__ import annotations

import pytest

from services.models import Agent, AgentToken, ConnectedService
from tests.support.helpers import assert_problem, creds, put_agent, read

# How a client spells `line\nbreak` and `line\r\nbreak` in a path; both normalize to
# `line-break`, as a run of whitespace becomes one `-`.
SPELLINGS = ["line%0Abreak", "line%0D%0Abreak", "line%0A%0Dbreak", "%0Aline%0Abreak%0D%0A"]

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_delete_takes_the_service_a_body_stored(alice_api, alice, spelling):
    assert alice_api.store("line\nbreak", creds(api_key="v")).status_code == 201
    assert ConnectedService.objects.filter(account=alice, service="line-break").exists()
    response = alice_api.delete(spelling)
    assert response.status_code == 204, response.content
    assert not ConnectedService.objects.filter(account=alice, service="line-break").exists()
    assert_problem(alice_api.delete(spelling), 404, "service_not_connected")


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_agent_routes_take_the_name_a_body_gives(alice_api, alice, spelling):
    alice_api.store("line-break", creds(api_key="agent-sees-this"))
    created = put_agent(alice_api, spelling, ["line\r\nbreak"])
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "line-break"
    assert list(Agent.objects.filter(account=alice).values_list("name", flat=True)) == [
        "line-break"
    ]
    assert put_agent(alice_api, spelling, ["line-break"]).status_code == 200

    issued = alice_api.raw("POST", f"/api/v1/agents/{spelling}/tokens")
    assert issued.status_code == 201, issued.content
    token, prefix = issued.json()["token"], issued.json()["prefix"]
    listed = alice_api.raw("GET", f"/api/v1/agents/{spelling}/tokens")
    assert listed.status_code == 200
    assert [t["prefix"] for t in listed.json()] == [prefix]

    response = read(token, spelling)
    assert response.status_code == 200, response.content
    assert response.json()["service"] == "line-break"
    assert response.json()["credentials"] == [{"keyName": "api_key", "value": "agent-sees-this"}]

    revoked = alice_api.raw("DELETE", f"/api/v1/agents/{spelling}/tokens/{prefix}")
    assert revoked.status_code == 204
    assert AgentToken.objects.get(prefix=prefix).revoked_at is not None
    assert alice_api.raw("DELETE", f"/api/v1/agents/{spelling}").status_code == 204
    assert not Agent.objects.filter(account=alice).exists()


def test_a_path_identifier_of_whitespace_alone_is_refused_by_name(alice_api):
    body = assert_problem(alice_api.delete("%0D%0A"), 400, "invalid_service")
    assert body["status"] == 400
    body = assert_problem(put_agent(alice_api, "%0A", ["github"]), 400, "invalid_request")
    assert body["errors"][0]["field"] == "name"
