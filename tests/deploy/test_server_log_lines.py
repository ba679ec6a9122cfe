"""What a live server writes to its log for a client's mistake: one line, never a traceback.

A request whose `Host` is not in ALLOWED_HOSTS (a scanner, a misrouted client) is answered 400
as problem details; Django logs it on `django.security.DisallowedHost` with its whole stack,
which filled the log with the same traceback for every such request.
"""

from __future__ import annotations

import http.client
import json

from tests.support.harness import Gunicorn, server_env


def test_a_bad_host_is_one_log_line_naming_the_host(tmp_path):
    log = tmp_path / "gunicorn.log"
    env = server_env(f"sqlite:///{tmp_path / 'hosts.sqlite3'}", LOG_LEVEL="INFO")
    with Gunicorn(env, workers=1, log=log) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/api/v1/services", headers={"Host": "evil.example.com"})
        answer = connection.getresponse()
        body = json.loads(answer.read())
        connection.close()
    assert answer.status == 400
    assert body["code"] == "invalid_request"
    text = log.read_text()
    [line] = [line for line in text.splitlines() if "django.security.DisallowedHost" in line]
    assert "Invalid HTTP_HOST header: 'evil.example.com'" in line
    assert "ALLOWED_HOSTS" in line
    assert "Traceback" not in text
    assert "django.core.exceptions.DisallowedHost" not in text
    # The access log has the request's line as ever.
    assert "GET /api/v1/services 400" in text
