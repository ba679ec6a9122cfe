"""Members of an account: the people who sign in to credvault's pages to decide what its
agents ask for. A member is a Django user whose username and email are the member's email
(stripped, lower-case), tied to one account; staff users are not members unless made so.

A member gets a one-time sign-in link, `{CREDVAULT_PUBLIC_URL}/account/sign-in/{secret}`
(the secret is 32 random bytes in base64url; only its SHA-256 hex digest is stored), where
they set a password; then they sign in with email and password. Sign-in counts failures on
the configured cache: after 10 in 15 minutes for one email, or 30 from one client address,
attempts are refused for 15 minutes (`SignInLocked`). An unknown email and a wrong password
get the same `SignInRefused`, after the same hashing work. Removing a member ends every
session of theirs at once.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar
from urllib.parse import urlencode

import gevent
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.hashers import check_password, make_password
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.contrib.auth.password_validation import validate_password
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest
from django.utils import timezone
from gevent import monkey

from services import audit
from services.audit import Actor, Operation
from services.consent.decisions import MEMBER_ACTOR
from services.models import Account, Member, SignInLink
from services.storage.transactions import account_transaction

logger = logging.getLogger("credvault.members")
_T = TypeVar("_T")

SIGN_IN_PATH = "/account/sign-in/"
LOGIN_PATH = "/account/login"
# A sign-in link lives 24 hours unless the command asks otherwise, at most a week.
LINK_HOURS = 24
MAX_LINK_HOURS = 168
# The longest email a username holds.
MAX_EMAIL_LENGTH = 150
# Failed sign-ins: counted per email and per client address over the window; past the limit,
# every attempt is refused until the lock-out ends.
FAILURES_PER_EMAIL = 10
FAILURES_PER_ADDRESS = 30
FAILURE_WINDOW_SECONDS = 15 * 60
LOCKOUT_SECONDS = 15 * 60


class MemberError(ValueError):
    """A refused member operation; the message is one line and safe to print or show."""


class LinkRefused(MemberError):
    """A sign-in link that is unknown (404), or used or expired (410): the message says
    which."""

    def __init__(self, message: str, *, status: int = 410) -> None:
        super().__init__(message)
        self.status = status


class PasswordRefused(MemberError):
    """A new password the validators refuse, or two that differ: `messages` says why;
    `email` is the link's member."""

    def __init__(self, messages: list[str], *, email: str) -> None:
        super().__init__(" ".join(messages))
        self.messages = messages
        self.email = email


class SignInRefused(MemberError):
    """Wrong email or password: the one answer to both."""

    def __init__(self) -> None:
        super().__init__("The email or the password is wrong.")


