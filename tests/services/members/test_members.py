"""Members' rules: who is one, their one-time sign-in link, signing in with its limits, and
removal, which ends their sessions."""

from __future__ import annotations

import hashlib
import statistics
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from services.members import (
    FAILURES_PER_ADDRESS,
    FAILURES_PER_EMAIL,
    LinkRefused,
    MemberError,
    PasswordRefused,
    SignInLocked,
    SignInRefused,
    create_member,
    link_member,
    member_of,
    normalized_email,
    remove_member,
    set_password_with_link,
    sign_in,
)
from services.models import AuditEvent, Member, SignInLink
from tests.services.members.conftest import CountingHasher, secret_of
from tests.support.helpers import marked

pytestmark = pytest.mark.django_db

HERE = "192.0.2.1"


def attempt(email: str, password: str, address: str = HERE):
    return sign_in(email=email, password=password, client_address=address, request_id="t")


def set_password(secret: str, password: str, again: str | None = None):
    return set_password_with_link(
        secret=secret, password=password, password_again=again or password, request_id="t"
    )


class TestCreate:
    def test_the_link_is_shown_once_and_only_its_digest_is_stored(self, alice, settings):
        settings.CREDVAULT_PUBLIC_URL = "https://vault.example.com"
        link = create_member(account=alice, email="  Person@Example.COM ")
        assert link.url.startswith("https://vault.example.com/account/sign-in/")
        secret = secret_of(link.url)
        assert len(secret) >= 43
        stored = SignInLink.objects.get()
        assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
        assert secret not in repr(link)
        assert secret not in str(stored) + repr(stored)
        assert not link.existed
        assert link.expires_at - timezone.now() == pytest.approx(
            timedelta(hours=24), abs=timedelta(seconds=5)
        )
        member = Member.objects.get()
        assert member.user.username == member.user.email == "person@example.com"
        assert not member.user.has_usable_password()
        event = AuditEvent.objects.get(action="members.create")
        assert (event.member, event.token_prefix) == ("person@example.com", "cli")

    def test_a_new_link_for_a_member_replaces_the_unused_ones(self, alice):
        first = create_member(account=alice, email="person@example.com")
        second = create_member(account=alice, email="PERSON@example.com", expires_in_hours=2)
        assert second.existed
        with pytest.raises(LinkRefused) as refused:
            link_member(secret=secret_of(first.url))
        assert refused.value.status == 404
        assert link_member(secret=secret_of(second.url)).user.username == "person@example.com"
        assert Member.objects.count() == 1

    @pytest.mark.parametrize(
        "email", ["", "person", "a@b", "two@example.com x", "a" * 150 + "@e.com"]
    )
    def test_a_bad_email_is_refused_in_one_line(self, alice, email):
        with pytest.raises(MemberError, match="is not an email address") as refused:
            create_member(account=alice, email=email)
        assert "\n" not in str(refused.value)
        assert not Member.objects.exists()

    @pytest.mark.parametrize("hours", [0, -1, 169])
    def test_a_link_lives_1_to_168_hours(self, alice, hours):
        with pytest.raises(MemberError, match="1 to 168 hours"):
            create_member(account=alice, email="person@example.com", expires_in_hours=hours)

    def test_a_member_of_another_account_is_refused(self, alice, bob):
        create_member(account=alice, email="person@example.com")
        with pytest.raises(MemberError, match="a member of another account"):
            create_member(account=bob, email="person@example.com")

    def test_normalized_email(self):
        assert normalized_email(" A.Person@Example.Com\n") == "a.person@example.com"


class TestLink:
    def test_a_link_sets_the_password_once(self, alice):
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        password = marked("pw")
        member = set_password(secret, password)
        assert member.user.check_password(password)
        assert password not in member.user.password
        with pytest.raises(LinkRefused, match="used already") as refused:
            set_password(secret, marked("again"))
        assert refused.value.status == 410
        with pytest.raises(LinkRefused, match="used already"):
            link_member(secret=secret)
        event = AuditEvent.objects.get(action="members.sign_in")
        assert (event.member, event.token_prefix) == ("person@example.com", "member")

    def test_a_link_expires(self, alice):
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        SignInLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        with pytest.raises(LinkRefused, match="expired") as refused:
            set_password(secret, marked("pw"))
        assert refused.value.status == 410
        assert not Member.objects.get().user.has_usable_password()

    def test_an_unknown_link_is_not_valid(self, db):
        with pytest.raises(LinkRefused, match="not valid") as refused:
            link_member(secret="nothing-of-the-kind")
        assert refused.value.status == 404

    def test_two_different_passwords_are_refused_and_the_link_stays(self, alice):
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        with pytest.raises(PasswordRefused, match="differ"):
            set_password(secret, marked("one"), marked("two"))
        assert link_member(secret=secret).user.username == "person@example.com"

    @pytest.mark.parametrize(
        ("password", "says"),
        [("short1", "too short"), ("password12345", "too common"), ("8" * 14, "entirely numeric")],
    )
    def test_djangos_validators_judge_the_password(self, alice, password, says):
        secret = secret_of(create_member(account=alice, email="person@example.com").url)
        with pytest.raises(PasswordRefused, match=says) as refused:
            set_password(secret, password)
        assert refused.value.email == "person@example.com"


