"""Providers with more than one host, through their own SDKs from PyPI (docs/sdks.md): Hugging
Face's InferenceClient at the inference router (`huggingface~router`), the Pinecone client at
an index's own host (`pinecone~host/{index host}`), and the Dropbox SDK at both of its hosts
(`dropbox` and `dropbox~content`).

credvault runs under gunicorn as `make run` serves it, each provider host is a stand-in on
127.0.0.1 (tests/support/sdk_stand_ins.py), and each SDK is configured as an agent's developer
configures it. Each test shows that the SDK's calls returned the provider's data, that the
right host received them with the stored credential in its own place and never the agent
token, and that a credential the provider echoes reaches the SDK as [REDACTED].

The index host (`idx-1.svc.test.pinecone.io`) matches the catalog's pattern
`*.svc.*.pinecone.io`; the server gets that pattern with the stand-in's scheme and port
(CREDVAULT_PROVIDER_HOST_PATTERNS), the host is allowed to reach a loopback address over plain
http (CREDVAULT_OUTBOUND_ALLOWED_HOSTS), and, since a test cannot add a DNS name, the server's
process resolves that one name to 127.0.0.1 as an /etc/hosts line would (a `sitecustomize`
module on its PYTHONPATH), so that credvault's own lookup, address rules and Host header are
the real ones. The Dropbox SDK calls https only: that test's credvault serves https with a
certificate of its own, which the SDK trusts (`ca_certs`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import InferenceClient
from pinecone import Pinecone

from services.models import AuditEvent
from tests.support.harness import Gunicorn
from tests.support.helpers import (
    PROXY_PREFIX,
    agent_token,
    creds,
    marked,
    put_agent,
    self_signed_certificate,
    served_env,
)
from tests.support.sdk_stand_ins import (
    DropboxStandIn,
    HuggingFaceRouterStandIn,
    PineconeIndexStandIn,
    SdkStandIn,
    carries,
)

REDACTED = "[REDACTED]"
INDEX_HOST = "idx-1.svc.test.pinecone.io"
CREDENTIALS = {
    "huggingface": "hf_" + marked("huggingface"),
    "pinecone": "pcsk_" + marked("pinecone"),
    "dropbox": "sl." + marked("dropbox"),
}
HELLO = [{"role": "user", "content": "Say hello."}]
# The server's process resolves the index's name to the stand-in's address, as a line of
# /etc/hosts would; every other name goes to the system's resolver as before. gevent's resolver
# calls `_socket.getaddrinfo` too, so the one replacement serves both.
RESOLVER_ENTRY = """
import _socket

_system = _socket.getaddrinfo


def getaddrinfo(host, *args, **kwargs):
    if isinstance(host, str) and host.lower() == {name!r}:
        host = "127.0.0.1"
    return _system(host, *args, **kwargs)


_socket.getaddrinfo = getaddrinfo
"""

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, SdkStandIn]]:
    servers = {
        "router": HuggingFaceRouterStandIn(CREDENTIALS["huggingface"]),
        "index": PineconeIndexStandIn(CREDENTIALS["pinecone"]),
        "dropbox": DropboxStandIn(CREDENTIALS["dropbox"], host="api"),
        "content": DropboxStandIn(CREDENTIALS["dropbox"], host="content"),
    }
    for server in servers.values():
        server.start()
    yield servers
    for server in servers.values():
        server.stop()


def environment(providers: dict[str, SdkStandIn], directory: Path) -> dict[str, str]:
    """The server's environment: every host of the three providers at its stand-in (the API
    bases of Hugging Face and Pinecone, which these SDK calls never use, at paths the stand-ins
    refuse), and the index's name resolved to 127.0.0.1."""
    index_port = providers["index"].url.rsplit(":", 1)[1]
    (directory / "sitecustomize.py").write_text(RESOLVER_ENTRY.format(name=INDEX_HOST))
    return served_env(
        {
            "huggingface": providers["router"].url + "/hub",
            "huggingface~router": providers["router"].url,
            "pinecone": providers["index"].url + "/control",
            "dropbox": providers["dropbox"].url,
            "dropbox~content": providers["content"].url,
        },
        CREDVAULT_PROVIDER_HOST_PATTERNS=json.dumps(
            {"pinecone": f"http://*.svc.*.pinecone.io:{index_port}"}
        ),
        CREDVAULT_OUTBOUND_ALLOWED_HOSTS=f"{INDEX_HOST}:{index_port}",
        PYTHONPATH=str(directory),
    )


@pytest.fixture(scope="module")
def credvault(django_db_setup, providers, tmp_path_factory) -> Iterator[Gunicorn]:
    """credvault under gunicorn (one worker), plain http, on the test database."""
    env = environment(providers, tmp_path_factory.mktemp("resolver"))
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, providers) -> str:
    """The token of Alice's agent `bot`, granted the three services brokered (every base);
    each service's credential stored. The stand-ins' records start empty."""
    assert (
        alice_api.store("huggingface", creds(api_key=CREDENTIALS["huggingface"])).status_code == 201
    )
    assert alice_api.store("pinecone", creds(api_key=CREDENTIALS["pinecone"])).status_code == 201
    stored = alice_api.store("dropbox", creds(access_token=CREDENTIALS["dropbox"]))
    assert stored.status_code == 201
    assert put_agent(alice_api, "bot", list(CREDENTIALS), access=None).status_code == 201
    for provider in providers.values():
        provider.reset()
    return agent_token(alice_api, "bot")


def assert_brokered(provider: SdkStandIn, token: str, calls: int) -> None:
    """The host received `calls` requests, each with the stored credential in its own place
    and none with the agent token anywhere."""
    assert len(provider.requests) == calls, [r.path for r in provider.requests]
    for received in provider.requests:
        assert provider.authorized(received.headers), f"no stored credential: {received.path}"
        assert not carries(received, token), f"the agent token reached it: {received.path}"


