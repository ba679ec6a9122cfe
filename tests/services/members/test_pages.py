"""The account pages through Django's test client: sign-in and its one answer for an unknown
email and a wrong password, the lock-out page, the sign-in link, cookies, CSRF, and the
headers every page carries."""

from __future__ import annotations

import logging
import re
from http.cookies import SimpleCookie

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from services.members import FAILURES_PER_ADDRESS, FAILURES_PER_EMAIL, create_member
from tests.services.members.conftest import secret_of
from tests.support.helpers import marked

pytestmark = pytest.mark.django_db

CSRF_INPUT = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')


def log_in(client: Client, email: str, password: str, *, headers=None, **extra):
    form = {"email": email, "password": password, **extra}
    return client.post("/account/login", form, headers=headers)


def assert_page(response, status: int) -> str:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("text/html")
    assert response["Cache-Control"] == "no-store"
    assert "default-src 'none'" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "same-origin"
    return response.content.decode()


class TestLogin:
    def test_the_page_has_a_form_with_its_csrf_token(self, db):
        text = assert_page(Client().get("/account/login"), 200)
        assert 'name="csrfmiddlewaretoken"' in text
        assert 'name="email"' in text
        assert 'name="password"' in text

    def test_a_member_signs_in_and_lands_on_their_page(self, signed_up):
        client = Client()
        response = log_in(client, signed_up.email, signed_up.password)
        assert response.status_code == 303
        assert response["Location"] == "/account/"
        text = assert_page(client.get("/account/"), 200)
        assert "Signed in as <strong>person@example.com</strong>" in text
        assert "<strong>alice</strong>" in text

    def test_unknown_email_and_wrong_password_answer_byte_for_byte_alike(self, signed_up):
        unknown = log_in(Client(), "nobody@example.com", signed_up.password)
        wrong = log_in(Client(), signed_up.email, marked("wrong"))
        assert unknown.status_code == wrong.status_code == 400
        assert CSRF_INPUT.sub(b"", unknown.content) == CSRF_INPUT.sub(b"", wrong.content)
        assert sorted(unknown.headers) == sorted(wrong.headers)
        assert "The email or the password is wrong." in unknown.content.decode()
        assert "nobody@example.com" not in unknown.content.decode()

    def test_too_many_failures_answer_429_and_say_to_wait(self, signed_up):
        client = Client()
        for _ in range(FAILURES_PER_EMAIL):
            assert log_in(client, signed_up.email, "wrong").status_code == 400
        response = log_in(client, signed_up.email, signed_up.password)
        text = assert_page(response, 429)
        assert "Too many failed sign-ins. Wait 15 minutes before you try again." in text
        assert 899 <= int(response["Retry-After"]) <= 900
        assert "sessionid" not in response.cookies

    def test_behind_a_trusted_proxy_the_address_is_the_one_it_added(self, signed_up, settings):
        settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
        client = Client()
        for n in range(FAILURES_PER_ADDRESS):
            # What the client claims varies; the address nginx adds last does not.
            behind = {"X-Forwarded-For": f"10.9.9.{n}, 203.0.113.5"}
            response = log_in(client, f"guess{n}@example.com", "x", headers=behind)
            assert response.status_code == 400
        response = log_in(client, signed_up.email, signed_up.password, headers=behind)
        assert response.status_code == 429
        other = {"X-Forwarded-For": "203.0.113.5, 203.0.113.6"}
        response = log_in(client, signed_up.email, signed_up.password, headers=other)
        assert response.status_code == 303

    @pytest.mark.parametrize(
        ("given", "goes"),
        [
            ("/approvals/apv_x", "/approvals/apv_x"),
            ("https://evil.example/", "/account/"),
            ("//evil.example/x", "/account/"),
            ("/\\evil.example", "/account/"),
            ("javascript:alert(1)", "/account/"),
        ],
    )
    def test_next_is_honoured_for_a_local_path_only(self, signed_up, given, goes):
        page = Client().get("/account/login", {"next": given})
        assert_page(page, 200)
        response = log_in(Client(), signed_up.email, signed_up.password, next=given)
        assert response.status_code == 303
        assert response["Location"] == goes

    def test_a_signed_in_member_opening_the_login_goes_on(self, signed_up):
        client = Client()
        log_in(client, signed_up.email, signed_up.password)
        response = client.get("/account/login", {"next": "/approvals/apv_y"})
        assert response.status_code == 303
        assert response["Location"] == "/approvals/apv_y"

    def test_signed_out_the_home_page_sends_to_the_login(self, db):
        response = Client().get("/account/")
        assert response.status_code == 303
        assert response["Location"] == "/account/login?next=%2Faccount%2F"

    def test_sign_out_ends_the_session(self, signed_up):
        client = Client()
        log_in(client, signed_up.email, signed_up.password)
        response = client.post("/account/logout")
        assert response.status_code == 303
        assert response["Location"] == "/account/login?signed_out=1"
        assert client.get("/account/").status_code == 303
        assert "You are signed out." in client.get(response["Location"]).content.decode()

    def test_a_staff_session_is_no_members(self, db, alice):
        from django.contrib.auth.models import User

        User.objects.create_superuser("staff", "staff@example.com", "staff-password")
        client = Client()
        client.login(username="staff", password="staff-password")
        assert client.get("/account/").status_code == 303

    def test_a_members_session_opens_no_api(self, signed_up):
        client = Client()
        log_in(client, signed_up.email, signed_up.password)
        response = client.get("/api/v1/services")
        assert response.status_code == 401


