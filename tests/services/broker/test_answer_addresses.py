"""The provider's own addresses in an answer: judged after they are resolved against the
provider's request and their dot segments removed (`%2e` read as `.`), so that none points the
agent elsewhere in credvault; and, for providers whose catalog entry says `answer_urls =
"json"`, the absolute URLs in a JSON body moved onto the proxy as Location and Link are, every
other byte kept, whole or streamed, never for other providers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.catalog import CatalogError, parse_catalog
from services.broker.locations import json_onto_proxy, judged, onto_proxy, without_dot_segments
from services.models import AuditEvent
from tests.support.helpers import (
    CATALOG_ENTRY,
    PROXY_PREFIX,
    agent_token,
    assert_problem,
    call,
    creds,
    marked,
    put_agent,
)
from tests.support.stand_ins import ProviderServer

BASE = "https://api.openai.com/v1"
PROXY = "https://cv.example/api/v1/agent/proxy/openai"
ASKED = "https://api.openai.com/v1/files/abc"


class TestDotSegments:
    @pytest.mark.parametrize(
        ("path", "without"),
        [
            ("/a/b/../c", "/a/c"),
            ("/a/..", "/"),
            ("/a/.", "/a/"),
            ("/..", "/"),
            ("/a/%2e%2e/b", "/b"),
            ("/a/%2E./b", "/b"),
            ("/a/.%2e", "/"),
            ("/a/%2e/b", "/a/b"),
            ("/a/..;/b", "/a/..;/b"),  # not a dot segment for RFC 3986 (the proxy refuses it)
            ("/a/%252e%252e/b", "/a/%252e%252e/b"),
        ],
    )
    def test_removed_with_percent_encoded_dots_read_as_dots(self, path, without):
        assert without_dot_segments(path) == without


class TestJudged:
    """Each reference in an answer to `GET /v1/files/abc` of a base with a path."""

    @pytest.mark.parametrize(
        ("reference", "moved"),
        [
            ("../stripe/x", f"{PROXY}/stripe/x"),  # the provider's /v1/stripe/x, on its proxy
            ("./a/../../b", f"{PROXY}/b"),
            ("?page=2", f"{PROXY}/files/abc?page=2"),
            ("", f"{PROXY}/files/abc"),
            ("#part", f"{PROXY}/files/abc#part"),
            ("/v1/a/%2e%2e/b", f"{PROXY}/b"),
            ("https://api.openai.com/v1/a/./b/", f"{PROXY}/a/b/"),
            # Leaving the base: absolute at the provider, never a path of credvault's.
            ("/%2e%2e/credentials", "https://api.openai.com/credentials"),
            (
                "/v1/%2e%2e/%2e%2e/api/v1/agent/credentials/x",
                BASE[:-3] + "/api/v1/agent/credentials/x",
            ),
            ("../../../../stripe/x", "https://api.openai.com/stripe/x"),
            ("//api.openai.com/v1/../v2", "https://api.openai.com/v2"),
            # Absolute and leaving: as it came.
            (
                "https://api.openai.com/v1/../../api/v1/agent/credentials/x",
                "https://api.openai.com/v1/../../api/v1/agent/credentials/x",
            ),
        ],
    )
    def test_a_reference_is_resolved_then_judged(self, reference, moved):
        headers = [("Location", reference)]
        [(_, got)] = onto_proxy(headers, api_base=BASE, proxy_url=lambda: PROXY, request_url=ASKED)
        assert got == moved
        # The moved address has no dot segment an agent could resolve elsewhere.
        assert "/." not in got.replace("https://api.openai.com/v1/../..", "")

    @pytest.mark.parametrize(
        "address",
        [
            "https://cv.example/api/v1/agent/credentials/openai",
            "https://cv.example/api/v1/agent/proxy/stripe/v1/charges",
            "https://CV.example:443/api/v1/agent/proxy/openai/../stripe/x",
            "//cv.example/api/v1/agent/proxy/openaiX",
        ],
    )
    def test_an_address_elsewhere_in_credvault_is_dropped(self, address):
        headers = [
            ("Location", address),
            ("Link", f'<{BASE}/files?page=2>; rel="next", <{address}>; rel="last"'),
            ("Content-Location", address),
            ("X-Other", address),
        ]
        got = onto_proxy(headers, api_base=BASE, proxy_url=lambda: PROXY, request_url=ASKED)
        assert got == [("X-Other", address)]

    def test_an_address_under_the_services_own_proxy_passes(self):
        address = f"{PROXY}/files?page=3"
        got = onto_proxy([("Location", address)], api_base=BASE, proxy_url=lambda: PROXY)
        assert got == [("Location", address)]

    @pytest.mark.parametrize(
        "reference", ["..\\..\\x", "/v1/a b", "/v1/\tx", "https://api.openai.com:x/v1"]
    )
    def test_what_clients_read_differently_never_stays(self, reference):
        assert judged(reference, api_base=BASE, request_url=ASKED).stays is False

    def test_a_link_relative_to_the_request(self):
        link = '<?page=2>; rel="next", <../../v1/files?page=9>; rel="last"'
        [(_, got)] = onto_proxy(
            [("Link", link)], api_base=BASE, proxy_url=lambda: PROXY, request_url=ASKED
        )
        assert got == f'<{PROXY}/files/abc?page=2>; rel="next", <{PROXY}/files?page=9>; rel="last"'


class TestJsonBody:
    def moved(self, body: bytes) -> bytes:
        return json_onto_proxy(body, api_base=BASE, proxy_url=PROXY)

    def test_nested_values_and_arrays_move_and_nothing_else_changes(self):
        body = (
            b'{"next" : "https://api.openai.com/v1/files?after=f",\n'
            b'  "https://api.openai.com/v1/key": ["https://api.openai.com/v1/a", 1.50, null],'
            b'"deep":{"x":[{"url":"https://api.openai.com/v1/b?c=%2F#f"}]},'
            b'"other":"https://evil.example/v1/a","web":"https://api.openai.com/v2/a",'
            b'"text":"see https://api.openai.com/v1/a","rel":"/v1/files"}'
        )
        assert self.moved(body) == (
            b'{"next" : "https://cv.example/api/v1/agent/proxy/openai/files?after=f",\n'
            b'  "https://api.openai.com/v1/key": ["https://cv.example/api/v1/agent/proxy/openai/a",'
            b" 1.50, null],"
            b'"deep":{"x":[{"url":"https://cv.example/api/v1/agent/proxy/openai/b?c=%2F#f"}]},'
            b'"other":"https://evil.example/v1/a","web":"https://api.openai.com/v2/a",'
            b'"text":"see https://api.openai.com/v1/a","rel":"/v1/files"}'
        )

    def test_escaped_slashes_are_kept_in_the_moved_string(self):
        body = b'{"next":"https:\\/\\/api.openai.com\\/v1\\/files?after=f"}'
        moved = self.moved(body)
        assert moved == (
            b'{"next":"https:\\/\\/cv.example\\/api\\/v1\\/agent\\/proxy\\/openai\\/files?after=f"}'
        )
        assert json.loads(moved) == {"next": f"{PROXY}/files?after=f"}

    def test_escaped_letters_and_quotes_are_read_as_json_reads_them(self):
        body = (
            b'["\\u0068ttps://api.openai.com/v1/x", "a \\"https://api.openai.com/v1/y\\"",'
            b' "caf\\u00e9 https://api.openai.com/v1", "https://api.openai.com/v1/caf\\u00e9"]'
        )
        assert json.loads(self.moved(body)) == [
            f"{PROXY}/x",
            'a "https://api.openai.com/v1/y"',
            "café https://api.openai.com/v1",
            f"{PROXY}/café",
        ]

    def test_dot_segments_that_climb_out_of_the_base_stay_as_they_are(self):
        body = b'{"a":"https://api.openai.com/v1/%2e%2e/x","b":"https://api.openai.com/v1/x/../y"}'
        assert json.loads(self.moved(body)) == {
            "a": "https://api.openai.com/v1/%2e%2e/x",
            "b": f"{PROXY}/y",
        }

    def test_a_body_without_addresses_is_the_same_object(self):
        body = b'{"data": ["hello", "\\\\", "h"]}'
        assert self.moved(body) is body
        assert json_onto_proxy(
            b'{"a":"https://api.openai.com/v1"}', api_base=BASE, proxy_url=""
        ) == (b'{"a":"https://api.openai.com/v1"}')


_URLS = st.builds(
    lambda host, path: f"https://{host}/v1/{path}" if host else f"{BASE}/{path}",
    st.sampled_from(["", "", "evil.example", "api.openai.com.evil.example"]),
    st.text("abcxyz019/?=&-_~", max_size=20),
)
_STRINGS = st.one_of(_URLS, st.text(max_size=20))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_STRINGS, inner, max_size=4),
    max_leaves=12,
)


def _expected(value):
    """The document with each string value under the base moved, member names kept."""
    if isinstance(value, str):
        return PROXY + value[len(BASE) :] if value.startswith(BASE + "/") else value
    if isinstance(value, list):
        return [_expected(item) for item in value]
    if isinstance(value, dict):
        return {name: _expected(item) for name, item in value.items()}
    return value


@settings(max_examples=300, deadline=None)
@given(
    _JSON,
    st.booleans(),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]),
    st.booleans(),
)
def test_any_document_reads_as_the_same_document_with_its_addresses_moved(
    document, ascii_only, separators, escaped_slashes
):
    text = json.dumps(document, ensure_ascii=ascii_only, separators=separators)
    if escaped_slashes:
        text = text.replace("/", "\\/")
    body = text.encode()
    moved = json_onto_proxy(body, api_base=BASE, proxy_url=PROXY)
    assert json.loads(moved) == _expected(document)
    if _expected(document) == document:
        assert moved == body


class TestCatalogKey:
    def test_answer_urls_takes_json_only(self):
        entry = CATALOG_ENTRY.replace('base_url = "', 'answer_urls = "json"\nbase_url = "', 1)
        [provider] = parse_catalog(entry, operator=True).values()
        assert provider.answer_urls == "json"
        with pytest.raises(CatalogError, match="`answer_urls` must be one of json"):
            parse_catalog(
                entry.replace('answer_urls = "json"', 'answer_urls = "xml"'), operator=True
            )

    def test_the_providers_documented_to_carry_urls_are_marked(self):
        from providers.catalog import catalog

        marked_ = {p.id for p in catalog().values() if p.answer_urls == "json"}
        assert {"replicate", "zendesk"} <= marked_
        assert not {"github", "stripe"} & marked_


# --- through the proxy ------------------------------------------------------------------------

REPLICATE_PROXY = f"http://testserver{PROXY_PREFIX}/replicate"


@pytest.fixture
def agent(alice_api, provider_server) -> tuple[str, str]:
    """Alice's replicate and github credentials (one marked value) and her agent's token."""
    value = marked("key")
    for service in ("replicate", "github"):
        assert alice_api.store(service, creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["replicate", "github"], access=None).status_code == 201
    return value, agent_token(alice_api, "bot")


def page(server: ProviderServer, value: str, filler: int = 0) -> bytes:
    """A page of Replicate's model list that points at its next one on the provider's host."""
    return json.dumps(
        {
            "next": f"{server.url}/v1/models?cursor=abc",
            "previous": None,
            "results": [{"url": f"{server.url}/v1/models/o/m", "description": f"by {value}"}],
            "filler": "z" * filler,
        },
        indent=1,
    ).encode()


@pytest.mark.django_db
class TestThroughTheProxy:
    def test_a_json_answer_has_its_api_urls_moved_and_its_length_recomputed(
        self, agent, provider_server
    ):
        value, token = agent
        body = page(provider_server, value)
        provider_server.answer(
            200, body, headers={"Content-Type": "application/json; charset=utf-8"}
        )
        response = call(token, "GET", "replicate", "/v1/models")
        assert response.status_code == 200
        expected = body.replace(provider_server.url.encode(), REPLICATE_PROXY.encode()).replace(
            value.encode(), b"[REDACTED]"
        )
        assert response.content == expected
        assert int(response["Content-Length"]) == len(expected) != len(body)
        [event] = AuditEvent.objects.filter(action="agent.proxy")
        assert (event.upstream_status, event.outcome) == (200, "success")

    @pytest.mark.parametrize("chunked", [False, True])
    def test_a_long_or_chunked_json_answer_is_read_whole_and_moved(
        self, agent, provider_server, chunked
    ):
        value, token = agent
        body = page(provider_server, value, filler=200_000)
        headers = {"Content-Type": "application/vnd.api+json"}
        if chunked:
            provider_server.answer(200, b"", headers=headers, chunks=(body[:70_000], body[70_000:]))
        else:
            provider_server.answer(200, body, headers=headers)
        response = call(token, "GET", "replicate", "/v1/models")
        assert response.status_code == 200
        assert not response.streaming
        moved = json.loads(response.content)
        assert moved["next"] == f"{REPLICATE_PROXY}/v1/models?cursor=abc"
        assert moved["results"] == [
            {"url": f"{REPLICATE_PROXY}/v1/models/o/m", "description": "by [REDACTED]"}
        ]
        assert int(response["Content-Length"]) == len(response.content)

    def test_a_json_answer_over_the_most_is_502(self, agent, provider_server, settings):
        settings.CREDVAULT_PROXY_MAX_RESPONSE = 100_000
        _, token = agent
        body = page(provider_server, "x", filler=150_000)
        provider_server.answer(
            200, b"", headers={"Content-Type": "application/json"}, chunks=(body,)
        )
        assert_problem(call(token, "GET", "replicate", "/v1/models"), 502, "upstream_too_large")

    @pytest.mark.parametrize(
        ("service", "content_type"),
        [
            ("replicate", "text/plain"),
            ("replicate", "application/jsonx"),
            ("github", "application/json"),
        ],
    )
    def test_other_bodies_are_never_changed(self, agent, provider_server, service, content_type):
        _, token = agent
        body = page(provider_server, "nobody")
        provider_server.answer(200, body, headers={"Content-Type": content_type})
        response = call(token, "GET", service, "/v1/models")
        assert (response.status_code, response.content) == (200, body)

    def test_a_relative_location_with_dot_segments_stays_on_the_services_proxy(
        self, agent, provider_server
    ):
        _, token = agent
        provider_server.answer(201, b"{}", headers={"Location": "../../../../github/user"})
        response = call(token, "POST", "replicate", "/v1/predictions/p1", body=b"{}")
        assert response.status_code == 201
        assert response["Location"] == f"{REPLICATE_PROXY}/github/user"

    def test_a_header_naming_credvaults_own_api_never_reaches_the_agent(
        self, agent, provider_server
    ):
        _, token = agent
        elsewhere = "http://testserver/api/v1/agent/credentials/github"
        provider_server.answer(
            201, b"{}", headers={"Location": elsewhere, "Link": f"<{elsewhere}>; rel=next"}
        )
        response = call(token, "POST", "replicate", "/v1/predictions", body=b"{}")
        assert response.status_code == 201
        assert "Location" not in response
        assert "Link" not in response
