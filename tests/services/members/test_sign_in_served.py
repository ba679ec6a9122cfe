"""Sign-in under gunicorn's gevent worker: hashing a password (over a second of a core, by
design) runs off the worker's loop, so the worker's other requests are answered meanwhile."""

from __future__ import annotations

import re
import threading
import time

import pytest
import requests

from services.members import create_member, set_password_with_link
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import database_url, marked

# slow: it starts gunicorn.
pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_a_sign_in_does_not_stop_the_workers_other_requests(alice, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    password = marked("password")
    secret = create_member(account=alice, email="person@example.com").url.rsplit("/", 1)[1]
    set_password_with_link(
        secret=secret, password=password, password_again=password, request_id="t"
    )
    with Gunicorn(server_env(database_url()), workers=1) as server:
        session = requests.Session()
        page = session.get(f"{server.url}/account/login", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        form = {"email": "person@example.com", "password": password}
        answers: list[tuple[int, float]] = []

        def sign_in() -> None:
            started = time.perf_counter()
            response = session.post(
                f"{server.url}/account/login",
                {**form, "csrfmiddlewaretoken": token.group(1)},
                allow_redirects=False,
                timeout=30,
            )
            answers.append((response.status_code, time.perf_counter() - started))

        signing_in = threading.Thread(target=sign_in)
        signing_in.start()
        time.sleep(0.1)
        probes = []
        while signing_in.is_alive() and len(probes) < 20:
            started = time.perf_counter()
            assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
            probes.append(time.perf_counter() - started)
        signing_in.join()
    ((status, took),) = answers
    assert status == 303
    print(f"sign-in {took * 1000:.0f} ms; probes meanwhile {[round(p * 1000) for p in probes]} ms")
    assert probes, "the sign-in ended before any probe"
    assert max(probes) < min(0.5, took / 2)
