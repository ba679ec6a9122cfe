"""The serving model (gunicorn.conf.py's gevent workers, issue 17): a client that holds its
body open, or a request waiting on a slow provider, holds no worker. With a single worker,
/healthz and the list are answered while both wait. Under sync workers the first held body
took the worker and this test's probes had no answer (docs/performance.md, "Slow clients")."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from django.db import connections, transaction
from django.test import Client

from providers.http import client
from services.models import Account, AuditEvent
from services.storage.connections import give_back_connections
from tests.support.harness import Gunicorn, request, server_env
from tests.support.helpers import (
    PROXY_PREFIX,
    STORE_PATH,
    agent_token,
    creds,
    database_url,
    put_agent,
    raw_store,
    store_body,
)
from tests.support.stand_ins import ProviderServer

# How long a probe may wait for its answer. Not a speed target: the held requests below wait
# far longer (until released), so an answer at all shows that they hold no worker.
PROBE_TIMEOUT = 10


@pytest.fixture
def slow_provider():
    provider = ProviderServer().start()
    provider.answer(200, b"{}", delay_seconds=60)  # answers when released, or after a minute
    yield provider
    provider.released.set()
    provider.stop()


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_one_worker_answers_while_bodies_are_held_and_a_provider_is_slow(alice_api, slow_provider):
    alice_api.store("listed", creds(api_key="v"))
    env = server_env(
        database_url(),
        CREDVAULT_BODY_TIMEOUT="60",
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": slow_provider.url}),
    )
    with Gunicorn(env, workers=1) as server:
        held = []
        for framing in (
            raw_store(alice_api.token, store_body("held")[:13], length=1000),
            (
                f"PUT {STORE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                f"{alice_api.token}\r\nContent-Type: application/json\r\n"
                'Transfer-Encoding: chunked\r\n\r\n5\r\n{"ser\r\n'
            ).encode(),
        ):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
            sock.sendall(framing)
            held.append(sock)
        slow_answers: list[int] = []
        body = {"service": "github", "credentials": [{"keyName": "api_key", "value": "ghp_x"}]}
        slow = threading.Thread(
            target=lambda: slow_answers.append(
                request(
                    "POST",
                    f"{server.url}/api/v1/services/test",
                    token=alice_api.token,
                    body=body,
                    timeout=90,
                )[0]
            )
        )
        slow.start()
        try:
            _wait_for(lambda: slow_provider.requests, "the slow call reaching the provider")
            status, _, _ = request("GET", f"{server.url}/healthz", timeout=PROBE_TIMEOUT)
            assert status == 200
            status, _, listed = request(
                "GET", f"{server.url}/api/v1/services", token=alice_api.token, timeout=PROBE_TIMEOUT
            )
            assert status == 200
            assert "listed" in json.dumps(json.loads(listed))
            # The held bodies and the slow call are all still waiting.
            for sock in held:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1)
            assert slow.is_alive()
        finally:
            slow_provider.released.set()
            slow.join(90)
            for sock in held:
                sock.close()
    assert len(slow_answers) == 1


@pytest.mark.django_db(transaction=True)
def test_a_request_holds_no_database_connection_while_the_provider_answers(
    alice_api, provider_server, monkeypatch
):
    """A call waiting on a provider gives its connection back first, so that many waiting
    calls do not hold the connections the other requests need (storage/connections.py, run
    by the outbound client before every request it sends)."""
    held_during_call = []
    exchange = client.address_for

    def observed(*args, **kwargs):
        held_during_call.append(connections["default"].connection is not None)
        return exchange(*args, **kwargs)

    monkeypatch.setattr(client, "address_for", observed)
    assert alice_api.test("github", creds(api_key="ghp_x")).status_code == 200
    assert held_during_call == [False]


@pytest.mark.django_db(transaction=True)
def test_a_call_holds_no_database_connection_object_while_it_waits_or_streams(
    alice_api, provider_server, monkeypatch
):
    """Nor the closed connection's object (Django's, about 4.5 KiB): hundreds of calls waiting
    on their providers, or streaming their answers, on one worker keep none. The stream's audit
    event, at its end, is written through a new one."""
    assert alice_api.store("github", creds(api_key="ghp_x")).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    token = agent_token(alice_api, "bot")
    provider_server.answer(
        200, headers={"Content-Type": "text/event-stream"}, chunks=(b"data: 1\n\n", b"data: 2\n\n")
    )
    during_call = []
    exchange = client.address_for

    def observed(*args, **kwargs):
        during_call.append(connections.all(initialized_only=True))
        return exchange(*args, **kwargs)

    monkeypatch.setattr(client, "address_for", observed)
    before = connections["default"]
    response = Client().get(
        f"{PROXY_PREFIX}/github/stream", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.streaming
    assert during_call == [[]]
    assert connections.all(initialized_only=True) == []  # while the body streams
    assert b"".join(response.streaming_content) == b"data: 1\n\ndata: 2\n\n"
    event = AuditEvent.objects.filter(action="agent.proxy").get()
    assert (event.outcome, event.upstream_status) == ("success", 200)
    assert connections["default"] is not before


@pytest.mark.django_db(transaction=True)
def test_a_connection_given_back_is_built_again_on_the_same_database():
    Account.objects.create(name="kept")
    before = connections["default"]
    give_back_connections()
    assert connections.all(initialized_only=True) == []
    assert Account.objects.get(name="kept")  # the test database, not the configured one
    assert connections["default"] is not before
    assert connections["default"].settings_dict["NAME"] == before.settings_dict["NAME"]


@pytest.mark.django_db(transaction=True)
def test_a_connection_inside_a_transaction_is_kept_with_its_object():
    with transaction.atomic():
        Account.objects.create(name="pending")
        before = connections["default"]
        give_back_connections()
        assert connections["default"] is before
        assert before.connection is not None
        assert Account.objects.filter(name="pending").exists()  # the same transaction
    assert Account.objects.filter(name="pending").exists()