class SignInLocked(MemberError):
    """Too many failed sign-ins for this email or from this address."""

    def __init__(self, wait_seconds: int) -> None:
        self.wait_seconds = wait_seconds
        minutes = max(1, -(-wait_seconds // 60))
        super().__init__(
            "Too many failed sign-ins. Wait "
            f"{minutes} minute{'s' if minutes != 1 else ''} before you try again."
        )


@dataclass(frozen=True, slots=True)
class NewLink:
    """A sign-in link just made: `url` holds its secret and is shown once, never stored.
    `existed`: the member was already one (the link replaces their earlier ones)."""

    member: Member
    url: str
    expires_at: datetime
    existed: bool

    def __repr__(self) -> str:
        return f"NewLink(member={self.member!r}, existed={self.existed})"


def normalized_email(email: str) -> str:
    """`email` stripped and lower-cased, or MemberError saying it is not an email address."""
    normal = email.strip().lower()
    try:
        if len(normal) > MAX_EMAIL_LENGTH:
            raise ValidationError("too long")
        validate_email(normal)
    except ValidationError:
        raise MemberError(f"{_shown(email)} is not an email address") from None
    return normal


def _shown(text: str) -> str:
    """A value quoted on one line, cut to a readable length."""
    cut = text if len(text) <= 80 else text[:77] + "..."
    return repr(cut)


def _link_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def sign_in_url(secret: str) -> str:
    return f"{settings.CREDVAULT_PUBLIC_URL.rstrip('/')}{SIGN_IN_PATH}{secret}"


def create_member(*, account: Account, email: str, expires_in_hours: int = LINK_HOURS) -> NewLink:
    """Make `email` a member of `account` (an existing user of that username becomes one) and
    return a new sign-in link; a member already gets a new link, and their unused earlier
    links stop working. A member of another account is refused."""
    email = normalized_email(email)
    if not 1 <= expires_in_hours <= MAX_LINK_HOURS:
        raise MemberError(f"the link's lifetime is 1 to {MAX_LINK_HOURS} hours")
    now = timezone.now()
    secret = secrets.token_urlsafe(32)
    with account_transaction(account.pk):
        member = Member.objects.select_related("user").filter(user__username=email).first()
        if member is not None and member.account_id != account.pk:
            raise MemberError(f"{email} is a member of another account")
        existed = member is not None
        if member is None:
            user = User.objects.filter(username=email).first()
            if user is None:
                user = User.objects.create_user(username=email, email=email)
            member = Member.objects.create(account=account, user=user)
        SignInLink.objects.filter(member=member, used_at__isnull=True).delete()
        link = SignInLink.objects.create(
            member=member,
            digest=_link_digest(secret),
            created_at=now,
            expires_at=now + timedelta(hours=expires_in_hours),
        )
        audit.record(Actor.command(account.pk), Operation.CREATE_MEMBER, member=email)
    return NewLink(
        member=member, url=sign_in_url(secret), expires_at=link.expires_at, existed=existed
    )


def remove_member(*, account: Account, email: str) -> None:
    """Remove the member `email` of `account` and end every session of theirs at once. Their
    user goes too, unless it is staff (then it keeps its admin access, signed out)."""
    email = normalized_email(email)
    with account_transaction(account.pk):
        member = (
            Member.objects.select_related("user")
            .filter(account=account, user__username=email)
            .first()
        )
        if member is None:
            raise MemberError(f"{email} is not a member of the account {account.name}")
        user = member.user
        end_sessions(user_id=user.pk)
        member.delete()
        if not (user.is_staff or user.is_superuser):
            user.delete()
        audit.record(Actor.command(account.pk), Operation.REMOVE_MEMBER, member=email)


def end_sessions(*, user_id: int) -> int:
    """Delete every stored session signed in as the user `user_id`; how many there were. A
    session names its user only inside its signed data, so each live one is read."""
    ended = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get(SESSION_KEY) == str(user_id):
            ended.append(session.session_key)
    Session.objects.filter(session_key__in=ended).delete()
    return len(ended)


def member_of(user: AbstractBaseUser | AnonymousUser | None) -> Member | None:
    """The member a signed-in user is, with its account, or None: a staff user who is not
    a member, an inactive user, a member of a deactivated account."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    member = Member.objects.select_related("account", "user").filter(user_id=user.pk).first()
    if member is None or not member.account.is_active:
        return None
    return member


def signed_in_member(request: HttpRequest) -> Member | None:
    """The member signed in on `request`'s session, or None (signed out, or not a member).
    Pages that need one redirect to `login_url(next_path=request.path)`."""
    return member_of(getattr(request, "user", None))


def login_url(*, next_path: str = "") -> str:
    """The sign-in page, coming back to the local path `next_path` after it."""
    return f"{LOGIN_PATH}?{urlencode({'next': next_path})}" if next_path else LOGIN_PATH


def link_member(*, secret: str) -> Member:
    """The member of a usable sign-in link, or LinkRefused saying why it is not."""
    return _usable(_link_of(secret), timezone.now()).member


NOT_VALID = "This sign-in link is not valid. Ask for a new one."


def _link_of(secret: str) -> SignInLink:
    link = (
        SignInLink.objects.select_related("member__user", "member__account")
        .filter(digest=_link_digest(secret))
        .first()
    )
    if link is None:
        raise LinkRefused(NOT_VALID, status=404)
    return link


def _usable(link: SignInLink, now: datetime) -> SignInLink:
    if link.used_at is not None:
        raise LinkRefused("This sign-in link was used already. Sign in with your password.")
    if link.expires_at <= now:
        raise LinkRefused("This sign-in link has expired. Ask for a new one.")
    if not link.member.account.is_active:
        raise LinkRefused(NOT_VALID, status=404)
    return link


def set_password_with_link(
    *, secret: str, password: str, password_again: str, request_id: str
) -> Member:
    """Set the member's password through their sign-in link, which is used by it (once, even
    when two requests race): the member, to be signed in. PasswordRefused when the two
    passwords differ or Django's password validators refuse it."""
    now = timezone.now()
    link = _usable(_link_of(secret), now)
    member = link.member
    if password != password_again:
        raise PasswordRefused(["The two passwords differ."], email=member.user.username)
    try:
        validate_password(password, user=member.user)
    except ValidationError as refused:
        raise PasswordRefused(list(refused.messages), email=member.user.username) from None
    with account_transaction(member.account_id):
        used = SignInLink.objects.filter(
            pk=link.pk, used_at__isnull=True, expires_at__gt=now
        ).update(used_at=now)
        if not used:
            raise LinkRefused("This sign-in link was used already. Sign in with your password.")
        member.user.password = _hashed(make_password, password)
        member.user.save(update_fields=["password"])
        _record_sign_in(member, request_id)
    return member


def sign_in(*, email: str, password: str, client_address: str, request_id: str) -> Member:
    """The member whose email and password these are, or SignInRefused (the same for an
    unknown email, a wrong password, a user who is no member), or SignInLocked while this
    email or this address has failed too often."""
    email = email.strip().lower()
    counters = _failure_counters(email, client_address)
    wait = _locked_for(counters)
    if wait:
        raise SignInLocked(wait)
    member = _checked(email, password)
    if member is None:
        _count_failure(counters)
        raise SignInRefused()
    cache.delete(counters[0].key)  # the email's count; the address's keeps counting
    with account_transaction(member.account_id):
        _record_sign_in(member, request_id)
    return member


def _checked(email: str, password: str) -> Member | None:
    member = Member.objects.select_related("user", "account").filter(user__username=email).first()
    if member is None:
        _hashed(make_password, password)  # the hashing a check costs: no answer comes sooner
        return None
    if not _hashed(check_password, password, member.user.password):
        return None
    return member if member_of(member.user) is not None else None


def _hashed(work: Callable[..., _T], *args: str) -> _T:
    """Hash a password: over a second of one core by design (PBKDF2), which in a gevent
    worker would stop every other request of the worker. There it runs in the hub's thread
    pool (hashlib releases the GIL), and only this request waits. Nothing of the database
    runs in the thread: a check never saves an upgraded hash."""
    if monkey.is_module_patched("socket"):
        return gevent.get_hub().threadpool.apply(work, args)
    return work(*args)


def _record_sign_in(member: Member, request_id: str) -> None:
    actor = Actor(account_id=member.account_id, token_prefix=MEMBER_ACTOR, request_id=request_id)
    audit.record(actor, Operation.MEMBER_SIGN_IN, member=member.user.username)


@dataclass(frozen=True, slots=True)
class _Counter:
    """Failed sign-ins of one email or one address: the count's key, the lock's key."""

    what: str
    limit: int
    key: str
    lock: str


def _failure_counters(email: str, client_address: str) -> tuple[_Counter, _Counter]:
    def counter(what: str, value: str, limit: int) -> _Counter:
        digest = hashlib.sha256(f"{what}:{value}".encode()).hexdigest()[:32]
        key = f"credvault:signin:{digest}"
        return _Counter(what=what, limit=limit, key=key, lock=f"{key}:lock")

    return (
        counter("one email", email, FAILURES_PER_EMAIL),
        counter(f"the address {client_address}", client_address, FAILURES_PER_ADDRESS),
    )


def _locked_for(counters: tuple[_Counter, ...]) -> int:
    """Seconds until every lock of these counters ends; 0 when none holds."""
    now = time.time()
    ends: list[float] = [cache.get(counter.lock) or 0.0 for counter in counters]
    return max([math.ceil(end - now) for end in ends if end > now] or [0])


def _count_failure(counters: tuple[_Counter, ...]) -> None:
    for counter in counters:
        try:
            count = cache.incr(counter.key)
        except ValueError:  # the first failure of a window
            added = cache.add(counter.key, 1, timeout=FAILURE_WINDOW_SECONDS)
            count = 1 if added else cache.incr(counter.key)
        if count >= counter.limit:
            cache.set(counter.lock, time.time() + LOCKOUT_SECONDS, timeout=LOCKOUT_SECONDS)
            cache.delete(counter.key)
            logger.warning(
                "sign-in refused for %d minutes: %d failed attempts for %s",
                LOCKOUT_SECONDS // 60,
                counter.limit,
                counter.what,
            )