class TestCookies:
    def test_the_session_cookie_is_httponly_and_lax(self, signed_up):
        response = log_in(Client(), signed_up.email, signed_up.password)
        session = response.cookies["sessionid"]
        assert session["httponly"]
        assert session["samesite"] == "Lax"
        assert not session["secure"]  # the local .env's plain HTTP

    def test_secure_when_configured_so(self, signed_up, settings):
        settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
        client = Client()
        page = client.get("/account/login")
        assert page.cookies["csrftoken"]["secure"]
        assert page.cookies["csrftoken"]["httponly"]
        assert page.cookies["csrftoken"]["samesite"] == "Lax"
        response = log_in(client, signed_up.email, signed_up.password)
        header = SimpleCookie(response.cookies.output(header=""))
        assert header["sessionid"]["secure"]


class TestCsrf:
    @pytest.mark.parametrize("path", ["/account/login", "/account/logout", "/account/sign-in/x"])
    def test_a_post_without_its_token_is_a_403_page(self, db, path):
        response = Client(enforce_csrf_checks=True).post(path, {"email": "a@example.com"})
        text = assert_page(response, 403)
        assert "The form could not be checked" in text

    def test_with_its_token_the_form_is_accepted(self, signed_up):
        client = Client(enforce_csrf_checks=True)
        page = client.get("/account/login")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
        assert token is not None
        response = log_in(
            client, signed_up.email, signed_up.password, csrfmiddlewaretoken=token.group(1)
        )
        assert response.status_code == 303


class TestLinkPage:
    def test_the_link_sets_the_password_signs_in_and_works_once(self, alice, caplog):
        caplog.set_level(logging.DEBUG)
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        client = Client()
        text = assert_page(client.get(f"/account/sign-in/{secret}"), 200)
        assert "person@example.com" in text
        password = marked("password")
        response = client.post(
            f"/account/sign-in/{secret}", {"password": password, "password_again": password}
        )
        assert response.status_code == 303
        assert response["Location"] == "/account/"
        assert "You are signed in" in client.get("/account/").content.decode()
        again = assert_page(Client().get(f"/account/sign-in/{secret}"), 410)
        assert "was used already" in again
        logged = "\n".join(record.getMessage() for record in caplog.records)
        assert "/account/sign-in/..." in logged
        assert secret not in logged
        assert password not in logged

    def test_a_refused_password_shows_why_and_keeps_the_link(self, alice):
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        response = Client().post(
            f"/account/sign-in/{secret}", {"password": "short1", "password_again": "short1"}
        )
        text = assert_page(response, 400)
        assert "too short" in text
        assert_page(Client().get(f"/account/sign-in/{secret}"), 200)

    def test_an_unknown_link_is_404(self, db):
        text = assert_page(Client().get("/account/sign-in/nothing"), 404)
        assert "not valid" in text


class TestRemoval:
    def test_remove_member_signs_a_live_session_out_at_once(self, signed_up):
        client = Client()
        log_in(client, signed_up.email, signed_up.password)
        assert client.get("/account/").status_code == 200
        call_command("remove_member", "alice", signed_up.email, stdout=None)
        response = client.get("/account/")
        assert response.status_code == 303
        assert response["Location"].startswith("/account/login")


class TestLeaks:
    def test_no_password_or_link_secret_in_a_log_or_a_page(self, alice, caplog):
        caplog.set_level(logging.DEBUG)
        link = create_member(account=alice, email="person@example.com")
        secret = secret_of(link.url)
        password = marked("password")
        wrong = marked("wrong")
        client = Client()
        pages = [
            client.get(f"/account/sign-in/{secret}"),
            client.post(
                f"/account/sign-in/{secret}", {"password": password, "password_again": password}
            ),
            client.post("/account/logout"),
            log_in(client, "person@example.com", wrong),
            log_in(client, "nobody@example.com", wrong),
            log_in(client, "person@example.com", password),
            client.get("/account/"),
        ]
        for response in pages:
            body = response.content.decode()
            assert secret not in body
            assert password not in body
            assert wrong not in body
        logged = "\n".join(
            f"{record.getMessage()} {record.args} {record.exc_text}" for record in caplog.records
        )
        for value in (secret, password, wrong):
            assert value not in logged
        assert_in_no_table([secret, password, wrong])


def assert_in_no_table(needles: list[str]) -> None:
    rows = 0
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            for row in cursor.fetchall():
                rows += 1
                text = " ".join(str(cell) for cell in row)
                for needle in needles:
                    assert needle not in text, table
    assert rows > 0
