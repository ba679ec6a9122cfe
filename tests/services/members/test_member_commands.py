"""create_member and remove_member as an operator runs them: the link printed once on
standard output, what happened on standard error, one-line refusals."""

from __future__ import annotations

import logging
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from services.models import AuditEvent, Member, SignInLink

pytestmark = pytest.mark.django_db

LINK = re.compile(r"^http://127\.0\.0\.1:8000/account/sign-in/[A-Za-z0-9_-]{43}$")


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _public_url(settings):
    settings.CREDVAULT_PUBLIC_URL = "http://127.0.0.1:8000"


def test_create_member_prints_the_link_alone_on_stdout(alice, caplog):
    caplog.set_level(logging.DEBUG)
    out, err = run("create_member", "alice", "Person@Example.com")
    link = out.strip()
    assert LINK.match(link), out
    assert "created member person@example.com of alice" in err
    assert "usable once until" in err
    secret = link.rsplit("/", 1)[1]
    assert secret not in err
    assert all(secret not in record.getMessage() for record in caplog.records)
    assert Member.objects.get().user.username == "person@example.com"


def test_an_existing_member_gets_a_new_link_and_is_told_so(alice):
    first, _ = run("create_member", "alice", "person@example.com")
    second, err = run("create_member", "alice", "person@example.com", "--expires-in", "2")
    assert first != second
    assert "person@example.com is a member of alice already: a new sign-in link" in err
    assert SignInLink.objects.count() == 1
    assert Member.objects.count() == 1


def test_remove_member(alice):
    run("create_member", "alice", "person@example.com")
    out, _ = run("remove_member", "alice", " PERSON@example.com ")
    assert out.strip() == "removed member person@example.com of alice"
    assert not Member.objects.exists()
    assert AuditEvent.objects.filter(action="members.remove").count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create_member", "nobody", "a@example.com"], "no account named 'nobody'"),
        (["create_member", "alice", "not-an-email"], "'not-an-email' is not an email address"),
        (["create_member", "alice", "a@example.com", "--expires-in", "0"], "--expires-in takes"),
        (["create_member", "alice", "a@example.com", "--expires-in", "169"], "from 1 to 168"),
        (["remove_member", "nobody", "a@example.com"], "no account named 'nobody'"),
        (["remove_member", "alice", "bad"], "'bad' is not an email address"),
        (["remove_member", "alice", "ghost@example.com"], "is not a member of the account alice"),
    ],
)
def test_refusals_are_one_line(alice, args, message):
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        run(*args)
    assert "\n" not in str(refused.value)
    assert not Member.objects.exists()
