from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher

from services.members import create_member, set_password_with_link
from services.models import Member
from tests.support.helpers import marked

EMAIL = "person@example.com"


class CountingHasher(MD5PasswordHasher):
    """A fast hasher that counts the hashes it computes (a check computes one too)."""

    algorithm = "counting_md5"
    hashed = 0

    def encode(self, password: str, salt: str) -> str:
        CountingHasher.hashed += 1
        return super().encode(password, salt)


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    """The tests sign in hundreds of times: a fast hasher, counting."""
    settings.PASSWORD_HASHERS = ["tests.services.members.conftest.CountingHasher"]
    CountingHasher.hashed = 0


@dataclass
class SignedUp:
    member: Member
    email: str
    password: str


def secret_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.fixture
def signed_up(alice) -> SignedUp:
    """Alice's member person@example.com, whose password is set."""
    link = create_member(account=alice, email=EMAIL)
    password = marked("password")
    member = set_password_with_link(
        secret=secret_of(link.url), password=password, password_again=password, request_id="t"
    )
    return SignedUp(member=member, email=EMAIL, password=password)