class TestSignIn:
    def test_the_right_password_signs_in_and_is_audited(self, signed_up):
        member = attempt(" PERSON@example.com", signed_up.password)
        assert member.pk == signed_up.member.pk
        events = AuditEvent.objects.filter(action="members.sign_in", member=signed_up.email)
        assert events.count() == 2  # the link's, and this one

    def test_an_unknown_email_and_a_wrong_password_are_one_answer(self, signed_up):
        with pytest.raises(SignInRefused) as unknown:
            attempt("nobody@example.com", signed_up.password)
        with pytest.raises(SignInRefused) as wrong:
            attempt(signed_up.email, marked("wrong"))
        assert str(unknown.value) == str(wrong.value) == "The email or the password is wrong."

    def test_an_unknown_email_costs_the_same_hashing_as_a_wrong_password(self, signed_up):
        CountingHasher.hashed = 0
        with pytest.raises(SignInRefused):
            attempt("nobody@example.com", "whatever")
        unknown = CountingHasher.hashed
        CountingHasher.hashed = 0
        with pytest.raises(SignInRefused):
            attempt(signed_up.email, "whatever")
        assert unknown == CountingHasher.hashed == 1

    def test_a_staff_user_who_is_no_member_is_refused_alike(self, db):
        User.objects.create_superuser("staff@example.com", "staff@example.com", "staff-pass-123")
        with pytest.raises(SignInRefused):
            attempt("staff@example.com", "staff-pass-123")

    def test_a_member_of_a_deactivated_account_is_refused_alike(self, signed_up, alice):
        alice.is_active = False
        alice.save()
        with pytest.raises(SignInRefused):
            attempt(signed_up.email, signed_up.password)


class TestLimits:
    def test_ten_failures_for_an_email_lock_it_for_15_minutes(self, signed_up, monkeypatch):
        for n in range(FAILURES_PER_EMAIL):
            with pytest.raises(SignInRefused):
                attempt(signed_up.email, marked("wrong"), address=f"198.51.100.{n}")
        # The right password, from yet another address: refused while the lock holds.
        with pytest.raises(SignInLocked, match="Wait 15 minutes") as locked:
            attempt(signed_up.email, signed_up.password, address="203.0.113.9")
        assert 899 <= locked.value.wait_seconds <= 900
        # Another email from the same addresses is not locked.
        with pytest.raises(SignInRefused):
            attempt("other@example.com", "x", address="198.51.100.1")
        later = time.time() + 15 * 60 + 1
        monkeypatch.setattr(time, "time", lambda: later)
        assert attempt(signed_up.email, signed_up.password).pk == signed_up.member.pk

    def test_thirty_failures_from_an_address_lock_it(self, signed_up, monkeypatch):
        for n in range(FAILURES_PER_ADDRESS):
            with pytest.raises(SignInRefused):
                attempt(f"guess{n}@example.com", "x")
        with pytest.raises(SignInLocked):
            attempt(signed_up.email, signed_up.password)
        assert attempt(signed_up.email, signed_up.password, address="203.0.113.9")
        later = time.time() + 15 * 60 + 1
        monkeypatch.setattr(time, "time", lambda: later)
        assert attempt(signed_up.email, signed_up.password)

    def test_a_locked_attempt_hashes_nothing(self, signed_up):
        for _ in range(FAILURES_PER_EMAIL):
            with pytest.raises(SignInRefused):
                attempt(signed_up.email, "x")
        CountingHasher.hashed = 0
        with pytest.raises(SignInLocked):
            attempt(signed_up.email, signed_up.password)
        assert CountingHasher.hashed == 0

    def test_a_sign_in_clears_the_emails_failures(self, signed_up):
        for _ in range(FAILURES_PER_EMAIL - 1):
            with pytest.raises(SignInRefused):
                attempt(signed_up.email, "x")
        attempt(signed_up.email, signed_up.password)
        for _ in range(FAILURES_PER_EMAIL - 1):
            with pytest.raises(SignInRefused):
                attempt(signed_up.email, "x")
        assert attempt(signed_up.email, signed_up.password)


