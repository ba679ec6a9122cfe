"""Paths that SDKs send: `@` in a segment (Microsoft Graph's and Google Calendar's ids) and an
encoded `/` inside one (python-gitlab's `group%2Fname`), sent on as they came, and a grant's
path prefix matched segment by decoded segment."""

from __future__ import annotations

import pytest

from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)


@pytest.fixture
def token(alice_api, provider_server):
    def granted(service: str, paths: list[str]) -> str:
        assert alice_api.store(service, creds(api_key=marked())).status_code == 201
        grant = {"service": service, "paths": paths}
        assert put_agent(alice_api, "bot", [grant], access=None).status_code == 201
        return agent_token(alice_api, "bot")

    return granted


@pytest.mark.django_db
class TestWhatSDKsSend:
    def test_an_at_sign_in_a_segment_goes_on(self, token, provider_server):
        agent = token("openai", ["/"])
        raw = f"{PROXY_PREFIX}/openai/users/alice@contoso.com/calendar/events"
        response = call(agent, "GET", "openai", "/x", raw=raw)
        assert response.status_code == 200, response.content
        assert provider_server.requests[0].path == "/users/alice@contoso.com/calendar/events"

    def test_an_encoded_slash_stays_inside_its_segment(self, token, provider_server):
        agent = token("openai", ["/"])
        raw = f"{PROXY_PREFIX}/openai/api/v4/projects/group%2Fname"
        assert call(agent, "GET", "openai", "/x", raw=raw).status_code == 200
        assert provider_server.requests[0].path == "/api/v4/projects/group%2Fname"

    def test_an_encoded_slash_that_climbs_is_refused(self, token, provider_server):
        agent = token("openai", ["/"])
        raw = f"{PROXY_PREFIX}/openai/projects/a%2F..%2F..%2Fadmin"
        assert_problem(call(agent, "GET", "openai", "/x", raw=raw), 400, "invalid_proxy_path")
        assert provider_server.requests == []


@pytest.mark.django_db
class TestPrefixesBySegment:
    def test_a_prefix_never_covers_a_segment_that_only_starts_with_it(self, token, provider_server):
        agent = token("openai", ["/projects/acme"])
        other = f"{PROXY_PREFIX}/openai/projects/acme%2Fother"
        assert_problem(call(agent, "GET", "openai", "/x", raw=other), 403, "not_granted")
        inside = f"{PROXY_PREFIX}/openai/projects/acme/issues"
        assert call(agent, "GET", "openai", "/x", raw=inside).status_code == 200
        assert [sent.path for sent in provider_server.requests] == ["/projects/acme/issues"]

    def test_a_prefix_may_name_an_encoded_slash(self, token, provider_server):
        agent = token("openai", ["/projects/group%2Fname"])
        named = f"{PROXY_PREFIX}/openai/projects/group%2Fname/issues"
        assert call(agent, "GET", "openai", "/x", raw=named).status_code == 200
        split = f"{PROXY_PREFIX}/openai/projects/group/name/issues"
        assert_problem(call(agent, "GET", "openai", "/x", raw=split), 403, "not_granted")
