"""Request bodies without Content-Length (Transfer-Encoding: chunked), through the WSGI
application: stored whole, refused with 413 over the size limit, 411 when the input has no end."""

from __future__ import annotations

import io
import json

import pytest
from django.test import RequestFactory

from tests.support.helpers import creds


@pytest.mark.django_db(transaction=True)
class TestChunkedBodies:
    """A body without Content-Length is read whole (gunicorn marks its end), never as empty."""

    def _environ(self, token: str, raw: bytes, *, terminated: bool = True) -> dict:
        request = RequestFactory().put(
            "/api/v1/services/credentials",
            raw,
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        environ = dict(request.environ)
        environ.pop("CONTENT_LENGTH")
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input"] = io.BytesIO(raw)
        environ["wsgi.input_terminated"] = terminated
        return environ

    def _call(self, environ: dict) -> tuple[str, bytes]:
        from credvault.wsgi import application

        status = []
        chunks = application(environ, lambda s, h, exc_info=None: status.append(s))
        return status[0], b"".join(chunks)

    def test_chunked_body_is_stored(self, alice_account_and_token):
        _, token = alice_account_and_token
        raw = json.dumps({"service": "chunked", "credentials": creds(api_key="v")}).encode()
        status, body = self._call(self._environ(token, raw))
        assert status.startswith("201"), body

    def test_chunked_body_over_the_limit_is_413(self, alice_account_and_token):
        _, token = alice_account_and_token
        status, body = self._call(self._environ(token, b"x" * (70 * 1024)))
        assert status.startswith("413")
        assert json.loads(body)["code"] == "payload_too_large"

    def test_unterminated_input_is_411(self, alice_account_and_token):
        _, token = alice_account_and_token
        status, body = self._call(self._environ(token, b"{}", terminated=False))
        assert status.startswith("411")
        assert json.loads(body)["code"] == "length_required"
