"""Account tokens and bearer authentication."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from services import bearer_tokens
from services.accounts import issue_token
from services.models import AgentToken, ApiToken
from tests.support.helpers import Api, assert_problem, audit_record_queries

TOKEN_SHAPE = re.compile(r"cvt_[0-9A-Za-z]{46}")
INVALID = 'Bearer realm="credvault", error="invalid_token"'


class TestTokenFormat:
    def test_generated_tokens_have_the_documented_shape(self):
        new = bearer_tokens.generate()
        assert TOKEN_SHAPE.fullmatch(new.plaintext)
        assert new.prefix == new.plaintext[:12]
        assert new.digest == hashlib.sha256(new.plaintext.encode()).hexdigest()
        assert bearer_tokens.is_well_formed(new.plaintext)

    def test_checksum_is_crc32_of_the_random_part_in_base62(self):
        new = bearer_tokens.generate()
        random_part, check = new.plaintext[4:44], new.plaintext[44:]
        assert check == bearer_tokens.checksum(random_part)
        import zlib

        value = 0
        for char in check:
            value = value * 62 + bearer_tokens.BASE62.index(char)
        assert value == zlib.crc32(random_part.encode())

    def test_every_single_character_change_is_caught(self):
        token = bearer_tokens.generate().plaintext
        for position in range(4, len(token)):
            for replacement in "0aZ":
                if token[position] == replacement:
                    continue
                changed = token[:position] + replacement + token[position + 1 :]
                assert not bearer_tokens.is_well_formed(changed), position

    @pytest.mark.parametrize(
        "bad",
        ["", "cvt_", "cvt_short", "xyz_" + "a" * 46, "cvt_" + "a" * 47, "cvt_" + "!" * 46],
    )
    def test_malformed_tokens_are_not_well_formed(self, bad):
        assert not bearer_tokens.is_well_formed(bad)

    def test_repr_of_a_new_token_shows_the_prefix_only(self):
        new = bearer_tokens.generate()
        assert new.plaintext not in repr(new)


@pytest.mark.django_db
class TestStorage:
    def test_only_digest_and_prefix_are_stored(self, alice):
        issued = issue_token(account=alice, name="ci")
        row = ApiToken.objects.values().get(pk=issued.token.pk)
        assert issued.plaintext not in str(row)
        assert row["digest"] == hashlib.sha256(issued.plaintext.encode()).hexdigest()
        assert row["prefix"] == issued.plaintext[:12]


@pytest.mark.django_db
class TestAuthentication:
    def test_no_token_is_not_authenticated(self, anonymous_api):
        response = anonymous_api.list()
        assert_problem(response, 401, "not_authenticated")
        assert response["WWW-Authenticate"] == 'Bearer realm="credvault"'

    def test_other_scheme_is_not_authenticated(self, db):
        response = Client().get("/api/v1/services", headers={"Authorization": "Basic dXNlcjpwdw=="})
        assert_problem(response, 401, "not_authenticated")

    def test_scheme_is_case_insensitive(self, alice_account_and_token):
        _, token = alice_account_and_token
        response = Client().get("/api/v1/services", headers={"Authorization": f"bEaReR {token}"})
        assert response.status_code == 200

    def _refusal(self, token: str):
        response = Client().get("/api/v1/services", headers={"Authorization": f"Bearer {token}"})
        body = assert_problem(response, 401, "invalid_token")
        assert response["WWW-Authenticate"] == INVALID
        assert token not in response.content.decode()
        return body

    def test_every_invalid_token_gets_the_same_answer(self, alice, alice_account_and_token):
        _, good = alice_account_and_token
        unknown = bearer_tokens.generate().plaintext
        revoked = issue_token(account=alice)
        revoked.token.revoked_at = timezone.now()
        revoked.token.save()
        expired = issue_token(account=alice, expires_in=timedelta(days=1))
        ApiToken.objects.filter(pk=expired.token.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        bodies = [
            self._refusal(token)
            for token in (
                "cvt_malformed",
                good[:-1] + ("a" if good[-1] != "a" else "b"),
                unknown,
                revoked.plaintext,
                expired.plaintext,
                "two parts",
            )
        ]
        alice.is_active = False
        alice.save()
        bodies.append(self._refusal(good))
        assert all(body == bodies[0] for body in bodies)

    def test_a_malformed_token_makes_no_query(self, django_assert_num_queries):
        client = Client()
        with django_assert_num_queries(0):
            response = client.get(
                "/api/v1/services", headers={"Authorization": "Bearer cvt_" + "x" * 46}
            )
        assert response.status_code == 401

    def test_a_token_with_an_expiry_in_the_future_works(self, alice):
        issued = issue_token(account=alice, expires_in=timedelta(days=1))
        assert Api(Client(), issued.plaintext).list().status_code == 200


@pytest.mark.django_db
class TestLastUsed:
    def test_written_at_most_once_a_minute(self, alice, django_assert_num_queries):
        issued = issue_token(account=alice)
        api = Api(Client(), issued.plaintext)
        with django_assert_num_queries(3 + audit_record_queries()):
            # token lookup, UPDATE last_used_at, SELECT services, the audit event
            assert api.list().status_code == 200
        first = ApiToken.objects.get(pk=issued.token.pk).last_used_at
        assert first is not None
        with django_assert_num_queries(2 + audit_record_queries()):
            # token lookup, SELECT services, the audit event: no last_used_at write
            api.list()
        assert ApiToken.objects.get(pk=issued.token.pk).last_used_at == first

    def test_written_again_after_a_minute(self, alice):
        issued = issue_token(account=alice)
        old = timezone.now() - timedelta(minutes=2)
        ApiToken.objects.filter(pk=issued.token.pk).update(last_used_at=old)
        Api(Client(), issued.plaintext).list()
        assert ApiToken.objects.get(pk=issued.token.pk).last_used_at > old


class TestTokenLookup:
    """`find_token` reads a token and its account (and agent) in one query, as plain stored
    values; authentication turns an accepted one into a frozen Principal."""

    @pytest.fixture
    def tokens_of_both_kinds(self, db):
        from services import agents
        from services.accounts import create_account
        from services.audit import Actor
        from services.grants import GrantSpec, given_in_list

        account = create_account(name="lookup")
        actor = Actor.command(account.pk)
        agents.put_agent(actor=actor, name="bot", services=given_in_list([GrantSpec("github")]))
        return [
            (ApiToken, issue_token(account=account, name="cli").plaintext),
            (
                AgentToken,
                agents.issue_agent_token(actor=actor, name="bot").issued.plaintext,
            ),
        ]

    def test_a_looked_up_token_holds_the_stored_values(
        self, tokens_of_both_kinds, django_assert_num_queries
    ):
        from services.api.authentication import find_token

        for model, plaintext in tokens_of_both_kinds:
            model.objects.filter(digest=bearer_tokens.digest(plaintext)).update(
                last_used_at=timezone.now() - timedelta(hours=1),
                expires_at=timezone.now() + timedelta(days=3),
            )
            stored = model.objects.select_related("account").get(
                digest=bearer_tokens.digest(plaintext)
            )
            with django_assert_num_queries(1):
                token = find_token(plaintext)
            assert token.kind == ("agent" if model is AgentToken else "account")
            assert (token.id, token.prefix, token.account_id) == (
                stored.pk,
                stored.prefix,
                stored.account_id,
            )
            assert (token.last_used_at, token.expires_at, token.revoked_at) == (
                stored.last_used_at,
                stored.expires_at,
                None,
            )
            assert token.last_used_at.tzinfo is not None
            assert (token.account_name, token.account_active) == ("lookup", True)
            if model is AgentToken:
                assert (token.agent_id, token.agent_name) == (stored.agent_id, "bot")
            else:
                assert (token.agent_id, token.agent_name) == (None, "")

    def test_the_principal_is_frozen_and_holds_no_token(self, tokens_of_both_kinds):
        import dataclasses

        from services.api.authentication import find_token, principal_of

        for _, plaintext in tokens_of_both_kinds:
            principal = principal_of(find_token(plaintext))
            with pytest.raises(dataclasses.FrozenInstanceError):
                principal.account_id = 0
            assert plaintext not in repr(principal)
            assert bearer_tokens.digest(plaintext) not in repr(principal)
            assert principal.account_name == "lookup"
