"""Each body limit is declared once and read by every check of it: the API's
(`services.api.wsgi.MAX_BODY_BYTES`) by the WSGI wrapper and the strict reader, a brokered
call's (`services.broker.limits.max_body`) by the wrapper, the proxy view (by the declared
length, before the body is read) and the broker; each refusal says the one sentence
`PayloadTooLarge.over`."""

from __future__ import annotations

import pytest
from django.core.handlers.wsgi import WSGIRequest

from services.api import wsgi
from services.broker import limits
from services.exceptions import PayloadTooLarge
from tests.support.helpers import agent_token, assert_problem, creds, marked, put_agent
from tests.support.helpers import call as proxy_call

CREDENTIALS = "/api/v1/services/credentials"


def never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(self: WSGIRequest) -> bytes:
        raise AssertionError("the body was read")

    monkeypatch.setattr(WSGIRequest, "body", property(never))


@pytest.mark.django_db
def test_the_api_refusal_says_the_declared_limit(alice_api, monkeypatch):
    never_read(monkeypatch)
    response = alice_api.raw("PUT", CREDENTIALS, b"x" * (wsgi.MAX_BODY_BYTES + 1))
    assert_problem(response, 413, "payload_too_large")
    assert response.json()["detail"] == str(PayloadTooLarge.over(64 * 1024).detail)
    assert response.json()["detail"] == "The body is larger than 65536 bytes."


@pytest.mark.django_db
def test_the_api_limit_is_one_declaration(alice_api, monkeypatch):
    monkeypatch.setattr(wsgi, "MAX_BODY_BYTES", 100)
    assert wsgi.body_limit({"PATH_INFO": CREDENTIALS}) == 100
    never_read(monkeypatch)
    response = alice_api.raw("PUT", CREDENTIALS, b"x" * 101)
    assert_problem(response, 413, "payload_too_large")
    assert response.json()["detail"] == "The body is larger than 100 bytes."


@pytest.mark.django_db
def test_the_brokered_limit_is_one_declaration(alice_api, provider_server, monkeypatch):
    assert alice_api.store("github", creds(api_key=marked("gh"))).status_code == 201
    assert put_agent(alice_api, "bot", ["github"], access=None).status_code == 201
    token = agent_token(alice_api, "bot")
    monkeypatch.setattr(limits, "max_body", lambda: 10)
    assert wsgi.body_limit({"PATH_INFO": wsgi.PROXY_PATH_PREFIX + "github/x"}) == 10
    with pytest.raises(PayloadTooLarge) as refused:
        limits.check_body(b"x" * 11)
    # The proxy view refuses by the declared length: the body is never read.
    never_read(monkeypatch)
    response = proxy_call(token, "POST", "github", "/x", body=b"x" * 11)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert response.json()["detail"] == str(refused.value.detail)
    assert response.json()["detail"] == "The body is larger than 10 bytes."
