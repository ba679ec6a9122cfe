"""Management commands: their output, and a clear error with a non-zero exit."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from services import audit
from services.crypto import KeyRing
from services.models import Account, Agent, AgentToken, ApiToken, AuditEvent, Grant
from tests.conftest import KEY_A
from tests.support.helpers import Api, manage

TOKEN = re.compile(r"cvt_[0-9A-Za-z]{46}")


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
class TestAccountsAndTokens:
    def test_create_account(self):
        out, _ = run("create_account", "Acme Corp")
        assert out.strip() == "created account acme-corp"
        assert Account.objects.filter(name="acme-corp").exists()

    def test_create_account_refuses_duplicates_and_bad_names(self):
        run("create_account", "acme")
        with pytest.raises(CommandError, match="exists already"):
            run("create_account", "acme")
        with pytest.raises(CommandError, match="account name"):
            run("create_account", "a b/c")

    def test_issue_token_prints_the_token_alone(self, alice):
        out, err = run("issue_token", "alice", "--name", "ci")
        assert TOKEN.fullmatch(out.strip())
        assert out.count("\n") == 1
        token = out.strip()
        assert token not in err
        assert token[:12] in err
        assert Api(Client(), token).list().status_code == 200
        assert ApiToken.objects.get(prefix=token[:12]).name == "ci"

    def test_issue_token_with_expiry(self, alice):
        out, _ = run("issue_token", "alice", "--expires-in", "7")
        token = ApiToken.objects.get(prefix=out.strip()[:12])
        days = (token.expires_at - token.created_at).total_seconds() / 86400
        assert 6.99 < days <= 7.01

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["nobody"], "no account named"),
            (["alice", "--expires-in", "0"], "--expires-in"),
            (["alice", "--expires-in", "100000"], "from 1 to 3650"),
        ],
    )
    def test_issue_token_errors(self, alice, args, message):
        with pytest.raises(CommandError, match=message):
            run("issue_token", *args)

    def test_issuing_and_revoking_are_audited_to_the_account(self, alice):
        token = run("issue_token", "alice")[0].strip()
        run("revoke_token", token[:12])
        events = list(
            AuditEvent.objects.filter(account=alice)
            .order_by("seq")
            .values_list("action", "token_prefix", "target")
        )
        assert events[-2:] == [
            ("tokens.issue", "cli", token[:12]),
            ("tokens.revoke", "cli", token[:12]),
        ]
        assert audit.verify_chain(Account.objects.get(pk=alice.pk))[1] is None

    def test_a_deactivated_account_gets_no_token(self, alice):
        tokens_before = ApiToken.objects.filter(account=alice).count()  # the fixture's
        run("deactivate_account", "alice")
        with pytest.raises(CommandError, match="deactivated"):
            run("issue_token", "alice")
        assert ApiToken.objects.filter(account=alice).count() == tokens_before

    def test_a_deactivated_account_gets_no_agent_token(self, alice):
        run("create_agent", "alice", "reporter")
        run("deactivate_account", "alice")
        with pytest.raises(CommandError, match="deactivated"):
            run("issue_agent_token", "alice", "reporter")
        assert not AgentToken.objects.filter(account=alice).exists()

    def test_deactivate_and_reactivate(self, alice_api, alice):
        out, _ = run("deactivate_account", "alice")
        assert out.strip() == "alice is deactivated"
        assert alice_api.list().status_code == 401
        assert run("deactivate_account", "alice")[0].strip() == "alice is deactivated already"
        assert run("reactivate_account", "alice")[0].strip() == "alice is active"
        assert alice_api.list().status_code == 200
        actions = list(
            AuditEvent.objects.filter(account=alice, token_prefix="cli")
            .order_by("seq")
            .values_list("action", flat=True)
        )
        assert actions == ["tokens.issue", "accounts.deactivate", "accounts.reactivate"]

    def test_expire_token_now_and_later(self, alice_api, alice):
        run("expire_token", alice_api.token[:12], "--in-days", "2")
        token = ApiToken.objects.get(prefix=alice_api.token[:12])
        assert 1.99 < (token.expires_at - timezone.now()).total_seconds() / 86400 <= 2
        assert alice_api.list().status_code == 200
        run("expire_token", alice_api.token)  # a whole token, by its digest
        assert alice_api.list().status_code == 401
        assert "tokens.expire" in AuditEvent.objects.values_list("action", flat=True)
        with pytest.raises(CommandError, match="--in-days"):
            run("expire_token", alice_api.token[:12], "--in-days", "-1")

    def test_revoke_token(self, alice_api):
        prefix = alice_api.token[:12]
        out, _ = run("revoke_token", prefix)
        assert out.strip() == f"revoked {prefix} of alice"
        assert alice_api.list().status_code == 401

    def test_revoke_unknown_prefix(self, db):
        with pytest.raises(CommandError, match="no token with prefix"):
            run("revoke_token", "cvt_00000000")

    def test_an_unknown_prefix_is_named_as_the_operator_typed_it(self, db):
        for command in ("revoke_token", "expire_token"):
            with pytest.raises(CommandError) as refused:
                run(command, "xyz")
            assert str(refused.value) == (
                "no token with prefix 'xyz': a prefix is cvt_ or cva_ and 8 characters, "
                "as list_tokens and list_agent_tokens show"
            )

    def test_revoking_a_revoked_token_says_so_and_changes_nothing(self, alice_api, alice):
        prefix = alice_api.token[:12]
        run("revoke_token", prefix)
        token = ApiToken.objects.get(prefix=prefix)
        events = AuditEvent.objects.count()
        out, _ = run("revoke_token", prefix)  # no CommandError: exit status 0
        moment = f"{token.revoked_at:%Y-%m-%d %H:%M:%S}"
        assert out == f"{prefix} of alice was revoked already, at {moment} UTC\n"
        assert ApiToken.objects.get(prefix=prefix).revoked_at == token.revoked_at
        assert AuditEvent.objects.count() == events

    def test_expiring_a_revoked_token_is_refused_and_changes_nothing(self, alice_api, alice):
        prefix = alice_api.token[:12]
        run("revoke_token", prefix)
        token = ApiToken.objects.get(prefix=prefix)
        events = AuditEvent.objects.count()
        for days in ("0", "3"):
            with pytest.raises(CommandError) as refused:
                run("expire_token", prefix, "--in-days", days)
            moment = f"{token.revoked_at:%Y-%m-%d %H:%M:%S}"
            assert str(refused.value) == (
                f"{prefix} of alice was revoked at {moment} UTC; a revoked token stays "
                "refused, so its expiry is left as it was"
            )
        assert ApiToken.objects.get(prefix=prefix).expires_at == token.expires_at
        assert AuditEvent.objects.count() == events

    def test_revoke_a_whole_token_by_its_digest(self, alice_api):
        out, err = run("revoke_token", alice_api.token)
        assert out.strip() == f"revoked {alice_api.token[:12]} of alice"
        assert alice_api.token not in out + err
        assert alice_api.list().status_code == 401

    def test_a_whole_token_is_never_echoed(self, db):
        from services import bearer_tokens

        unknown = bearer_tokens.generate().plaintext
        mistyped = unknown[:-1] + ("a" if unknown[-1] != "a" else "b")
        for given in (unknown, mistyped):
            with pytest.raises(CommandError) as refused:
                run("revoke_token", given)
            assert str(refused.value) == f"no token with prefix {given[:12]!r}"

    def test_list_tokens_shows_prefixes_and_status_only(self, alice_api, bob_api):
        run("revoke_token", bob_api.token[:12])
        out, _ = run("list_tokens")
        assert alice_api.token[:12] in out
        assert bob_api.token[:12] in out
        assert alice_api.token not in out
        assert bob_api.token not in out
        for digest in ApiToken.objects.values_list("digest", flat=True):
            assert digest not in out
        lines = {line.split()[0]: line for line in out.splitlines()[1:]}
        assert lines[bob_api.token[:12]].endswith("revoked")
        assert lines[alice_api.token[:12]].endswith("active")
        # Created to the second, as the admin shows it.
        created = ApiToken.objects.get(prefix=alice_api.token[:12]).created_at
        assert created.strftime("%Y-%m-%d %H:%M:%S") in lines[alice_api.token[:12]]
        only_alice, _ = run("list_tokens", "alice")
        assert bob_api.token[:12] not in only_alice

    def test_list_tokens_of_an_unknown_account(self, db):
        with pytest.raises(CommandError, match="no account named"):
            run("list_tokens", "nobody")

    def test_bootstrap_demo_runs_once(self, db):
        out, _ = run("bootstrap_demo")
        token = TOKEN.search(out).group(0)
        assert f"export TOKEN={token}" in out
        assert 'curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8000/api/v1/services' in out
        assert Api(Client(), token).list().status_code == 200
        again, _ = run("bootstrap_demo")
        assert TOKEN.search(again) is None
        assert Account.objects.count() == 1


def test_generate_key_prints_a_usable_entry():
    out, _ = run("generate_key")
    entry = out.strip()
    ring = KeyRing.parse(entry)
    assert ring.primary_id == entry.split(":")[0]
    assert run("generate_key")[0].strip() != entry


@pytest.mark.slow
class TestExitCodes:
    def test_a_refused_command_exits_non_zero_with_a_message(self):
        result = manage("create_account", "a b/c")
        assert result.returncode != 0
        assert "account name" in result.stderr
        assert "Traceback" not in result.stderr

    def test_bad_option_exits_non_zero(self):
        result = manage("issue_token", "demo", "--expires-in", "-3")
        assert result.returncode != 0
        assert "--expires-in" in result.stderr


AGENT_TOKEN = re.compile(r"cva_[0-9A-Za-z]{46}")


@pytest.mark.django_db
class TestAgentCommands:
    def test_create_agent_and_issue_its_token(self, alice, alice_api):
        out, _ = run(
            "create_agent",
            "alice",
            "Report Bot",
            "--service",
            "GitHub",
            "--service",
            "slack",
            "--read",
        )
        assert out.strip() == (
            "created agent report-bot of alice: github (read, all methods, /); "
            "slack (read, all methods, /)"
        )
        out, err = run("issue_agent_token", "alice", "report-bot", "--expires-in", "3")
        token = out.strip()
        assert AGENT_TOKEN.fullmatch(token)
        assert token not in err
        alice_api.store("github", [{"keyName": "api_key", "value": "ghp"}])
        response = Client().get(
            "/api/v1/agent/credentials/github", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200
        # Changes made from the command line are audited with the actor `cli`.
        from services.models import AuditEvent

        actors = set(AuditEvent.objects.values_list("token_prefix", flat=True))
        assert "cli" in actors

    def test_create_agent_replaces_grants(self, alice):
        run("create_agent", "alice", "bot", "--service", "github")
        out, _ = run("create_agent", "alice", "bot")
        assert out.strip() == "updated agent bot of alice: no services"

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["create_agent", "nobody", "bot"], "no account named"),
            (["create_agent", "alice", "bad name/x"], "1 to 64 characters"),
            (["create_agent", "alice", "bot", "--service", "../etc"], "1 to 64 characters"),
            (["issue_agent_token", "alice", "ghost"], "no agent named"),
            (["issue_agent_token", "alice", "bot", "--expires-in", "0"], "--expires-in"),
        ],
    )
    def test_errors(self, alice, args, message):
        run("create_agent", "alice", "bot")
        with pytest.raises(CommandError, match=message):
            run(*args)

    def test_list_agent_tokens_shows_prefixes_and_status_only(self, alice):
        run("create_agent", "alice", "bot", "--service", "github")
        first = run("issue_agent_token", "alice", "bot")[0].strip()
        second = run("issue_agent_token", "alice", "bot")[0].strip()
        run("revoke_token", second)
        out, _ = run("list_agent_tokens", "alice", "bot")
        lines = {line.split()[0]: line for line in out.splitlines()[1:]}
        assert set(lines) == {first[:12], second[:12]}
        assert lines[first[:12]].endswith("active")
        assert lines[second[:12]].endswith("revoked")
        assert first not in out
        assert second not in out
        Agent.objects.filter(name="bot").delete()
        assert run("list_agent_tokens", "alice")[0].splitlines()[1].endswith("agent deleted")

    def test_list_agent_tokens_of_an_unknown_agent_is_an_error(self, alice):
        run("create_agent", "alice", "bot", "--service", "github")
        with pytest.raises(CommandError) as refused:
            run("list_agent_tokens", "alice", "ghost")
        assert str(refused.value) == "no agent named 'ghost' in alice"
        # An agent without a token yet lists an empty table.
        assert run("list_agent_tokens", "alice", "bot")[0].splitlines()[1:] == []

    def test_list_agent_tokens_of_a_deleted_agent_still_lists_its_tokens(self, alice):
        run("create_agent", "alice", "bot", "--service", "github")
        token = run("issue_agent_token", "alice", "bot")[0].strip()
        Agent.objects.filter(name="bot").delete()
        [line] = run("list_agent_tokens", "alice", "bot")[0].splitlines()[1:]
        assert line.startswith(token[:12])
        assert line.endswith("agent deleted")

    def test_revoke_token_revokes_agent_tokens(self, alice):
        run("create_agent", "alice", "bot", "--service", "github")
        token = run("issue_agent_token", "alice", "bot")[0].strip()
        out, _ = run("revoke_token", token[:12])
        assert out.strip() == f"revoked {token[:12]} of alice"
        response = Client().get(
            "/api/v1/agent/credentials/github", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 401


@pytest.mark.slow
def test_verify_audit_exits_non_zero_on_a_broken_chain(tmp_path):
    """As an operator runs it: a fresh database, a real chain, an edit, the exit code."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'audit.sqlite3'}",
        "CREDVAULT_ENCRYPTION_KEYS": f"k1:{KEY_A}",
    }
    assert manage("migrate", "-v", "0", **env).returncode == 0
    assert manage("create_account", "acme", **env).returncode == 0
    assert manage("create_agent", "acme", "bot", "--service", "github", **env).returncode == 0
    intact = manage("verify_audit", **env)
    assert intact.returncode == 0, intact.stderr
    assert "account acme: 1 events, chain intact" in intact.stdout
    edit = "from services.models import AuditEvent; AuditEvent.objects.update(status=500)"
    assert manage("shell", "-v", "0", "-c", edit, **env).returncode == 0
    broken = manage("verify_audit", "acme", **env)
    assert broken.returncode != 0
    assert "broken at seq 1" in broken.stderr


@pytest.mark.django_db
def test_create_agent_gives_brokered_grants_with_their_methods_and_paths(alice):
    out, _ = run(
        "create_agent",
        "alice",
        "bot",
        "--service",
        "github",
        "--method",
        "POST",
        "--method",
        "GET",
        "--path",
        "/repos",
        "--path",
        "/user",
    )
    assert out.strip() == "created agent bot of alice: github (proxy, GET,POST, /repos,/user)"
    grant = Grant.objects.get()
    assert (grant.access, grant.methods, grant.paths) == (
        "proxy",
        ["GET", "POST"],
        ["/repos", "/user"],
    )
    with pytest.raises(CommandError, match="path prefix"):
        run("create_agent", "alice", "bot", "--service", "github", "--path", "/a/../b")