def events() -> list[tuple[str, str, int]]:
    rows = AuditEvent.objects.filter(action="agent.proxy").order_by("id")
    return [(event.service, event.path, event.status) for event in rows]


def test_huggingface_inference_client_completes_a_chat_through_the_router(
    token, credvault, providers
):
    client = InferenceClient(
        base_url=f"{credvault.url}{PROXY_PREFIX}/huggingface~router/v1", api_key=token
    )
    completion = client.chat.completions.create(
        model=HuggingFaceRouterStandIn.MODEL, messages=HELLO, max_tokens=32
    )
    assert completion.id == "chatcmpl-hf-standin"
    assert completion.choices[0].message.content == f"Hello! Called with {REDACTED}."
    assert completion.usage.total_tokens == 17
    router = providers["router"]
    assert [(r.method, r.path) for r in router.requests] == [("POST", "/v1/chat/completions")]
    sent = json.loads(router.requests[0].body)
    assert (sent["model"], sent["messages"]) == (HuggingFaceRouterStandIn.MODEL, HELLO)
    assert_brokered(router, token, calls=1)
    assert events() == [("huggingface", "~router/v1/chat/completions", 200)]


def test_pinecone_upserts_and_queries_at_the_index_host(token, credvault, providers):
    client = Pinecone(api_key=token)
    index = client.Index(host=f"{credvault.url}{PROXY_PREFIX}/pinecone~host/{INDEX_HOST}")
    upserted = index.upsert(
        vectors=[
            {"id": "a", "values": [1.0, 0.0], "metadata": {"title": "first"}},
            {"id": "b", "values": [0.0, 1.0], "metadata": {"title": "second"}},
        ]
    )
    found = index.query(vector=[0.9, 0.1], top_k=1, include_metadata=True)
    assert upserted.upserted_count == 2
    assert [match.id for match in found.matches] == ["a"]
    assert found.matches[0].metadata == {"title": "first", "key": REDACTED}
    index_host = providers["index"]
    assert [(r.method, r.path) for r in index_host.requests] == [
        ("POST", "/vectors/upsert"),
        ("POST", "/query"),
    ]
    port = index_host.url.rsplit(":", 1)[1]
    assert {r.headers["Host"] for r in index_host.requests} == {f"{INDEX_HOST}:{port}"}
    assert_brokered(index_host, token, calls=2)
    assert events() == [
        ("pinecone", f"~host/{INDEX_HOST}/vectors/upsert", 200),
        ("pinecone", f"~host/{INDEX_HOST}/query", 200),
    ]


def test_pinecone_at_a_host_outside_the_pattern_is_refused(token, credvault, providers):
    client = Pinecone(api_key=token)
    index = client.Index(host=f"{credvault.url}{PROXY_PREFIX}/pinecone~host/evil.example.com")
    with pytest.raises(Exception, match=r"\[400\] The host does not match"):
        index.query(vector=[1.0, 0.0], top_k=1)
    assert providers["index"].requests == []
    assert events() == [("pinecone", "~host/evil.example.com/query", 400)]


DROPBOX_SCRIPT = """
import json, os
import dropbox

client = dropbox.Dropbox(
    oauth2_access_token=os.environ["AGENT_TOKEN"],
    ca_certs=os.environ["CREDVAULT_CA"],
    max_retries_on_error=0,
    max_retries_on_rate_limit=0,
)
listed = client.files_list_folder("")
metadata, response = client.files_download("/notes.txt")
print(json.dumps({
    "names": [entry.name for entry in listed.entries],
    "downloaded": metadata.name,
    "text": response.content.decode(),
}))
"""


def test_dropbox_lists_on_the_api_host_and_downloads_from_the_content_host(
    token, providers, tmp_path
):
    """The SDK takes its two hosts from DROPBOX_API_HOST and DROPBOX_API_CONTENT_HOST when it
    is imported, and calls `https://{host}/2/{route}`: the developer's program runs with the
    two set to credvault's proxy URLs (here in a process of its own)."""
    certificate, key = self_signed_certificate(tmp_path)
    env = environment(providers, tmp_path)
    with Gunicorn(env, workers=1, tls=(certificate, key)) as secure:
        proxy = secure.url.removeprefix("https://") + PROXY_PREFIX
        result = subprocess.run(
            [sys.executable, "-c", DROPBOX_SCRIPT],
            env={
                **os.environ,
                "DROPBOX_API_HOST": f"{proxy}/dropbox",
                "DROPBOX_API_CONTENT_HOST": f"{proxy}/dropbox~content",
                "CREDVAULT_CA": str(certificate),
                # requests prefers a bundle named in the environment to the session's own.
                "REQUESTS_CA_BUNDLE": str(certificate),
                "CURL_CA_BUNDLE": str(certificate),
                "AGENT_TOKEN": token,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == {
        "names": ["notes.txt"],
        "downloaded": "notes.txt",
        "text": f"Notes, read with {REDACTED}.",
    }
    api, content = providers["dropbox"], providers["content"]
    assert [(r.method, r.path) for r in api.requests] == [("POST", "/2/files/list_folder")]
    assert [(r.method, r.path) for r in content.requests] == [("POST", "/2/files/download")]
    sent = {name.lower(): value for name, value in content.requests[0].headers.items()}
    assert json.loads(sent["dropbox-api-arg"]) == {"path": "/notes.txt"}
    assert_brokered(api, token, calls=1)
    assert_brokered(content, token, calls=1)
    assert events() == [
        ("dropbox", "/2/files/list_folder", 200),
        ("dropbox", "~content/2/files/download", 200),
    ]
