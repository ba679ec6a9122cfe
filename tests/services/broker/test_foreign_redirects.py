"""Redirects that leave the service: a 301, 302 or 303 answer to a GET or HEAD is followed by
credvault itself (at most 3 hops, with no credential, none of the agent's headers and no body,
under the outbound address rules), any other is 502 `upstream_foreign_redirect` with no
`Location`; a redirect that stays under the service's API base is passed back, moved onto the
proxy. Every hop is a real HTTP server on 127.0.0.1, which CREDVAULT_OUTBOUND_ALLOWED_HOSTS
names port by port."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from services.exceptions import UpstreamForeignRedirect
from services.models import AuditEvent
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)
from tests.support.stand_ins import ProviderServer

FOREIGN = UpstreamForeignRedirect.default_code
PROXY_URL = f"http://testserver{PROXY_PREFIX}/github"
FILE = b"\x00release asset bytes\xff" * 10


@pytest.fixture
def github(alice_api, provider_server) -> tuple[str, str]:
    """Alice's github credential and the token of her agent with the default grant."""
    value = marked("gh")
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    return value, agent_token(alice_api, "bot")


@pytest.fixture
def hosts(settings) -> Iterator[list[ProviderServer]]:
    """Four more servers on 127.0.0.1 (storage hosts, redirecting hosts), each one allowed by
    CREDVAULT_OUTBOUND_ALLOWED_HOSTS as `127.0.0.1:port`."""
    servers = [ProviderServer().start() for _ in range(4)]
    settings.CREDVAULT_OUTBOUND_ALLOWED_HOSTS = ",".join(s.url.split("//")[1] for s in servers)
    yield servers
    for server in servers:
        server.stop()


def assert_never_carried(server: ProviderServer, *values: str) -> None:
    """`server` received no credential, token, agent header or body."""
    for received in server.requests:
        text = json.dumps([received.path, received.headers]) + received.body.decode("latin-1")
        assert not any(value in text for value in values), received
        assert "authorization" not in {name.lower() for name in received.headers}
        assert "x-agent-header" not in {name.lower() for name in received.headers}
        assert received.body == b""


@pytest.mark.django_db
class TestFollowed:
    def test_a_download_redirected_to_storage_is_followed_without_the_credential(
        self, github, provider_server, hosts
    ):
        value, token = github
        storage = hosts[0]
        asset = f"{storage.url}/releases/1/asset.bin?X-Amz-Signature=abc&X-Amz-Expires=300"
        provider_server.answer(302, b"", headers={"Location": asset})
        storage.answer(200, FILE, headers={"Content-Type": "application/octet-stream"})
        response = call(
            token,
            "GET",
            "github",
            "/repos/o/r/releases/assets/1",
            headers={"Accept": "application/octet-stream", "X-Agent-Header": "agent's own"},
        )
        assert response.status_code == 200
        assert response.content == FILE
        assert response["Content-Type"] == "application/octet-stream"
        assert "Location" not in response
        assert [(r.method, r.path) for r in storage.requests] == [
            ("GET", "/releases/1/asset.bin?X-Amz-Signature=abc&X-Amz-Expires=300")
        ]
        assert_never_carried(storage, value, token)
        # Nothing of the agent's: only what the HTTP client itself sends.
        assert {name.lower() for name in storage.requests[0].headers} == {
            "host",
            "user-agent",
            "accept-encoding",
        }
        # The provider got the credential, once.
        assert len(provider_server.requests) == 1
        [event] = AuditEvent.objects.filter(action="agent.proxy")
        assert (event.status, event.upstream_status, event.outcome) == (200, 200, "success")
        assert event.path == "/repos/o/r/releases/assets/1"

    @pytest.mark.parametrize(("status", "method"), [(301, "GET"), (303, "GET"), (302, "HEAD")])
    def test_301_303_and_a_head_are_followed_with_the_same_method(
        self, github, provider_server, hosts, status, method
    ):
        value, token = github
        storage = hosts[0]
        provider_server.answer(status, b"", headers={"Location": f"{storage.url}/file"})
        storage.answer(200, FILE, headers={"Content-Type": "application/octet-stream"})
        response = call(token, method, "github", "/repos/o/r/tarball")
        assert response.status_code == 200
        assert response.content == (FILE if method == "GET" else b"")
        assert [(r.method, r.path) for r in storage.requests] == [(method, "/file")]
        assert_never_carried(storage, value, token)

    def test_three_hops_are_followed(self, github, provider_server, hosts):
        value, token = github
        first, second, third = hosts[:3]
        provider_server.answer(302, b"", headers={"Location": f"{first.url}/1"})
        first.answer(302, b"moved", headers={"Location": f"{second.url}/2"})
        # A relative reference, resolved against the hop that answered it.
        second.answer(303, b"", headers={"Location": f"//{third.url.split('//')[1]}/3"})
        third.answer(200, {"done": True}, headers={"Content-Type": "application/json"})
        response = call(token, "GET", "github", "/download")
        assert (response.status_code, response.json()) == (200, {"done": True})
        for hop, path in zip((first, second, third), ("/1", "/2", "/3"), strict=True):
            assert [r.path for r in hop.requests] == [path]
            assert_never_carried(hop, value, token)

    def test_the_landed_answers_addresses_are_judged_against_its_own_url(
        self, github, provider_server, hosts
    ):
        _, token = github
        storage = hosts[0]
        provider_server.answer(302, b"", headers={"Location": f"{storage.url}/dir/file"})
        storage.answer(
            200,
            b"x",
            headers={"Content-Location": "other", "Link": f"<{provider_server.url}/next>"},
        )
        response = call(token, "GET", "github", "/download")
        assert response.status_code == 200
        assert response["Content-Location"] == f"{storage.url}/dir/other"
        assert response["Link"] == f"<{PROXY_URL}/next>"

    def test_a_redirect_back_under_the_base_ends_the_hops_moved_onto_the_proxy(
        self, github, provider_server, hosts
    ):
        _, token = github
        storage = hosts[0]
        provider_server.answer(302, b"", headers={"Location": f"{storage.url}/x"})
        storage.answer(302, b"", headers={"Location": f"{provider_server.url}/repos/o/r"})
        response = call(token, "GET", "github", "/download")
        assert response.status_code == 302
        assert response["Location"] == f"{PROXY_URL}/repos/o/r"
        assert len(provider_server.requests) == 1