class TestWhoIsAMember:
    def test_a_staff_user_is_no_member_unless_made_one(self, alice):
        staff = User.objects.create_superuser("admin@example.com", "admin@example.com", "pw")
        assert member_of(staff) is None
        link = create_member(account=alice, email="ADMIN@example.com")
        assert not link.existed
        assert member_of(staff).account_id == alice.pk  # type: ignore[union-attr]
        assert staff.check_password("pw")  # the admin password still works

    def test_an_inactive_user_or_account_is_no_member(self, signed_up, alice):
        user = signed_up.member.user
        assert member_of(user) is not None
        alice.is_active = False
        alice.save()
        assert member_of(user) is None


def session_of(user_id: int) -> str:
    store = SessionStore()
    store["_auth_user_id"] = str(user_id)
    store.create()
    assert store.session_key
    return store.session_key


class TestRemove:
    def test_removal_deletes_the_member_and_every_session_of_theirs(self, signed_up, alice, bob):
        user_id = signed_up.member.user_id
        theirs = {session_of(user_id), session_of(user_id)}
        other = create_member(account=bob, email="other@example.com").member
        kept = session_of(other.user_id)
        remove_member(account=alice, email=" Person@Example.com")
        assert not Member.objects.filter(pk=signed_up.member.pk).exists()
        assert not User.objects.filter(pk=user_id).exists()
        remaining = set(Session.objects.values_list("session_key", flat=True))
        assert remaining == {kept}
        assert not theirs & remaining
        event = AuditEvent.objects.get(action="members.remove")
        assert (event.member, event.token_prefix) == ("person@example.com", "cli")

    def test_a_staff_member_keeps_their_user(self, alice):
        staff = User.objects.create_superuser("admin@example.com", "admin@example.com", "pw")
        create_member(account=alice, email="admin@example.com")
        session_of(staff.pk)
        remove_member(account=alice, email="admin@example.com")
        assert User.objects.filter(pk=staff.pk).exists()
        assert member_of(staff) is None
        assert not Session.objects.exists()

    def test_only_a_member_of_that_account_is_removed(self, signed_up, bob):
        with pytest.raises(MemberError, match="is not a member of the account bob"):
            remove_member(account=bob, email=signed_up.email)
        assert Member.objects.filter(pk=signed_up.member.pk).exists()


def test_the_admin_lists_members_read_only(alice, bob):
    from django.test import Client

    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    create_member(account=alice, email="person@example.com")
    link = create_member(account=bob, email="other@example.com")
    client = Client()
    client.force_login(staff)
    listed = client.get("/admin/services/member/")
    assert listed.status_code == 200
    text = listed.content.decode()
    assert "person@example.com" in text
    assert "other@example.com" in text
    assert secret_of(link.url) not in text
    detail = client.get(f"/admin/services/member/{link.member.pk}/change/")
    assert detail.status_code == 200
    assert "other@example.com" in detail.content.decode()
    assert "/admin/services/member/add/" not in text


@pytest.mark.slow
def test_an_unknown_email_takes_as_long_as_a_wrong_password(signed_up, settings):
    """With Django's own hasher (PBKDF2, slow on purpose): the medians of five attempts each
    are within a quarter of each other. The attempts alternate, so that other work on the
    machine (CI runs two test processes) slows both kinds alike."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = signed_up.member.user
    user.set_password(signed_up.password)
    user.save()

    def seconds(email: str, n: int) -> float:
        started = time.perf_counter()
        with pytest.raises(SignInRefused):
            attempt(email, "wrong-password", address=f"192.0.2.{n + 10}")
        return time.perf_counter() - started

    timed: dict[str, list[float]] = {"nobody@example.com": [], signed_up.email: []}
    for n in range(5):
        for email, times in timed.items():
            times.append(seconds(email, n))
    unknown, wrong = (statistics.median(times) for times in timed.values())
    print(f"unknown email {unknown * 1000:.0f} ms, wrong password {wrong * 1000:.0f} ms")
    assert 0.75 < unknown / wrong < 1.33