@pytest.mark.django_db
class TestRefused:
    @pytest.mark.parametrize(("status", "method"), [(307, "GET"), (308, "GET"), (302, "POST")])
    def test_other_redirects_that_leave_are_502(
        self, github, provider_server, hosts, status, method
    ):
        _, token = github
        storage = hosts[0]
        provider_server.answer(status, b"", headers={"Location": f"{storage.url}/upload"})
        body = b'{"a": 1}' if method == "POST" else b""
        response = call(token, method, "github", "/repos/o/r/x", body=body)
        assert_problem(response, 502, FOREIGN)
        assert "Location" not in response
        assert response["X-Credvault-Error"] == FOREIGN
        assert storage.requests == []
        [event] = AuditEvent.objects.filter(action="agent.proxy")
        assert (event.status, event.outcome) == (502, "error")

    def test_a_fourth_hop_is_502(self, github, provider_server, hosts):
        _, token = github
        provider_server.answer(302, b"", headers={"Location": f"{hosts[0].url}/1"})
        for hop, following in itertools.pairwise(hosts):
            hop.answer(302, b"", headers={"Location": f"{following.url}/next"})
        response = call(token, "GET", "github", "/download")
        assert_problem(response, 502, FOREIGN)
        assert "Location" not in response
        assert [len(hop.requests) for hop in hosts] == [1, 1, 1, 0]

    @pytest.mark.parametrize(
        "location",
        [
            "http://127.0.0.1:9/file",  # http to a host no setting allows
            "https://127.0.0.1:9/file",  # https to an address that is not public
            "ftp://files.example/file",
            "https://user:pass@files.example/file",
        ],
    )
    def test_a_hop_the_address_rules_refuse_is_502(self, github, provider_server, location):
        _, token = github
        provider_server.answer(302, b"", headers={"Location": location})
        response = call(token, "GET", "github", "/download")
        assert_problem(response, 502, FOREIGN)
        assert "Location" not in response

    def test_a_redirect_that_stays_is_passed_back_without_its_dot_segments(
        self, github, provider_server, hosts
    ):
        _, token = github
        provider_server.answer(307, b"", headers={"Location": "../../stripe/x?y=1"})
        response = call(token, "POST", "github", "/repos/o/r", body=b"{}")
        assert response.status_code == 307
        assert response["Location"] == f"{PROXY_URL}/stripe/x?y=1"
        assert all(hop.requests == [] for hop in hosts)
